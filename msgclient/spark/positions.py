"""Positions in a topic partition, per protocol, and their form in Spark's offset JSON.

A Kafka position is an offset: the next one to read, so a range is ``[start, end)`` as in
Spark's Kafka source. A Pulsar position is the id of the last message already read (a
range is ``(start, end]``), stored in JSON as its serialized form in base64 (the official
clients' byte format). ``batch = -1`` stands for the whole entry: an unbatched message, or
every message of a batch (pulsar-lite's last message id of a batched entry has no batch
index, brokers.md). ``PULSAR_EARLIEST`` is the position before the first message.

Pulsar read limits and slices count entries (a message, or one producer batch), as the
Pulsar connector's ``maxEntriesPerTrigger`` does: entry ids are consecutive within a
ledger, so counts are exact there; across ledgers the planner asks the broker.
"""

from __future__ import annotations

import base64
import binascii
import enum
from typing import NamedTuple

from msgclient.errors import MalformedFrameError
from msgclient.message import MessageId
from msgclient.options import InitialPosition
from msgclient.spark.errors import SourceOptionError
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId

WHOLE = 2**62  # the batch index of "a whole entry": after every real index
EARLIEST_SPEC, LATEST_SPEC = -2, -1  # Spark's Kafka source's values in offset JSON


class Protocol(enum.Enum):
    KAFKA = "kafka"
    PULSAR = "pulsar"

    @classmethod
    def of_url(cls, url: str) -> Protocol:
        scheme = url.partition("://")[0].lower()
        if scheme in ("kafka", "kafka+ssl"):
            return cls.KAFKA
        if scheme in ("pulsar", "pulsar+ssl"):
            return cls.PULSAR
        raise SourceOptionError(
            "url",
            f"{url!r}: the msgclient data source takes pulsar://, pulsar+ssl://, kafka:// "
            "and kafka+ssl:// URLs",
        )


class PulsarPosition(NamedTuple):
    """The last message read: ``(ledger, entry, batch)``; batch -1: the whole entry.

    No partition: readers filter by ``key()`` themselves, so a start id whose partition
    differs from the dispatched ids' (a consumer of the partition's own topic name gives
    -1) is harmless.
    """

    ledger: int
    entry: int
    batch: int = -1

    def key(self) -> tuple[int, int, int]:
        return (self.ledger, self.entry, self.batch if self.batch >= 0 else WHOLE)


Position = int | PulsarPosition
PULSAR_EARLIEST = PulsarPosition(-1, -1, -1)


def is_earliest(position: Position) -> bool:
    return isinstance(position, PulsarPosition) and position.ledger < 0


def is_before(a: Position, b: Position) -> bool:
    """Whether position ``a`` comes before ``b`` in their partition."""
    if isinstance(a, PulsarPosition) and isinstance(b, PulsarPosition):
        return a.key() < b.key()
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    raise TypeError(f"positions of different protocols: {a!r}, {b!r}")


def covers(position: Position, message_id: MessageId) -> bool:
    """Whether the message lies before ``position``: a range from there excludes it."""
    if isinstance(position, int):
        assert isinstance(message_id, KafkaMessageId)
        return message_id.offset < position
    return message_key(message_id) <= position.key()


def is_last_up_to(position: PulsarPosition, message_id: MessageId) -> bool:
    """Whether ``message_id`` is the last Pulsar message up to ``position``: its own place,
    or the last index of the whole entry ``position`` names."""
    key = message_key(message_id)
    if key == position.key():
        return True
    assert isinstance(message_id, PulsarMessageId)
    return (
        position.batch < 0
        and (position.ledger, position.entry) == key[:2]
        and message_id.batch_size > 0
        and message_id.batch_index == message_id.batch_size - 1
    )


def message_key(message_id: MessageId) -> tuple[int, int, int]:
    """A Pulsar message's place, comparable with ``PulsarPosition.key()``."""
    assert isinstance(message_id, PulsarMessageId)
    batch = message_id.batch_index
    return (message_id.ledger_id, message_id.entry_id, batch if batch >= 0 else WHOLE)


# -- JSON ------------------------------------------------------------------------------


def to_json(position: Position) -> int | str:
    """The JSON value of a position."""
    if isinstance(position, int):
        return position
    message_id = PulsarMessageId(position.ledger, position.entry, -1, position.batch)
    return base64.b64encode(message_id.serialize()).decode("ascii")


def from_json(protocol: Protocol, value: object, where: str) -> Position:
    """A position from offset JSON; ``EARLIEST_SPEC`` or ``LATEST_SPEC`` for -2 and -1 (or
    "earliest", "latest"), which the planner resolves. ``where`` names the option."""
    if value in ("earliest", EARLIEST_SPEC):
        return EARLIEST_SPEC
    if value in ("latest", LATEST_SPEC):
        return LATEST_SPEC
    if protocol is Protocol.KAFKA:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise SourceOptionError(
            where,
            f"{value!r} is not a Kafka offset (an integer >= 0, -2 for earliest or -1 for latest)",
        )
    if isinstance(value, str):
        try:
            message_id = PulsarMessageId.deserialize(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError, MalformedFrameError):
            pass
        else:
            return pulsar_position(message_id)
    raise SourceOptionError(
        where,
        f"{value!r} is not a Pulsar position: a message id serialized and base64-encoded "
        "(MessageId.serialize()), -2 for earliest or -1 for latest",
    )


def pulsar_position(message_id: MessageId) -> PulsarPosition:
    if not isinstance(message_id, PulsarMessageId):
        raise TypeError(f"not a Pulsar message id: {message_id!r}")
    if message_id.ledger_id < 0:
        return PULSAR_EARLIEST
    return PulsarPosition(message_id.ledger_id, message_id.entry_id, message_id.batch_index)


# -- broker answers ----------------------------------------------------------------------


def end_after(protocol: Protocol, last: MessageId | None) -> Position:
    """The end of what is in a partition, from its last message id (None: empty)."""
    if protocol is Protocol.KAFKA:
        return last.offset + 1 if isinstance(last, KafkaMessageId) else 0
    return PULSAR_EARLIEST if last is None else pulsar_position(last)


def start_at(message_id: MessageId) -> Position:
    """The position just before ``message_id``: a range from it includes that message."""
    if isinstance(message_id, KafkaMessageId):
        return message_id.offset
    assert isinstance(message_id, PulsarMessageId)
    ledger, entry = message_id.ledger_id, message_id.entry_id
    if message_id.batch_index > 0:
        return PulsarPosition(ledger, entry, message_id.batch_index - 1)
    # Entry ids of a ledger are consecutive: everything before this entry.
    return PulsarPosition(ledger, entry - 1, -1)


def reader_start(
    position: Position | None, topic: str, partition: int
) -> tuple[MessageId | InitialPosition, bool]:
    """``create_reader``'s start and start_message_id_inclusive for a range's start
    (None: the first message there is)."""
    if position is None or is_earliest(position):
        return InitialPosition.Earliest, False
    if isinstance(position, int):
        return KafkaMessageId(topic, partition, position), True
    if position.entry < 0:  # before the ledger's first entry (pulsar-lite refuses entry -1)
        return PulsarMessageId(position.ledger, 0, -1, -1), True
    # Inside an entry: all of it, and whoever reads drops what ``covers`` says (so that a
    # start at the entry's last message is seen to be at its end); a whole entry: after it.
    inside = position.batch >= 0
    return PulsarMessageId(position.ledger, position.entry, -1, -1), inside


# -- counting (read limits, slices) ----------------------------------------------------


def distance(start: Position, end: Position) -> int | None:
    """Offsets (Kafka) or entries (Pulsar) in ``(start, end]``; None when unknown (Pulsar:
    another ledger, or a start before the first message)."""
    if isinstance(start, int) and isinstance(end, int):
        return max(0, end - start)
    assert isinstance(start, PulsarPosition) and isinstance(end, PulsarPosition)
    if not is_before(start, end):
        return 0
    if start.ledger < 0 or start.ledger != end.ledger:
        return None
    # A start inside an entry leaves the rest of that entry to read: one more.
    return end.entry - start.entry + (1 if start.batch >= 0 else 0)


def advance(start: Position, count: int) -> Position:
    """The position ``count`` offsets or entries after ``start`` (same ledger)."""
    if isinstance(start, int):
        return start + count
    first_entry = start.entry if start.batch >= 0 else start.entry + 1
    return PulsarPosition(start.ledger, first_entry + count - 1, -1)


def earliest(a: Position, b: Position) -> Position:
    return a if is_before(a, b) else b
