"""A run of plain Kafka records as columns: their Messages made only when asked for.

A producer's batch of messages without keys or headers is, record after record, a value
and a timestamp at the next offset. The decoder reads such a run by columns
(``reader.py``); a ``RecordRun`` keeps the columns, so that ``Consumer.receive_many`` hands
a bulk reader the values and timestamps without a Message or a MessageId per record, and
the per-message path (``receive``) makes the run's Messages in one pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from msgclient.message import Message, MessageId, plain_messages
from msgclient.message_batch import MessageBlock
from protocols.kafkawire.message_id import KafkaMessageId

_INT31 = 0x7FFFFFFF  # producer sequence numbers wrap to 0 after the largest int32


class RecordRun(MessageBlock):
    """Records at ``first_offset`` on (one partition), each a value and a timestamp; a
    record's sequence number is ``first_sequence`` plus its place (-1: none).
    ``value_size``: the size of every value, when the decoder read them as one (-1: not
    known), which makes the run's payload bytes a product."""

    __slots__ = (
        "_first_sequence",
        "_partition_name",
        "_timestamps",
        "_value_size",
        "_values",
        "first_offset",
        "partition",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        first_offset: int,
        values: list[bytes],
        timestamps: list[int],
        first_sequence: int,
        value_size: int = -1,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.partition = partition
        self.first_offset = first_offset
        self._values = values
        self._timestamps = timestamps
        self._first_sequence = first_sequence
        self._value_size = value_size
        # A message's topic_name() is its partition's name, as on Pulsar.
        self._partition_name = f"{topic}-{partition}"

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RecordRun({self._partition_name}@{self.first_offset}, {len(self)} records)"

    def part(self, start: int, end: int) -> RecordRun:
        """Records ``start`` to ``end - 1`` as a run of their own."""
        sequence = self._first_sequence
        return RecordRun(
            self.topic,
            self.partition,
            self.first_offset + start,
            self._values[start:end],
            self._timestamps[start:end],
            (sequence + start) & _INT31 if sequence >= 0 else -1,
            self._value_size,
        )

    def topic_name(self) -> str:
        return self._partition_name

    def payload_bytes(self) -> int:
        if self._value_size >= 0:
            return self._value_size * len(self._values)
        return sum(map(len, self._values))  # bytes each (a null value is empty)

    def _make_all(self) -> list[Message]:
        count = len(self._values)
        first = self._first_sequence
        sequences: Sequence[int] = range(first, first + count)
        if first < 0:
            sequences = [-1] * count
        elif first + count - 1 > _INT31:  # wraps to 0
            sequences = [s & _INT31 for s in sequences]
        timestamps = self._timestamps
        return plain_messages(
            self._values,
            self.message_ids(0, count),
            timestamps,
            timestamps,
            sequences,
            self._partition_name,
            0,
            "",
            None,
        )

    def values(self, start: int, end: int) -> list[bytes | None]:
        return cast(list[bytes | None], self._values[start:end])  # a new list: not copied again

    def key_bytes(self, start: int, end: int) -> list[bytes | None]:
        return [None] * (end - start)

    def properties(self, start: int, end: int) -> list[Mapping[str, str] | None]:
        return [None] * (end - start)

    def publish_timestamps(self, start: int, end: int) -> list[int]:
        return self._timestamps[start:end]

    def event_timestamps(self, start: int, end: int) -> list[int]:
        return self._timestamps[start:end]

    def message_ids(self, start: int, end: int) -> list[MessageId]:
        offsets = range(self.first_offset + start, self.first_offset + end)
        made = KafkaMessageId.of_offsets(self.topic, self.partition, offsets)
        return cast(list[MessageId], made)  # a list of KafkaMessageId: not copied to retype

    def ack_ids(self, start: int, end: int) -> list[MessageId]:
        return self.message_ids(start, end)
