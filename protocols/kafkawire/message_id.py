"""Kafka message ids: (topic, partition, offset)."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from msgclient.errors import MalformedFrameError
from msgclient.message import MessageId

_HEADER = struct.Struct(">Biq")  # format version, partition, offset; then the topic in UTF-8
_VERSION = 1


class KafkaMessageId(MessageId):
    """Where Kafka stored a message. Ids of one topic order by (partition, offset)."""

    __slots__ = ("offset", "partition", "topic")

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset

    @classmethod
    def of_offsets(cls, topic: str, partition: int, offsets: Iterable[int]) -> list[KafkaMessageId]:
        """The ids of ``offsets`` in one partition: made field by field, without an
        ``__init__`` call each (one id is made per message received)."""
        new = cls.__new__
        made = []
        for offset in offsets:
            message_id = new(cls)
            message_id.topic = topic
            message_id.partition = partition
            message_id.offset = offset
            made.append(message_id)
        return made

    def owner_topic(self) -> str:
        return self.topic

    def _sort_key(self) -> tuple[int, ...]:
        return (self.partition, self.offset)

    def __hash__(self) -> int:
        # Hashed on every ack, built for every message received or sent: no tuple.
        return self.offset ^ (self.partition << 40)

    def __eq__(self, other: object) -> bool:
        if type(other) is not KafkaMessageId:
            return NotImplemented
        return (
            self.offset == other.offset
            and self.partition == other.partition
            and self.topic == other.topic
        )

    def serialize(self) -> bytes:
        return _HEADER.pack(_VERSION, self.partition, self.offset) + self.topic.encode()

    @classmethod
    def deserialize(cls, data: bytes) -> KafkaMessageId:
        if len(data) < _HEADER.size or data[0] != _VERSION:
            raise MalformedFrameError(f"not a serialized Kafka message id: {data[:16]!r}")
        _, partition, offset = _HEADER.unpack_from(data)
        try:
            topic = data[_HEADER.size :].decode()
        except UnicodeDecodeError as error:
            raise MalformedFrameError(f"not a serialized Kafka message id: {error}") from error
        return cls(topic, partition, offset)

    def __repr__(self) -> str:
        return f"KafkaMessageId({self.topic!r}, {self.partition}, {self.offset})"

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"
