"""Messages as the core sees them: the id the broker assigns and the message on its way out."""

from __future__ import annotations

import asyncio
import functools
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

SendCallback = Callable[[BaseException | None, "MessageId | None"], None]


@functools.total_ordering
class MessageId(ABC):
    """Where the broker stored a message. Each protocol has its own fields.

    Ids of one topic are ordered, hashable, and survive ``serialize``/``deserialize``.
    """

    __slots__ = ()

    @abstractmethod
    def serialize(self) -> bytes:
        """Bytes that the same protocol's ``deserialize`` turns back into an equal id."""

    @abstractmethod
    def _sort_key(self) -> tuple[int, ...]: ...

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._sort_key() == other._sort_key()

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def __hash__(self) -> int:
        return hash(self._sort_key())

    def owner_topic(self) -> str | None:
        """The topic this id names, if it names one (a ``TopicMessageId``, Kafka's ids)."""
        return None

    def ack_unit(self) -> MessageId | None:
        """The id of the unit this message came in, if an ack of that id acknowledges this
        message with the rest of it (a Pulsar batch: its entry); None if none does."""
        return None


class TopicMessageId(MessageId):
    """A message id and the topic it belongs to (the Java client's TopicMessageId): what a
    consumer of several topics acknowledges by id, since a plain id does not name its
    topic. ``topic`` is the name ``Message.topic_name()`` gives (a partition's own name),
    or the subscribed topic when ``message_id`` names its partition."""

    __slots__ = ("message_id", "topic")

    def __init__(self, topic: str, message_id: MessageId) -> None:
        self.topic = topic
        self.message_id: MessageId = (
            message_id.message_id if isinstance(message_id, TopicMessageId) else message_id
        )

    def serialize(self) -> bytes:
        return self.message_id.serialize()

    def owner_topic(self) -> str:
        return self.topic

    def _sort_key(self) -> tuple[int, ...]:
        return self.message_id._sort_key()

    def ack_unit(self) -> MessageId | None:
        return self.message_id.ack_unit()

    def __repr__(self) -> str:
        return f"TopicMessageId({self.topic!r}, {self.message_id!r})"


class OutgoingMessage:
    """One message from ``send_async`` until the broker confirms it (or it fails).

    Plain slots and a positional constructor: one of these is made per message sent.
    """

    __slots__ = (
        "callback",
        "deliver_at",
        "event_timestamp",
        "future",
        "null_value",
        "ordering_key",
        "partition_key",
        "properties",
        "replicate_to",
        "sequence_id",
        "value",
    )

    def __init__(
        self,
        value: bytes,
        future: asyncio.Future[MessageId] | None,
        partition_key: str | bytes | None = None,
        ordering_key: bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        replicate_to: tuple[str, ...] | None = None,
        callback: SendCallback | None = None,
        deliver_at: int | None = None,
        null_value: bool = False,
    ) -> None:
        self.value = value  # empty for a null value
        self.future = future  # None: the callback alone hears of the outcome
        self.partition_key = partition_key
        self.ordering_key = ordering_key
        self.properties = properties
        self.event_timestamp = event_timestamp
        self.sequence_id = sequence_id
        self.replicate_to = replicate_to
        self.callback = callback
        self.deliver_at = deliver_at  # ms since the epoch; such a message is never batched
        self.null_value = null_value  # send(None): a tombstone for compacted topics

    def fail(self, error: BaseException) -> None:
        if self.future is not None:
            fail_future(self.future, error)
        if self.callback is not None:
            call_back(self.callback, error, None)


def fail_future(future: asyncio.Future[MessageId], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
        # The caller may hold the future only to learn of success: don't warn
        # "exception never retrieved" for errors it chose not to look at.
        future.exception()


def call_back(callback: SendCallback, error: BaseException | None, message_id: Any) -> None:
    try:
        callback(error, message_id)
    except Exception as exc:  # a user callback must not break the producer
        _report_callback_error(exc)


def call_each(
    calls: Iterable[tuple[SendCallback | None, Any]], error: BaseException | None
) -> None:
    """``callback(error, message_id)`` for each pair whose callback is not None. One
    try around the loop, not a call per message: a callback that raises is reported and
    the loop goes on with the next."""
    pending = iter(calls)
    while True:
        try:
            for callback, message_id in pending:
                if callback is not None:
                    callback(error, message_id)
            return
        except Exception as exc:  # a user callback must not break the producer
            _report_callback_error(exc)


def _report_callback_error(exc: Exception) -> None:
    asyncio.get_running_loop().call_exception_handler(
        {"message": "exception in send callback", "exception": exc}
    )


class Message:
    """A message received from the broker. Accessors are methods, as in pulsar-client."""

    __slots__ = (
        "_event_timestamp",
        "_message_id",
        "_null_value",
        "_ordering_key",
        "_partition_key",
        "_producer_name",
        "_properties",
        "_publish_timestamp",
        "_redelivery_count",
        "_schema_version",
        "_sequence_id",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        value: bytes,
        message_id: MessageId,
        topic: str,
        partition_key: str | bytes | None = None,
        ordering_key: bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int = 0,
        publish_timestamp: int = 0,
        redelivery_count: int = 0,
        producer_name: str = "",
        sequence_id: int = -1,
        null_value: bool = False,
        schema_version: bytes | None = None,
    ) -> None:
        self._value = value
        self._message_id = message_id
        self._topic = topic
        self._partition_key = partition_key
        self._ordering_key = ordering_key
        self._properties = properties
        self._event_timestamp = event_timestamp
        self._publish_timestamp = publish_timestamp
        self._redelivery_count = redelivery_count
        self._producer_name = producer_name
        self._sequence_id = sequence_id
        self._null_value = null_value
        self._schema_version = schema_version

    def data(self) -> bytes:
        """The payload; empty for a null value (as the official client's ``data()``)."""
        return self._value

    def value(self) -> bytes | None:
        """The payload (no schema: the same bytes as ``data()``); None for a null value."""
        return None if self._null_value else self._value

    def has_null_value(self) -> bool:
        """Whether the producer sent None (a tombstone: on a compacted topic it deletes the
        key's value)."""
        return self._null_value

    def schema_version(self) -> bytes | None:
        """The version of the producer's schema the broker gave (MessageMetadata's
        schema_version); None when the message carries none."""
        return self._schema_version

    def message_id(self) -> MessageId:
        return self._message_id

    def topic_name(self) -> str:
        return self._topic

    def partition_key(self) -> str | None:
        """The key as text (a Kafka key's bytes are decoded as UTF-8, undecodable bytes
        kept as surrogates so that ``key_bytes()`` gives them back)."""
        key = self._partition_key
        if isinstance(key, bytes):
            return key.decode("utf-8", "surrogateescape")
        return key

    def key_bytes(self) -> bytes | None:
        """The key as bytes: a Kafka record key as stored, a Pulsar key in UTF-8."""
        key = self._partition_key
        if isinstance(key, str):
            return key.encode("utf-8", "surrogateescape")
        return key

    def ordering_key(self) -> bytes | None:
        return self._ordering_key

    def properties(self) -> dict[str, str]:
        return dict(self._properties) if self._properties else {}

    def event_timestamp(self) -> int:
        """Milliseconds since the epoch set by the producer; 0 if it set none."""
        return self._event_timestamp

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch when the producer published it."""
        return self._publish_timestamp

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def producer_name(self) -> str:
        return self._producer_name

    def sequence_id(self) -> int:
        return self._sequence_id

    def __repr__(self) -> str:
        return f"Message({self._message_id!r}, {len(self._value)} bytes, topic={self._topic!r})"


_VALUE = operator.attrgetter("_value")


def payload_bytes(messages: Iterable[Message]) -> int:
    """The payload bytes of ``messages`` (a null value has none), added up in C: no
    Python call per message (a consumer counts every dispatch's)."""
    return sum(map(len, map(_VALUE, messages)))


def plain_messages(
    values: Sequence[bytes],
    message_ids: Sequence[MessageId],
    event_timestamps: Sequence[int],
    publish_timestamps: Sequence[int],
    sequence_ids: Sequence[int],
    topic: str,
    redelivery_count: int,
    producer_name: str,
    schema_version: bytes | None,
) -> list[Message]:
    """The Messages of one batch of plain records (no key, ordering key, properties or
    null value), sharing the batch's other fields. Made field by field rather than by
    ``Message(...)``: a call with 13 arguments per message was a third of their cost, on
    the path every batched message takes. (A Pulsar entry has one publish time for all
    its records; a Kafka record's timestamp is its event and its publish time.)"""
    new = Message.__new__
    made = []
    for value, message_id, event_timestamp, publish_timestamp, sequence_id in zip(
        values, message_ids, event_timestamps, publish_timestamps, sequence_ids, strict=True
    ):
        message = new(Message)
        message._value = value
        message._message_id = message_id
        message._topic = topic
        message._partition_key = None
        message._ordering_key = None
        message._properties = None
        message._event_timestamp = event_timestamp
        message._publish_timestamp = publish_timestamp
        message._redelivery_count = redelivery_count
        message._producer_name = producer_name
        message._sequence_id = sequence_id
        message._null_value = False
        message._schema_version = schema_version
        made.append(message)
    return made
