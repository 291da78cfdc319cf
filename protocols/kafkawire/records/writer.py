"""Kafka RecordBatch v2, the producer's direction: a batch of messages (or of a bulk
send's columns) to bytes, and a pending batch re-stamped with new producer state. Pure
functions on bytes; the layout is in ``layout.py``.

This runs once per record, where a function call costs as much as the rest of a record:
the plain record (no key, no headers) takes hand-inlined paths.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from itertools import repeat

import google_crc32c

from msgclient.contract import ValueColumns
from msgclient.errors import InvalidConfigurationError, MalformedFrameError, MessageEncodingError
from msgclient.message import OutgoingMessage
from msgclient.options import CompressionType
from protocols.kafkawire.compression import KAFKA_CODEC_IDS, get_kafka_codec
from protocols.kafkawire.records.layout import (
    ATTRIBUTES_AT,
    DELTA_WIDTH_LIMITS,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_AT,
    SMALL_COUNT,
    SMALL_VARINTS,
    TRANSACTIONAL,
    varint,
)

_CRC_AT, _PRODUCER_AT = 17, 43
_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_U32 = struct.Struct(">I")


def _offset_delta_varints(count: int) -> list[bytes]:
    """Varints of 0 to at least ``count`` - 1."""
    if count <= SMALL_COUNT:
        return SMALL_VARINTS
    return SMALL_VARINTS + [varint(i) for i in range(SMALL_COUNT, count)]


def encode_record_batch(
    messages: Sequence[OutgoingMessage],
    *,
    compression: CompressionType,
    now_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """One complete RecordBatch (baseOffset 0, CreateTime) of ``messages``, in order.

    A message's timestamp is its ``event_timestamp``, or ``now_ms`` if it has none.
    ``transactional`` sets the transactional attribute (a transactional producer's batch:
    readers read_committed skip it if its producer's transaction is aborted).
    """
    codec_id = _codec_id(compression)
    count = len(messages)
    if count == 0:
        raise MessageEncodingError("a Kafka record batch needs at least one message")
    first_timestamp = messages[0].event_timestamp
    base_timestamp = max_timestamp = now_ms if first_timestamp is None else first_timestamp
    now_prefix = b"\x00" + varint(now_ms - base_timestamp)  # attributes, timestamp delta
    deltas = _offset_delta_varints(count)
    parts: list[bytes] = []
    remaining = iter(messages)
    start = 0
    try:
        # By ranges of offset deltas of one varint width, so that the bytes around a plain
        # record's delta and value depend on the value's size only.
        for limit in DELTA_WIDTH_LIMITS:
            stop = min(limit, count)
            width = len(deltas[start])
            plain: dict[int, tuple[bytes, bytes]] = {}  # value size -> those bytes
            # The last plain record's value size and its bytes: most values are one size.
            size, head, middle = -1, b"", b""
            # Deltas first: zip must stop on them, without taking one more message.
            for offset_delta, message in zip(deltas[start:stop], remaining, strict=False):
                if (
                    message.partition_key is None
                    and not message.properties
                    and message.event_timestamp is None
                    and not message.null_value
                ):
                    value = message.value
                    if len(value) != size:
                        size = len(value)
                        head, middle = _plain_pieces(plain, size, now_prefix, width)
                    parts += (head, offset_delta, middle, value, b"\x00")  # no headers
                else:
                    timestamp = message.event_timestamp
                    if timestamp is None:
                        timestamp = now_ms
                    if timestamp > max_timestamp:
                        max_timestamp = timestamp
                    parts.append(_record(message, offset_delta, timestamp - base_timestamp))
            if plain:
                max_timestamp = max(max_timestamp, now_ms)
            start = stop
            if start == count:
                break
        return _batch(
            parts, count, codec_id, compression, base_timestamp, max_timestamp,
            producer_id, producer_epoch, base_sequence, transactional,
        )  # fmt: skip
    except (struct.error, UnicodeEncodeError, OverflowError) as error:
        raise MessageEncodingError(f"cannot encode a Kafka record batch: {error}") from error


def encode_record_columns(
    columns: ValueColumns,
    *,
    compression: CompressionType,
    now_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """``encode_record_batch`` of a bulk send's columns: the records of ``columns`` (a
    record without an event timestamp is at ``now_ms``), with no Python object made per
    record; a record of a value only takes the plain path."""
    codec_id = _codec_id(compression)
    values = columns.values
    count = len(values)
    if count == 0:
        raise MessageEncodingError("a Kafka record batch needs at least one message")
    keys = repeat(None, count) if columns.keys is None else columns.keys
    headers = repeat(None, count) if columns.properties is None else columns.properties
    stamps = columns.event_timestamps
    base_timestamp = max_timestamp = now_ms
    if stamps is not None:
        if stamps[0] is not None:
            base_timestamp = stamps[0]
        max_timestamp = max(now_ms if t is None else t for t in stamps)
    else:
        stamps = repeat(None, count)  # type: ignore[assignment]
    now_delta = now_ms - base_timestamp
    now_prefix = b"\x00" + varint(now_delta)  # attributes, timestamp delta
    values_only = (
        columns.keys is None and columns.properties is None and columns.event_timestamps is None
    )
    if values_only and columns.uniform_size is not None:
        return _batch(
            _uniform_records(values, columns.uniform_size, now_prefix), count, codec_id,
            compression, base_timestamp, max_timestamp, producer_id, producer_epoch,
            base_sequence, transactional,
        )  # fmt: skip
    deltas = _offset_delta_varints(count)
    parts: list[bytes] = []
    start = 0
    rows = zip(values, keys, headers, stamps, strict=True)  # type: ignore[arg-type]
    remaining = iter(values)
    try:
        for limit in DELTA_WIDTH_LIMITS:  # as in encode_record_batch
            stop = min(limit, count)
            width = len(deltas[start])
            plain: dict[int, tuple[bytes, bytes]] = {}
            size, head, middle = -1, b"", b""
            if values_only:  # the usual bulk send: no other column to look at per record
                for offset_delta, value in zip(deltas[start:stop], remaining, strict=False):
                    if value is None:
                        parts.append(_record_of(offset_delta, now_delta, None, None, None))
                        continue
                    if len(value) != size:
                        size = len(value)
                        head, middle = _plain_pieces(plain, size, now_prefix, width)
                    parts += (head, offset_delta, middle, value, b"\x00")  # no headers
                start = stop
                if start == count:
                    break
                continue
            for offset_delta, (value, key, record_headers, stamp) in zip(
                deltas[start:stop], rows, strict=False
            ):
                if key is None and value is not None and not record_headers and stamp is None:
                    if len(value) != size:
                        size = len(value)
                        head, middle = _plain_pieces(plain, size, now_prefix, width)
                    parts += (head, offset_delta, middle, value, b"\x00")  # no headers
                else:
                    delta = now_delta if stamp is None else stamp - base_timestamp
                    parts.append(_record_of(offset_delta, delta, key, value, record_headers))
            start = stop
            if start == count:
                break
        return _batch(
            parts, count, codec_id, compression, base_timestamp, max_timestamp,
            producer_id, producer_epoch, base_sequence, transactional,
        )  # fmt: skip
    except (struct.error, OverflowError, UnicodeEncodeError, ValueError) as error:
        raise MessageEncodingError(f"cannot encode a Kafka record batch: {error}") from error
    except TypeError as error:  # a value or key that is not bytes
        raise MessageEncodingError(f"cannot encode a Kafka record batch: {error}") from error


def _codec_id(compression: CompressionType) -> int:
    codec_id = KAFKA_CODEC_IDS.get(compression)
    if codec_id is None:
        raise InvalidConfigurationError(
            f"compression_type={compression} does not exist on Kafka: use GZIP on Kafka"
        )
    return codec_id


def _uniform_records(values: Sequence[bytes | None], size: int, now_prefix: bytes) -> list[bytes]:
    """The parts of the records of ``values``, all bytes of ``size`` (values only): each
    value between the cached bytes that end the record before it and begin its own, laid
    out by slice assignments, with no Python step per record."""
    count = len(values)
    separators = _separators(size, now_prefix, count)
    parts: list[bytes] = [b"\x00"] * (2 * count + 1)  # the last: no headers
    parts[0 : 2 * count : 2] = separators[:count]
    parts[1 : 2 * count : 2] = values  # type: ignore[assignment]  # all bytes: uniform
    return parts


# (value size, attributes + timestamp delta) -> the bytes before each record's value: the
# end of the record before it (no headers), then its length, attributes, timestamp delta,
# offset delta, null key and value length. A few sizes only: a bulk sender has one or two.
_SEPARATORS: dict[tuple[int, bytes], list[bytes]] = {}
_SEPARATOR_SIZES = 4


def _separators(size: int, now_prefix: bytes, count: int) -> list[bytes]:
    key = (size, now_prefix)
    separators = _SEPARATORS.get(key)
    if separators is None or len(separators) < count:
        if separators is None and len(_SEPARATORS) >= _SEPARATOR_SIZES:
            del _SEPARATORS[next(iter(_SEPARATORS))]  # the oldest
        by_width: dict[int, tuple[bytes, bytes]] = {}  # offset delta width -> its pieces
        separators = []
        for index, delta in enumerate(_offset_delta_varints(count)[:count]):
            pieces = by_width.get(len(delta))
            if pieces is None:
                pieces = by_width[len(delta)] = _plain_pieces({}, size, now_prefix, len(delta))
            head, middle = pieces
            separators.append((b"\x00" if index else b"") + head + delta + middle)
        _SEPARATORS[key] = separators
    return separators


def _plain_pieces(
    cache: dict[int, tuple[bytes, bytes]], size: int, now_prefix: bytes, width: int
) -> tuple[bytes, bytes]:
    """The bytes before a plain record's offset delta (length, attributes, timestamp
    delta) and between it and the value (null key, value length), for a value of ``size``
    bytes and a delta of ``width`` bytes."""
    pieces = cache.get(size)
    if pieces is None:
        value_length = varint(size)
        length = len(now_prefix) + width + 1 + len(value_length) + size + 1
        pieces = cache[size] = (varint(length) + now_prefix, b"\x01" + value_length)
    return pieces


def _batch(
    parts: list[bytes],
    count: int,
    codec_id: int,
    compression: CompressionType,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    """The batch of these records' bytes: compressed, header, CRC."""
    records = b"".join(parts)
    if codec_id:
        records = get_kafka_codec(compression).compress(records)
    # baseOffset 0 and partitionLeaderEpoch -1: the broker sets them; the CRC: below;
    # attributes: the codec, CreateTime, transactional or not, never control.
    attributes = (codec_id | TRANSACTIONAL) if transactional else codec_id
    header = HEADER.pack(
        0, HEADER_SIZE - LOG_OVERHEAD + len(records), -1, MAGIC, 0, attributes, count - 1,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count,
    )  # fmt: skip
    return _with_crc(header, records)


def _record(message: OutgoingMessage, offset_delta: bytes, timestamp_delta: int) -> bytes:
    """One record, length included, with whatever key, headers and null value it has."""
    value = None if message.null_value else message.value
    return _record_of(
        offset_delta, timestamp_delta, message.partition_key, value, message.properties
    )


def _record_of(
    offset_delta: bytes,
    timestamp_delta: int,
    key: str | bytes | None,
    value: bytes | None,
    headers: Mapping[str, str] | None,
) -> bytes:
    """One record, length included; a None ``value`` is a null value (a tombstone on
    compacted topics)."""
    fields = [b"\x00", varint(timestamp_delta), offset_delta]  # attributes first
    if key is None:
        fields.append(b"\x01")  # length -1: null key
    else:
        if isinstance(key, str):
            key = key.encode("utf-8", "surrogateescape")
        fields += (varint(len(key)), key)
    if value is None:
        fields.append(b"\x01")  # length -1: null value
    else:
        fields += (varint(len(value)), value)
    fields.append(varint(len(headers)) if headers else b"\x00")
    if headers:
        for name, text in headers.items():
            name_bytes = name.encode("utf-8", "surrogateescape")
            text_bytes = text.encode("utf-8", "surrogateescape")
            fields += (varint(len(name_bytes)), name_bytes, varint(len(text_bytes)), text_bytes)
    body = b"".join(fields)
    return varint(len(body)) + body


def with_producer_state(
    batch: bytes, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes:
    """``batch`` with its producer id, epoch and base sequence replaced (CRC recomputed),
    for resending pending batches after the idempotent producer's state changed."""
    if len(batch) < HEADER_SIZE or batch[MAGIC_AT] != MAGIC:
        raise MalformedFrameError("not a Kafka v2 record batch")
    state = _PRODUCER_STATE.pack(producer_id, producer_epoch, base_sequence)
    return _with_crc(batch[:_PRODUCER_AT] + state, batch[_PRODUCER_AT + len(state) :])


def _with_crc(head: bytes, rest: bytes) -> bytes:
    """``head + rest`` with the CRC field (in ``head``) set to the CRC-32C of what follows."""
    crc = google_crc32c.extend(google_crc32c.value(head[ATTRIBUTES_AT:]), rest)
    return b"".join((head[:_CRC_AT], _U32.pack(crc), head[ATTRIBUTES_AT:], rest))
