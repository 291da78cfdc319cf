"""What a protocol adapter implements, and how the client finds one by URL scheme.

Adapters register under the ``msgclient.protocols`` entry-point group, one entry per URL
scheme (``pulsar``, ``pulsar+ssl``, ...), pointing at a ``ProtocolBackend`` subclass. The
core imports no adapter: a third party can plug in a protocol by installing a package.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

import attrs

from msgclient.core.receive.ack_grouping_tracker import AckBatch
from msgclient.core.send.pending_queue import OpSend
from msgclient.core.send.routing import Router, make_router
from msgclient.errors import MsgClientError, UnknownProtocolError
from msgclient.message import Message, MessageId
from msgclient.options import ClientOptions, ConsumerOptions, ProducerOptions
from msgclient.url import ServiceUrl

ENTRY_POINT_GROUP = "msgclient.protocols"


@attrs.frozen
class ProducerRegistration:
    """What the broker told a producer when it (re)registered."""

    producer_name: str
    last_sequence_id: int
    max_message_size: int
    schema_version: bytes | None = None  # the version the broker gave the producer's schema


class ProducerEvents(ABC):
    """The core's half of a partition producer, called by the adapter's transport."""

    @abstractmethod
    def on_receipt(
        self,
        sequence_id: int,
        highest_sequence_id: int,
        message_ids: Callable[[OpSend], list[MessageId]],
    ) -> None:
        """The broker stored the op with ``sequence_id``.

        ``message_ids(op)`` builds the ids of the op's messages, in order.
        """

    @abstractmethod
    def on_send_error(self, sequence_id: int, error: MsgClientError) -> None:
        """The broker refused the op with ``sequence_id`` for good: fail its messages."""

    @abstractmethod
    def on_disconnected(self, error: Exception) -> None:
        """The connection died or the broker closed the producer: reconnect and resend."""


class ProducerTransport(ABC):
    """The adapter's half of a partition producer: registration, encoding, writing."""

    @abstractmethod
    async def connect(self) -> ProducerRegistration:
        """Find the broker, connect, register the producer. Raises on failure."""

    @abstractmethod
    def encode(self, op: OpSend) -> bytes:
        """The wire frame for ``op`` (compressed as configured); called once per op."""

    @abstractmethod
    def write(self, op: OpSend) -> None:
        """Send an encoded op (``op.frame``) on the current connection (dropped if there is
        none: the core writes every pending op again after a reconnect)."""

    @abstractmethod
    def drop_connection(self, reason: str) -> None:
        """Close the current connection; its loss comes back as ``on_disconnected``."""

    @abstractmethod
    async def close(self) -> None:
        """Unregister from the broker (best effort) and stop receiving events."""


class ConsumerEvents(ABC):
    """The core's half of a partition consumer, called by the adapter's transport."""

    @abstractmethod
    def on_messages(self, messages: Sequence[Message]) -> None:
        """One dispatch arrived (a batch entry gives several messages, in order; never
        none). The sequence may make its Messages on access (a MessageBlock)."""

    @abstractmethod
    def on_disconnected(self, error: Exception) -> None:
        """The connection died or the broker closed the consumer: resubscribe."""

    @abstractmethod
    def on_active_consumer_change(self, is_active: bool) -> None:
        """Failover: this consumer became the active one (True) or a standby (False)."""

    @abstractmethod
    def on_reached_end_of_topic(self) -> None:
        """The topic was terminated and everything in it was delivered."""

    @abstractmethod
    def on_partition_revoked(self) -> None:
        """Another member of the group reads this partition now (Kafka): drop what is
        queued of it and forget its ack timeouts; it may be assigned back later."""


class ConsumerTransport(ABC):
    """The adapter's half of a partition consumer: subscription and its commands."""

    # Redeliveries name their messages on every subscription type: Kafka's are local
    # refetches, so Exclusive and Failover need not ask for everything unacked again.
    redelivers_by_id = False

    @abstractmethod
    async def connect(self) -> None:
        """Find the broker, connect, subscribe (or resubscribe). Raises on failure."""

    @abstractmethod
    def flow(self, permits: int) -> None:
        """Grant the broker ``permits`` more messages on the current connection."""

    @abstractmethod
    def acknowledge(self, batch: AckBatch) -> Awaitable[None] | None:
        """Write one group of acks; with ack receipts, an awaitable of the confirmation."""

    @abstractmethod
    def redeliver(self, message_ids: list[MessageId] | None) -> None:
        """Ask for ``message_ids`` again (None: everything unacked, on any subscription)."""

    @abstractmethod
    async def seek(self, position: MessageId | int) -> None:
        """Move the subscription to a message id, or a publish time in ms."""

    @abstractmethod
    async def get_last_message_id(self) -> MessageId | None:
        """The id of the last message in the topic partition (None when it is empty)."""

    @abstractmethod
    async def unsubscribe(self) -> None:
        """Delete the subscription on the broker."""

    @abstractmethod
    def drop_connection(self, reason: str) -> None:
        """Close the current connection; its loss comes back as ``on_disconnected``."""

    @abstractmethod
    async def close(self) -> None:
        """Close the consumer on the broker (best effort) and stop receiving events."""


class ProtocolBackend(ABC):
    """One per Client: the adapter's connections, lookups and topic naming."""

    default_port: int
    # The protocol's own defaults, under the options a user passes (Kafka's linger and
    # batch size differ from Pulsar's batching delay and size, for instance).
    producer_defaults: Mapping[str, Any] = {}
    consumer_defaults: Mapping[str, Any] = {}

    def make_router(self, options: ProducerOptions, partitions: int) -> Router:
        """Which partition each message goes to (Pulsar's routing modes by default)."""
        return make_router(options, partitions)

    def partition_of(self, message_id: MessageId) -> int | None:
        """The partition a message id names, where ids name one (Kafka); None otherwise."""
        return None

    def check_consumer(self, options: ConsumerOptions) -> None:  # noqa: B027 (optional hook)
        """Refuse, with a clear error, what the protocol cannot do (subscription types...)."""

    def subscription_context(
        self, topics: list[str], subscription: str, options: ConsumerOptions
    ) -> object | None:
        """State shared by the partition transports of one ``subscribe`` call (Kafka's
        group membership); None where a protocol has none. Given to ``consumer_transport``."""
        return None

    @abstractmethod
    def normalize_topic(self, topic: str) -> str:
        """The canonical topic name; raises InvalidTopicNameError on a bad one."""

    @abstractmethod
    async def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` (0: not partitioned)."""

    @abstractmethod
    def partition_name(self, topic: str, partition: int) -> str:
        """The name of one partition of a partitioned topic."""

    @abstractmethod
    def producer_transport(
        self, topic: str, partition: int, options: ProducerOptions, events: ProducerEvents
    ) -> ProducerTransport:
        """A transport for one (partition) producer; ``partition`` is -1 when unpartitioned."""

    @abstractmethod
    def consumer_transport(
        self,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        events: ConsumerEvents,
        context: object | None,
    ) -> ConsumerTransport:
        """A transport for one (partition) consumer; ``partition`` is -1 when unpartitioned;
        ``context`` is what ``subscription_context`` returned for its subscribe call."""

    @abstractmethod
    async def close(self) -> None:
        """Close every connection."""


BackendFactory = Callable[[ServiceUrl, ClientOptions], ProtocolBackend]


def load_backend(url: ServiceUrl, options: ClientOptions) -> ProtocolBackend:
    """Instantiate the adapter registered for ``url.scheme``."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    for entry in found:
        if entry.name == url.scheme:
            factory: BackendFactory = entry.load()
            return factory(url, options)
    known = ", ".join(sorted(f"{e.name}://" for e in found)) or "none installed"
    raise UnknownProtocolError(
        f"no protocol adapter for scheme {url.scheme!r} in {url.raw!r}; known schemes: {known}"
    )
