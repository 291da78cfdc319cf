"""A decoded batch entry as columns: the messages of one ledger entry, made on access.

Most records of a batch carry nothing but a payload size and a sequence id, so the
entry keeps the payloads, sequence ids and event times as lists and the rarer fields
(keys, properties, null values) per index; ``Consumer.receive_many`` reads the columns
without a Message or a MessageId per message, and acknowledges the whole entry by its
entry id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from msgclient.message import Message, MessageId, plain_messages
from msgclient.message_batch import MessageBlock
from protocols.pulsarwire.message_id import PulsarMessageId


class RecordDetails:
    """The fields of a batch record beyond payload, sequence id and event time."""

    __slots__ = ("key", "null_value", "ordering_key", "properties")

    def __init__(
        self,
        key: str | bytes | None,
        ordering_key: bytes | None,
        properties: Mapping[str, str] | None,
        null_value: bool,
    ) -> None:
        self.key = key
        self.ordering_key = ordering_key
        self.properties = properties
        self.null_value = null_value


_PLAIN = RecordDetails(None, None, None, False)  # a record with none of these fields


class BatchEntry(MessageBlock):
    """The messages of one batched entry still to deliver (the broker's ack set may have
    left some out: ``indexes`` are then their batch indexes). ``value_size``: the size of
    every value when the decoder read them as one (-1: not known)."""

    __slots__ = (
        "_batch_size",
        "_details",
        "_entry_id",
        "_event_times",
        "_indexes",
        "_ledger_id",
        "_partition",
        "_producer_name",
        "_publish_time",
        "_redelivery_count",
        "_schema_version",
        "_sequence_ids",
        "_topic",
        "_value_size",
        "_values",
    )

    def __init__(
        self,
        topic: str,
        ledger_id: int,
        entry_id: int,
        partition: int,
        batch_size: int,
        values: list[bytes],
        sequence_ids: list[int],
        event_times: list[int],
        details: dict[int, RecordDetails],
        indexes: list[int] | None,
        publish_time: int,
        producer_name: str,
        redelivery_count: int,
        schema_version: bytes | None = None,
        value_size: int = -1,
    ) -> None:
        super().__init__()
        self._topic = topic
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._partition = partition
        self._batch_size = batch_size
        self._values = values
        self._sequence_ids = sequence_ids
        self._event_times = event_times
        self._details = details  # by position in this block, only for records that have any
        self._indexes = indexes  # None: position == batch index
        self._publish_time = publish_time
        self._producer_name = producer_name
        self._redelivery_count = redelivery_count
        self._schema_version = schema_version  # the entry's, shared by its messages
        self._value_size = value_size

    def __len__(self) -> int:
        return len(self._values)

    def topic_name(self) -> str:
        return self._topic

    def payload_bytes(self) -> int:
        if self._value_size >= 0:
            return self._value_size * len(self._values)
        return sum(map(len, self._values))  # bytes each (a null value is empty)

    def _make_all(self) -> list[Message]:
        topic, ledger, entry = self._topic, self._ledger_id, self._entry_id
        partition, size, schema_version = self._partition, self._batch_size, self._schema_version
        publish, redeliveries, producer = (
            self._publish_time,
            self._redelivery_count,
            self._producer_name,
        )
        indexes = range(len(self._values)) if self._indexes is None else self._indexes
        details = self._details
        if not details:  # the common entry: plain records only
            ids = PulsarMessageId.of_batch(ledger, entry, partition, indexes, size)
            return plain_messages(
                self._values,
                ids,
                self._event_times,
                [publish] * len(ids),
                self._sequence_ids,
                topic,
                redeliveries,
                producer,
                schema_version,
            )
        rows = zip(self._values, indexes, self._event_times, self._sequence_ids, strict=True)
        made = []
        for position, (value, index, event_time, sequence_id) in enumerate(rows):
            record = details.get(position, _PLAIN)
            made.append(
                Message(
                    value,
                    PulsarMessageId(ledger, entry, partition, index, size),
                    topic,
                    record.key,
                    record.ordering_key,
                    record.properties,
                    event_time,
                    publish,
                    redeliveries,
                    producer,
                    sequence_id,
                    record.null_value,
                    schema_version,
                )
            )
        return made

    def values(self, start: int, end: int) -> list[bytes | None]:
        column: list[bytes | None] = list(self._values[start:end])
        for position, details in self._details.items():
            if details.null_value and start <= position < end:
                column[position - start] = None
        return column

    def key_bytes(self, start: int, end: int) -> list[bytes | None]:
        column: list[bytes | None] = [None] * (end - start)
        for position, details in self._details.items():
            key = details.key
            if key is not None and start <= position < end:
                column[position - start] = (
                    key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
                )
        return column

    def properties(self, start: int, end: int) -> list[Mapping[str, str] | None]:
        column: list[Mapping[str, str] | None] = [None] * (end - start)
        for position, details in self._details.items():
            if details.properties and start <= position < end:
                column[position - start] = details.properties
        return column

    def publish_timestamps(self, start: int, end: int) -> list[int]:
        return [self._publish_time] * (end - start)

    def event_timestamps(self, start: int, end: int) -> list[int]:
        return self._event_times[start:end]

    def message_ids(self, start: int, end: int) -> list[MessageId]:
        indexes = range(start, end) if self._indexes is None else self._indexes[start:end]
        made = PulsarMessageId.of_batch(
            self._ledger_id, self._entry_id, self._partition, indexes, self._batch_size
        )
        return cast(list[MessageId], made)  # a list of PulsarMessageId: not copied to retype

    def ack_ids(self, start: int, end: int) -> list[MessageId]:
        if start == 0 and end == len(self):
            # Everything the broker still held of the entry: ack the entry itself.
            return [PulsarMessageId(self._ledger_id, self._entry_id, self._partition)]
        return self.message_ids(start, end)
