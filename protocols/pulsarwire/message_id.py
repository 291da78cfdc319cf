"""Pulsar message ids: (ledger, entry, partition, batch index)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgclient.errors import MalformedFrameError
from msgclient.message import MessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.varint import uvarint

INT64_MAX = 2**63 - 1
UINT64_MASK = 2**64 - 1


def _signed(value: int) -> int:
    return value - 2**64 if value > INT64_MAX else value


class PulsarMessageId(MessageId):
    """Where Pulsar stored a message. ``batch_index`` is -1 for an unbatched message.

    ``serialize`` writes the MessageIdData protobuf, as the official clients do, so ids
    move between msgclient and them.
    """

    __slots__ = ("batch_index", "batch_size", "entry_id", "ledger_id", "partition")

    def __init__(
        self,
        ledger_id: int,
        entry_id: int,
        partition: int = -1,
        batch_index: int = -1,
        batch_size: int = 0,
    ) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.partition = partition
        self.batch_index = batch_index
        self.batch_size = batch_size
        # No hash kept: one id is made per message received, and few are ever hashed
        # (the ack tracker keeps a list).

    @classmethod
    def of_batch(
        cls, ledger_id: int, entry_id: int, partition: int, indexes: Iterable[int], size: int
    ) -> list[PulsarMessageId]:
        """The ids of the messages at ``indexes`` of a batch of ``size``: made field by
        field, without an ``__init__`` call each (one id is made per message received)."""
        new = cls.__new__
        made = []
        for index in indexes:
            message_id = new(cls)
            message_id.ledger_id = ledger_id
            message_id.entry_id = entry_id
            message_id.partition = partition
            message_id.batch_index = index
            message_id.batch_size = size
            made.append(message_id)
        return made

    def ack_unit(self) -> PulsarMessageId | None:
        if self.batch_index < 0:
            return None
        return PulsarMessageId(self.ledger_id, self.entry_id, self.partition)

    def _sort_key(self) -> tuple[int, ...]:
        return (self.ledger_id, self.entry_id, self.partition, self.batch_index)

    def __lt__(self, other: object) -> bool:
        # A chunked message's id orders among the others as its last chunk.
        if not isinstance(other, PulsarMessageId):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def __hash__(self) -> int:
        return hash((self.ledger_id, self.entry_id, self.partition, self.batch_index))

    def __eq__(self, other: object) -> bool:
        if type(other) is not PulsarMessageId:
            return NotImplemented
        return (
            self.entry_id == other.entry_id
            and self.ledger_id == other.ledger_id
            and self.batch_index == other.batch_index
            and self.partition == other.partition
        )

    def to_proto(self) -> pb.MessageIdData:
        # The wire fields are uint64; -1 (earliest) travels as 2**64 - 1, as in the C++ client.
        data = pb.MessageIdData(
            ledgerId=self.ledger_id & UINT64_MASK, entryId=self.entry_id & UINT64_MASK
        )
        if self.partition >= 0:
            data.partition = self.partition
        if self.batch_index >= 0:
            data.batch_index = self.batch_index
        if self.batch_size > 0:
            data.batch_size = self.batch_size
        return data

    @classmethod
    def from_proto(cls, data: pb.MessageIdData) -> PulsarMessageId:
        if data.HasField("first_chunk_message_id"):
            return ChunkMessageId(
                PulsarMessageId.from_proto(data.first_chunk_message_id),
                PulsarMessageId(_signed(data.ledgerId), _signed(data.entryId), data.partition),
            )
        return cls(
            _signed(data.ledgerId),
            _signed(data.entryId),
            data.partition,
            data.batch_index,
            data.batch_size,
        )

    def serialize(self) -> bytes:
        return self.to_proto().SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes) -> PulsarMessageId:
        proto = pb.MessageIdData()
        try:
            proto.ParseFromString(data)
        except Exception as error:  # protobuf raises DecodeError or RuntimeError
            raise MalformedFrameError(f"not a serialized Pulsar message id: {error}") from error
        if not proto.IsInitialized():
            raise MalformedFrameError("not a serialized Pulsar message id: fields missing")
        return cls.from_proto(proto)

    def __repr__(self) -> str:
        return (
            f"PulsarMessageId({self.ledger_id}, {self.entry_id}, "
            f"partition={self.partition}, batch_index={self.batch_index})"
        )

    def __str__(self) -> str:  # the official clients' text form
        return f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"


class ChunkMessageId(PulsarMessageId):
    """The id of a chunked message: its last chunk's position, and its first chunk's.

    As the official clients' ChunkMessageIdImpl: it compares and acknowledges cumulatively
    as the last chunk, serializes as the last chunk's MessageIdData with
    ``first_chunk_message_id`` set, and a seek to it starts at the first chunk.
    ``chunk_ids`` (all the chunks, when received here; else the first and the last) are
    what an individual ack or a redelivery covers.
    """

    __slots__ = ("chunk_ids", "first_chunk_id")

    def __init__(
        self,
        first_chunk_id: PulsarMessageId,
        last_chunk_id: PulsarMessageId,
        chunk_ids: tuple[PulsarMessageId, ...] = (),
    ) -> None:
        super().__init__(last_chunk_id.ledger_id, last_chunk_id.entry_id, last_chunk_id.partition)
        self.first_chunk_id = first_chunk_id
        self.chunk_ids = chunk_ids or (first_chunk_id, self.last_chunk_id)

    @classmethod
    def of_chunks(cls, chunk_ids: Sequence[PulsarMessageId]) -> ChunkMessageId:
        """The id of a message received as these chunks, in order."""
        return cls(chunk_ids[0], chunk_ids[-1], tuple(chunk_ids))

    @property
    def last_chunk_id(self) -> PulsarMessageId:
        return PulsarMessageId(self.ledger_id, self.entry_id, self.partition)

    def to_proto(self) -> pb.MessageIdData:
        data = super().to_proto()
        data.first_chunk_message_id.CopyFrom(self.first_chunk_id.to_proto())
        return data

    def __eq__(self, other: object) -> bool:
        if type(other) is not ChunkMessageId:
            return NotImplemented
        return self._sort_key() == other._sort_key() and self.first_chunk_id == other.first_chunk_id

    def __hash__(self) -> int:
        return super().__hash__()

    def __repr__(self) -> str:
        return f"ChunkMessageId({self.first_chunk_id!r}, {self.last_chunk_id!r})"

    def __str__(self) -> str:  # the official clients' text form: first chunk; last chunk
        return f"{self.first_chunk_id};{self.last_chunk_id}"


EARLIEST = PulsarMessageId(-1, -1)


class PulsarIdBytes:
    """``PulsarMessageId.serialize()`` with the partition index the official client gives
    (``partition``; -1 for an unpartitioned topic), about 6x faster. The bytes are the
    MessageIdData protobuf, fields in number order: ledger (1), entry (2), partition (3),
    then in a batch its index (4) and size (6); the ids of one ledger, of one entry, and
    the batch fields repeat, so those parts are kept. (Equality with ``serialize()`` is
    tested.)"""

    def __init__(self, partition: int) -> None:
        self._partition = b"" if partition < 0 else b"\x18" + uvarint(partition)
        self._ledger = -1
        self._ledger_bytes = b""
        self._entry: tuple[int, int] = (-1, -1)
        self._prefix = b""
        self._batch_fields: dict[tuple[int, int], bytes] = {}

    def __call__(self, message_id: PulsarMessageId) -> bytes:
        entry = (message_id.ledger_id, message_id.entry_id)
        if entry != self._entry:
            if entry[0] != self._ledger:
                self._ledger, self._ledger_bytes = entry[0], b"\x08" + uvarint(entry[0])
            self._entry = entry
            self._prefix = self._ledger_bytes + b"\x10" + uvarint(entry[1]) + self._partition
        batch = (message_id.batch_index, message_id.batch_size)
        if batch == (-1, 0):  # unbatched
            return self._prefix
        fields = self._batch_fields.get(batch)
        if fields is None:
            if len(self._batch_fields) > 100_000:
                self._batch_fields.clear()
            fields = b"\x20" + uvarint(batch[0]) if batch[0] >= 0 else b""
            if batch[1] > 0:
                fields += b"\x30" + uvarint(batch[1])
            self._batch_fields[batch] = fields
        return self._prefix + fields
