"""Decoding a MESSAGE frame (one ledger entry) into the messages it carries.

An entry is one message, or a batch: ``num_messages_in_batch`` records, each
``[metadata size u32][SingleMessageMetadata][payload]``, the whole payload compressed as
the entry's metadata says. Pure functions: tests drive them with bytes.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from msgclient.errors import MalformedFrameError
from msgclient.message import Message
from msgclient.options import CompressionType
from protocols.columns import (
    consecutive_varint_columns,
    valid_varints,
    varint_columns,
    varints,
)
from protocols.pulsarwire.batch_entry import BatchEntry, RecordDetails
from protocols.pulsarwire.compression import get_codec
from protocols.pulsarwire.encryption import decrypt_entry, decrypted_messages
from protocols.pulsarwire.framing import DEFAULT_MAX_FRAME_SIZE, Frame
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

if TYPE_CHECKING:  # imported when used: cryptography is an optional extra
    from protocols.pulsarwire.message_crypto import MessageDecryptor

_U32 = struct.Struct(">I")
# The smallest batch record: a u32 metadata size and the 2-byte payload_size field.
_MIN_RECORD = 6


def decode_entry(
    frame: Frame,
    topic: str,
    partition: int,
    max_size: int = DEFAULT_MAX_FRAME_SIZE,
    decryptor: MessageDecryptor | None = None,
    chunk_ids: list[PulsarMessageId] | None = None,
) -> Sequence[Message]:
    """The messages of one MESSAGE frame, minus batch indexes its ack set marks as acked
    (a batch entry as a BatchEntry: columns, Messages made on access).

    No entry decodes to more than ``max_size`` bytes (the broker's maximum message size
    and the frame padding), whatever its metadata declares: a payload that claims to
    decompress to more, or a batch that claims more records than its bytes can hold, is
    refused before anything is allocated for it. An encrypted entry is decrypted first
    (CryptoError when it cannot be), and its messages say how it was encrypted.
    ``chunk_ids``: the frame is a reassembled chunked message (chunks.py), of those
    chunks; its message id is a ChunkMessageId, and its payload, if encrypted, was
    decrypted chunk by chunk as they came (encryption.decrypt_chunk)."""
    if frame.checksum_error is not None:
        raise frame.checksum_error
    metadata = frame.metadata
    if metadata is None or frame.payload is None:
        raise MalformedFrameError("MESSAGE frame without metadata or payload")
    if metadata.encryption_keys:  # end-to-end encrypted: decrypted before decompressing
        payload = (
            frame.payload
            if chunk_ids is not None
            else decrypt_entry(metadata, frame.payload, decryptor)
        )
        return decrypted_messages(
            _entry_messages(frame, metadata, payload, topic, partition, max_size, chunk_ids),
            metadata,
        )
    return _entry_messages(frame, metadata, frame.payload, topic, partition, max_size, chunk_ids)


def _entry_messages(
    frame: Frame,
    metadata: pb.MessageMetadata,
    payload: bytes,
    topic: str,
    partition: int,
    max_size: int,
    chunk_ids: list[PulsarMessageId] | None,
) -> Sequence[Message]:
    command = frame.command.message
    if metadata.compression != pb.NONE:
        if metadata.uncompressed_size > max_size:
            raise MalformedFrameError(
                f"entry declares {metadata.uncompressed_size} bytes uncompressed, over the "
                f"maximum message size ({max_size} bytes)"
            )
        payload = get_codec(CompressionType(metadata.compression)).decompress(
            payload, metadata.uncompressed_size
        )
    ledger, entry = command.message_id.ledgerId, command.message_id.entryId
    redelivery_count = command.redelivery_count
    schema_version = metadata.schema_version or None
    if not metadata.HasField("num_messages_in_batch"):
        message_id = (
            PulsarMessageId(ledger, entry, partition)
            if chunk_ids is None
            else ChunkMessageId.of_chunks(chunk_ids)
        )
        return [
            Message(
                payload,
                message_id,
                topic,
                _key(metadata),
                metadata.ordering_key if metadata.HasField("ordering_key") else None,
                {kv.key: kv.value for kv in metadata.properties} or None,
                metadata.event_time,
                metadata.publish_time,
                redelivery_count,
                metadata.producer_name,
                metadata.sequence_id,
                metadata.null_value,
                schema_version,
            )
        ]
    count = metadata.num_messages_in_batch
    if count > len(payload) // _MIN_RECORD:  # before any work: a lie must fail fast
        raise MalformedFrameError(
            f"batch entry {ledger}:{entry} claims {count} records in {len(payload)} bytes"
        )
    unacked = _unacked_indexes(command.ack_set, count)
    uniform = _uniform_records(payload, count) if unacked is None else None
    if uniform is not None:  # the common batch: read by columns, no loop per record
        values, sequence_ids, value_size = uniform
        event_times: list[int] = [0] * count  # no record carries an event time
        details: dict[int, RecordDetails] = {}
        kept: list[int] | None = None
    else:
        values, sequence_ids, event_times, details, kept = _read_records(
            payload, count, unacked, metadata.sequence_id, f"batch entry {ledger}:{entry}"
        )
        value_size = -1
    return BatchEntry(
        topic,
        ledger,
        entry,
        partition,
        count,
        values,
        sequence_ids,
        event_times,
        details,
        kept,
        metadata.publish_time,
        metadata.producer_name,
        redelivery_count,
        schema_version,
        value_size,
    )


def _read_records(
    payload: bytes, count: int, unacked: set[int] | None, first_sequence_id: int, where: str
) -> tuple[list[bytes], list[int], list[int], dict[int, RecordDetails], list[int] | None]:
    """A batch's records one by one: values, sequence ids, event times, the details of the
    records that have any (by position), and the batch indexes kept when ``unacked`` (the
    broker's ack set) leaves some out."""
    values: list[bytes] = []
    sequence_ids: list[int] = []
    event_times: list[int] = []
    details: dict[int, RecordDetails] = {}
    kept: list[int] = []  # the batch indexes delivered, when the ack set leaves some out
    position = 0
    single = pb.SingleMessageMetadata()
    for index in range(count):
        try:
            (size,) = _U32.unpack_from(payload, position)
        except struct.error as error:
            raise _bad_record(where, index, count, error) from error
        position += 4
        plain = _two_field_record(payload, position, size) or _plain_record(
            payload, position, position + size
        )
        record_details = None
        if plain is not None:
            payload_size, sequence_id, event_time = plain
        else:
            try:
                single.Clear()
                single.ParseFromString(payload[position : position + size])
            except DecodeError as error:
                raise _bad_record(where, index, count, error) from error
            payload_size, event_time = single.payload_size, single.event_time
            sequence_id = single.sequence_id if single.HasField("sequence_id") else -1
            record_details = RecordDetails(
                _key(single),
                single.ordering_key if single.HasField("ordering_key") else None,
                {kv.key: kv.value for kv in single.properties} or None,
                single.null_value,
            )
        position += size
        end = position + payload_size
        if end > len(payload):
            raise MalformedFrameError(
                f"{where} index {index}: payload of {payload_size} "
                f"bytes overruns the entry ({len(payload)} bytes)"
            )
        if unacked is not None:
            if index not in unacked:
                position = end
                continue  # acked before, as the broker's ack set says
            kept.append(index)
        if record_details is not None:
            details[len(values)] = record_details
        values.append(payload[position:end])
        position = end
        sequence_ids.append(sequence_id if sequence_id >= 0 else first_sequence_id + index)
        event_times.append(event_time)
    return values, sequence_ids, event_times, details, None if unacked is None else kept


def _uniform_records(payload: bytes, count: int) -> tuple[list[bytes], list[int], int] | None:
    """The values, sequence ids and value size of a batch whose records all have one
    shape: metadata of payload_size then sequence_id, every payload_size and metadata size
    equal (what a producer writes for equal-size messages); None for any other batch.

    Such records sit at a fixed stride and are read by columns (protocols/columns.py):
    the constant bytes (the record size, the tags, the payload size) are checked by
    comparing columns, and the sequence ids are put together from the columns of their
    varint bytes, without a Python loop per record over bytes.
    """
    stride, remainder = divmod(len(payload), count)
    if remainder or stride < _MIN_RECORD + 2:
        return None
    (size,) = _U32.unpack_from(payload)
    if size > stride - 4 or payload[4] != _PAYLOAD_SIZE:
        return None
    payload_size, position = _varint(payload, 5, 4 + size)
    if position >= 4 + size or payload[position] != _SEQUENCE_ID:
        return None
    sequence_start = position + 1  # the sequence id: the rest of the metadata
    sequence_bytes = 4 + size - sequence_start
    if not 0 < sequence_bytes <= 10 or stride != 4 + size + payload_size:
        return None
    for offset in range(sequence_start):  # the same in every record
        if payload[offset::stride] != payload[offset : offset + 1] * count:
            return None
    columns = varint_columns(payload, sequence_start, stride, count, sequence_bytes)
    if valid_varints(columns) < count:
        return None
    first, _ = _varint(payload, sequence_start, 4 + size)
    if columns == consecutive_varint_columns(first, count, sequence_bytes):
        sequence_ids = list(range(first, first + count))  # consecutive: as producers write
    else:
        sequence_ids = varints(columns)
    start = 4 + size
    values = [payload[p : p + payload_size] for p in range(start, start + count * stride, stride)]
    return values, sequence_ids, payload_size


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """A varint at ``position`` (ending before ``end``) and the position after it; the
    position is ``end`` or beyond when the varint does not end in time."""
    value = shift = 0
    while position < end:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return value, end


# SingleMessageMetadata varint fields the fast path knows: payload_size (3), event_time (5),
# sequence_id (8). A record with any other field goes through protobuf.
_PAYLOAD_SIZE, _EVENT_TIME, _SEQUENCE_ID = 0x18, 0x28, 0x40


def _plain_record(data: bytes, position: int, end: int) -> tuple[int, int, int] | None:
    """(payload_size, sequence_id or -1, event_time) of a record holding only varint fields
    the fast path knows, read by hand (several times cheaper than protobuf per record);
    None for any other record."""
    payload_size, sequence_id, event_time = -1, -1, 0
    try:
        while position < end:
            tag = data[position]
            byte = data[position + 1]
            position += 2
            value = byte & 0x7F
            shift = 7
            while byte & 0x80:
                byte = data[position]
                position += 1
                value |= (byte & 0x7F) << shift
                shift += 7
            if tag == _PAYLOAD_SIZE:
                payload_size = value
            elif tag == _SEQUENCE_ID:
                sequence_id = value
            elif tag == _EVENT_TIME:
                event_time = value
            else:
                return None
    except IndexError:
        return None
    if position != end or payload_size < 0:
        return None
    return payload_size, sequence_id, event_time


def _two_field_record(data: bytes, position: int, size: int) -> tuple[int, int, int] | None:
    """The record every client writes for a plain small message: payload_size (< 128) then
    sequence_id (< 2**21). The commonest record by far, checked byte by byte."""
    end = position + size
    if (
        not 4 <= size <= 6
        or end > len(data)  # cut short: the general decoder names the problem
        or data[position] != _PAYLOAD_SIZE
        or data[position + 2] != _SEQUENCE_ID
    ):
        return None
    payload_size = data[position + 1]
    last = data[end - 1]
    if payload_size >= 0x80 or last >= 0x80:
        return None
    sequence_id = 0
    shift = 0
    for byte in data[position + 3 : end - 1]:
        if byte < 0x80:  # a varint ended early: not this layout
            return None
        sequence_id |= (byte & 0x7F) << shift
        shift += 7
    return payload_size, sequence_id | (last << shift), 0


def _bad_record(where: str, index: int, count: int, error: Exception) -> MalformedFrameError:
    return MalformedFrameError(f"{where} index {index} of {count}: bad metadata ({error})")


def _unacked_indexes(ack_set: Sequence[int], count: int) -> set[int] | None:
    """Batch indexes still to deliver: set bits of the ack set (64-bit words, low bit
    first); None when the broker sent no ack set (deliver all)."""
    words = list(ack_set)
    if not words:
        return None
    return {i for i in range(count) if i // 64 < len(words) and (words[i // 64] >> (i % 64)) & 1}


def _key(metadata: pb.MessageMetadata | pb.SingleMessageMetadata) -> str | bytes | None:
    """The partition key; a binary one (sent in base64, flagged) as its bytes, as the Java
    client's ``getKeyBytes()`` gives it. A flagged key that is not base64 stays text."""
    if not metadata.HasField("partition_key"):
        return None
    if metadata.partition_key_b64_encoded:
        try:
            return base64.b64decode(metadata.partition_key, validate=True)
        except binascii.Error:
            pass
    return metadata.partition_key
