"""The contract between the core and the protocol adapters, and how the client finds one.

Everything that crosses the boundary is here: what the core hands an adapter (``OpSend``,
``AckBatch``), what an adapter registers a producer with (``ProducerRegistration``), the
router type, the Events/Transport/Backend interfaces, and the entry-point lookup. This
module imports the vocabulary both sides speak (messages and ids, errors, options, the
service URL) and nothing of the core or of an adapter; the core and the adapters import it.

Adapters register under the ``msgclient.protocols`` entry-point group, one entry per URL
scheme (``pulsar``, ``pulsar+ssl``, ...), pointing at a ``ProtocolBackend`` subclass. The
core imports no adapter: a third party can plug in a protocol by installing a package.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from msgclient.admin.transport import AdminTransport
from msgclient.errors import (
    AdapterLoadError,
    MsgClientError,
    NotSupportedError,
    UnknownProtocolError,
)
from msgclient.message import (
    Message,
    MessageId,
    OutgoingMessage,
    SendCallback,
    call_each,
    fail_future,
)
from msgclient.options import (
    ClientOptions,
    ConsumerOptions,
    ProducerOptions,
    RegexSubscriptionMode,
)
from msgclient.url import ServiceUrl

ENTRY_POINT_GROUP = "msgclient.protocols"

# Which partition each message goes to (an index into the topic's partitions).
Router = Callable[[OutgoingMessage], int]

TRANSACTIONS_NOT_SUPPORTED = (
    "transactions are not supported on this protocol yet (Pulsar transactions need the "
    "broker's transaction coordinator, which msgclient does not speak yet); Kafka "
    "transactions work (kafka://)"
)

# What one ``subscribe`` call shares among its partition transports (Kafka's group
# membership; None on Pulsar).
SubscriptionT = TypeVar("SubscriptionT")


# -- what crosses on the send path ------------------------------------------------------


@attrs.frozen
class ProducerRegistration:
    """What the broker told a producer when it (re)registered."""

    producer_name: str
    last_sequence_id: int
    max_message_size: int
    schema_version: bytes | None = None  # the version the broker gave the producer's schema


@dataclass(frozen=True, slots=True)
class ValueColumns:
    """The records of a bulk send (``send_many``) as columns: values (None: a null value),
    and keys, properties (Kafka headers) and event timestamps (ms), each None when not
    given at all, or None for a record without one."""

    values: Sequence[bytes | None]
    keys: Sequence[str | bytes | None] | None = None
    properties: Sequence[Mapping[str, str] | None] | None = None
    event_timestamps: Sequence[int | None] | None = None
    # Every value is bytes of this size (none is None), as a busy producer's usually
    # are: an encoder may then lay the records out without looking at each. None: unknown.
    uniform_size: int | None = None

    def part(self, positions: Sequence[int] | range) -> ValueColumns:
        """The records at ``positions`` (a range: a slice of each column)."""
        if isinstance(positions, range):
            cut = slice(positions.start, positions.stop)
            return ValueColumns(
                self.values[cut],
                None if self.keys is None else self.keys[cut],
                None if self.properties is None else self.properties[cut],
                None if self.event_timestamps is None else self.event_timestamps[cut],
                self.uniform_size,
            )
        return ValueColumns(
            [self.values[i] for i in positions],
            None if self.keys is None else [self.keys[i] for i in positions],
            None if self.properties is None else [self.properties[i] for i in positions],
            None
            if self.event_timestamps is None
            else [self.event_timestamps[i] for i in positions],
            self.uniform_size,
        )


def uniform_size(values: Sequence[bytes | None]) -> int | None:
    """The size of every value when all are bytes of one size, else None; found by two
    passes in C (a Python loop over the values costs more than their encoding)."""
    if type(values[0]) is not bytes or set(map(type, values)) != {bytes}:
        return None
    sizes = set(map(len, values))  # type: ignore[arg-type]  # all bytes: checked above
    return sizes.pop() if len(sizes) == 1 else None


# The ids of an op's messages, in order, made when asked (a bulk op's are never made
# unless the caller looks).
MessageIdsOf = Callable[["OpSend"], list[MessageId]]


class OpSend:
    """One write to the broker: a batch of messages, or a single unbatched message, or
    (``of_columns``) a batch of a bulk send.

    ``messages`` (or ``columns``) serve the encoding only: once the frame holds them the
    producer calls ``encoded`` and they go. What waits for the receipt is each message's
    future (and callback): one object per message fewer for the garbage collector to scan
    while thousands of messages are in flight (its full collections cost a third of a busy
    producer's time, measured). A message sent with a callback has no future at all. A
    bulk op has one future for all its messages: it gets a function of no arguments that
    makes their ids.
    """

    __slots__ = (
        "callbacks",
        "chunks",
        "columns",
        "count",
        "created_at",
        "frame",
        "futures",
        "highest_sequence_id",
        "is_batch",
        "is_bulk",
        "messages",
        "payload_bytes",
        "sequence_id",
        "settled",
    )

    def __init__(
        self, messages: list[OutgoingMessage], is_batch: bool, payload_bytes: int, created_at: float
    ) -> None:
        self.messages = messages
        self.count = len(messages)
        # a MessageId each (None: a message sent with a callback and no future); a bulk
        # op's one future: a function that makes its ids. None: no message has a future.
        futures = [message.future for message in messages]
        self.futures: list[asyncio.Future[Any] | None] | None = futures if any(futures) else None
        callbacks = [message.callback for message in messages]
        self.callbacks = callbacks if any(callbacks) else None
        self.settled: asyncio.Future[None] | None = None  # made by a flush waiting for it
        self.is_batch = is_batch
        self.payload_bytes = payload_bytes
        self.created_at = created_at
        self.sequence_id: int = messages[0].sequence_id  # type: ignore[assignment]
        self.highest_sequence_id: int = messages[-1].sequence_id  # type: ignore[assignment]
        self.frame = b""  # the encoded frame, kept to resend after a reconnect
        self.columns: ValueColumns | None = None
        self.is_bulk = False
        # How many broker messages the op went out as: a chunked message's chunk count
        # (set by the transport's encode). Each holds a pending-message permit.
        self.chunks = 1

    @classmethod
    def of_columns(
        cls,
        columns: ValueColumns,
        first_sequence_id: int,
        future: asyncio.Future[Callable[[], list[MessageId]]],
        payload_bytes: int,
        created_at: float,
    ) -> OpSend:
        """A batch of a bulk send: ``columns`` numbered from ``first_sequence_id``;
        ``future`` gets a function that makes the messages' ids."""
        op = cls._of_columns(columns, first_sequence_id, payload_bytes, created_at)
        op.futures = [future]
        op.callbacks = None
        op.is_bulk = True
        return op

    @classmethod
    def of_plain(
        cls,
        columns: ValueColumns,
        first_sequence_id: int,
        futures: list[asyncio.Future[Any] | None],
        callbacks: list[SendCallback | None],
        payload_bytes: int,
        created_at: float,
    ) -> OpSend:
        """A batch of ``send_async`` messages without options, kept as columns (no
        ``OutgoingMessage`` each): each has its future or callback, as in a batch of
        messages."""
        op = cls._of_columns(columns, first_sequence_id, payload_bytes, created_at)
        op.futures = futures if any(futures) else None
        op.callbacks = callbacks if any(callbacks) else None
        op.is_bulk = False
        return op

    @classmethod
    def _of_columns(
        cls, columns: ValueColumns, first_sequence_id: int, payload_bytes: int, created_at: float
    ) -> OpSend:
        op = cls.__new__(cls)
        op.messages = []
        op.columns = columns
        op.count = len(columns.values)
        op.settled = None
        op.is_batch = True
        op.payload_bytes = payload_bytes
        op.created_at = created_at
        op.sequence_id = first_sequence_id
        op.highest_sequence_id = first_sequence_id + op.count - 1
        op.frame = b""
        op.chunks = 1
        return op

    @property
    def permits(self) -> int:
        """The pending-message permits the op holds: one a message, one a chunk."""
        return self.count + self.chunks - 1

    def encoded(self, frame: bytes) -> None:
        """The frame holds the messages now: keep it, drop them (and their payloads)."""
        self.frame = frame
        self.messages = []
        self.columns = None

    def wait_settled(self) -> asyncio.Future[None]:
        """A future done when the op completes or fails (``flush`` waits for the last)."""
        if self.settled is None:
            self.settled = asyncio.get_running_loop().create_future()
        return self.settled

    def complete(self, make_ids: MessageIdsOf) -> None:
        """Each message was stored; ``make_ids(op)`` gives their ids, in order."""
        self._settle()
        futures = self.futures
        if self.is_bulk:
            future = futures[0] if futures else None
            if future is not None and not future.done():
                self.frame = b""  # the ids' function keeps the op: not its bytes
                future.set_result(functools.partial(make_ids, self))
            return
        message_ids = make_ids(self)
        if futures is not None:
            for future, message_id in zip(futures, message_ids, strict=True):
                if future is not None and not future.done():
                    future.set_result(message_id)
        if self.callbacks is not None:
            call_each(zip(self.callbacks, message_ids, strict=True), None)

    def fail(self, error: BaseException) -> None:
        self._settle()
        if self.futures is not None:
            for future in self.futures:
                if future is not None:
                    fail_future(future, error)
        if self.callbacks is not None:
            call_each(((callback, None) for callback in self.callbacks), error)

    def _settle(self) -> None:
        settled = self.settled
        if settled is not None and not settled.done():
            settled.set_result(None)


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

    # encode() takes bulk ops (OpSend.of_columns): the protocol's send_many
    encodes_columns = False

    @abstractmethod
    async def connect(self) -> ProducerRegistration:
        """Find the broker, connect, register the producer. Raises on failure."""

    @abstractmethod
    def encode(self, op: OpSend) -> bytes:
        """The wire frame for ``op`` (compressed as configured); called once per op. A
        message that goes as several broker messages (chunks) sets ``op.chunks``."""

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


# -- what crosses on the receive path ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One flush: the individual acks in the order made, and the cumulative position if it
    moved."""

    individual: tuple[MessageId, ...]
    cumulative: MessageId | None


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

    @property
    def rebalances(self) -> int:
        """Group rebalances completed by the subscription this transport serves (its
        consumer group's joins, the first included; 0 where there is no group)."""
        return 0

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


# -- transactions -----------------------------------------------------------------------


class TransactionTransport(ABC):
    """The adapter's half of the transactions of one transactional id (Kafka's
    TransactionManager): its coordinator, the producer id and epoch that every producer of
    that id writes with, the partitions a transaction touched, and commit and abort.

    The core (``msgclient/transaction.py``) keeps the transaction object, checks the calls
    against its state, flushes the producers that sent in it before a commit, and hands
    the acknowledgments made in it to ``commit``.
    """

    @abstractmethod
    async def start(self) -> None:
        """Find the coordinator and register the transactional id (Kafka's InitProducerId:
        a previous incarnation's open transaction is aborted, and that producer fenced)."""

    @abstractmethod
    def begin(self) -> None:
        """A transaction opens (no request: what it touches joins as it is written)."""

    @abstractmethod
    def check_usable(self) -> None:
        """Raise the error that keeps the open transaction from taking sends or
        committing (abortable or fatal), if any."""

    @abstractmethod
    async def commit(
        self,
        acknowledgments: Mapping[ConsumerTransport, list[MessageId]],
        group_offsets: Mapping[str, Mapping[tuple[str, int], int]],
    ) -> None:
        """Commit, with the acknowledgments made in the transaction and the offsets given
        by group id (every send in it is confirmed already). Raises
        TransactionAbortableError or TransactionFatalError."""

    @abstractmethod
    async def prepare(
        self, group_offsets: Mapping[str, Mapping[tuple[str, int], int]]
    ) -> tuple[int, int] | None:
        """Write the offsets into the transaction and hand it over, open, to whoever ends
        it (``ProtocolBackend.end_prepared_transaction``): its (producer id, epoch), or None
        if it touched nothing. The next transaction of the id begins after ``start``."""

    @abstractmethod
    async def abort(self, sends_failed: bool) -> None:
        """Abort: what the transaction wrote is never read by read_committed consumers, and
        its acknowledgments are dropped; ``sends_failed``: some of its messages were not
        stored. Raises TransactionFatalError."""


class ProtocolBackend(ABC, Generic[SubscriptionT]):
    """One per Client: the adapter's connections, lookups and topic naming."""

    default_port: int
    # The protocol's own defaults, under the options a user passes (Kafka's linger and
    # batch size differ from Pulsar's batching delay and size, for instance).
    producer_defaults: Mapping[str, Any] = {}
    consumer_defaults: Mapping[str, Any] = {}
    supports_transactions = False  # True: transaction_transport gives one

    def make_router(self, options: ProducerOptions, partitions: int) -> Router | None:
        """Which partition each message goes to; None: the core's (Pulsar's routing modes,
        by ``options.message_routing_mode``)."""
        return None

    def partition_of(self, message_id: MessageId) -> int | None:
        """The partition a message id names, where ids name one (Kafka); None otherwise."""
        return None

    def check_consumer(self, options: ConsumerOptions) -> None:
        """Refuse, with a clear error, what the protocol cannot do (subscription types...)."""

    @abstractmethod
    def subscription_context(
        self, topics: list[str], subscription: str, options: ConsumerOptions
    ) -> SubscriptionT:
        """State shared by the partition transports of one ``subscribe`` call (Kafka's
        group membership; None where a protocol has none). Given to ``consumer_transport``."""

    def update_subscription(self, context: SubscriptionT, topics: list[str]) -> None:
        """A pattern subscription's topics changed to ``topics`` (Kafka: the group rejoins
        with them). Called after the added topics' transports are made, before they
        connect, and before the removed ones close."""

    async def close_subscription(self, context: SubscriptionT) -> None:
        """A pattern subscription is closed: what ``update_subscription`` kept open past
        its last transport (Kafka: the group) is released."""

    @abstractmethod
    async def list_topics(self, pattern: re.Pattern[str], mode: RegexSubscriptionMode) -> list[str]:
        """The topics (normalized, not their partitions) that ``pattern`` matches, in
        ``mode``'s domains, for pattern subscriptions; an invalid pattern raises
        InvalidConfigurationError naming it."""

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
        context: SubscriptionT,
    ) -> ConsumerTransport:
        """A transport for one (partition) consumer; ``partition`` is -1 when unpartitioned;
        ``context`` is what ``subscription_context`` returned for its subscribe call."""

    def transaction_transport(self, transactional_id: str, timeout_ms: int) -> TransactionTransport:
        """The transactions of ``transactional_id`` (one per id and client: producers with
        the same id share it); refused where the protocol or broker has none."""
        raise NotSupportedError(TRANSACTIONS_NOT_SUPPORTED)

    async def end_prepared_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        """Commit or abort a transaction another client prepared (TransactionTransport's
        ``prepare``), by its id, producer id and epoch."""
        raise NotSupportedError(TRANSACTIONS_NOT_SUPPORTED)

    @abstractmethod
    def admin_transport(self) -> AdminTransport:
        """The admin API's transport (one per backend)."""

    def connection_counts(self) -> tuple[int, int]:
        """Broker connections (open now, opened since the backend was made), for the
        client's stats."""
        return 0, 0

    @abstractmethod
    async def close(self) -> None:
        """Close every connection."""


@runtime_checkable
class SwitchableBackend(Protocol):
    """A backend that can move to another cluster at run time (Pulsar's): what cluster
    failover (``msgclient.core.network.cluster_failover``) asks of it."""

    def serves(self, url: ServiceUrl) -> bool:
        """Whether ``url``'s scheme is one this adapter speaks."""

    def switch_service(self, url: ServiceUrl, options: ClientOptions) -> None:
        """Use the cluster at ``url`` with ``options`` (its authentication and TLS trust)
        from now on; every connection is dropped. Bad ones raise, changing nothing."""

    async def probe(self, url: ServiceUrl, timeout: float) -> bool:
        """Whether the cluster at ``url`` is reachable within ``timeout`` seconds."""


BackendFactory = Callable[[ServiceUrl, ClientOptions], ProtocolBackend[Any]]


def load_backend(url: ServiceUrl, options: ClientOptions) -> ProtocolBackend[Any]:
    """Instantiate the adapter registered for ``url.scheme``."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    for entry in found:
        if entry.name == url.scheme:
            factory: BackendFactory = _load(entry)
            return factory(url, options)
    known = ", ".join(sorted(f"{e.name}://" for e in found)) or "none installed"
    raise UnknownProtocolError(
        f"no protocol adapter for scheme {url.scheme!r} in {url.raw!r}; known schemes: {known}"
    )


def _load(entry: EntryPoint) -> Any:
    """The entry point's object; if it cannot be imported, an error that says which module
    of that name Python found first on sys.path (another ``protocols`` package or module
    shadowing the adapters is the usual cause)."""
    try:
        return entry.load()
    except (ImportError, AttributeError) as error:
        top = entry.value.split(":", 1)[0].split(".", 1)[0]
        raise AdapterLoadError(
            f"cannot load the protocol adapter for {entry.name}:// ({entry.value}): {error}. "
            f"Python imports {top!r} from {_origin(top)}: if that is not msgclient's adapter "
            f"package, a module of the same name earlier on sys.path shadows it; rename it "
            f"or reorder sys.path"
        ) from error


def _origin(name: str) -> str:
    module = sys.modules.get(name)
    spec = module.__spec__ if module is not None else importlib.util.find_spec(name)
    if spec is None:
        return "nowhere (no such module on sys.path)"
    if spec.origin not in (None, "namespace"):
        return spec.origin
    return ", ".join(spec.submodule_search_locations or []) + " (a namespace package)"
