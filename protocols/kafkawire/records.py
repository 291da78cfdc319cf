"""Kafka RecordBatch v2 (magic 2): encoding a producer's batch, decoding Fetch records.

Pure functions on bytes. A batch (big-endian, 61-byte header)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records

and a record, its integers zigzag varints::

    length | attributes i8 | timestampDelta | offsetDelta | keyLength | key |
    valueLength | value | headerCount | (nameLength | name | valueLength | value)*

``batchLength`` counts from partitionLeaderEpoch on; the CRC-32C covers attributes to the
end; with a codec set, everything after recordCount is compressed as one payload.

Transactions (read_committed): a transactional batch (attributes bit 0x10) of a producer
whose transaction was aborted is skipped, as the Java client's fetcher skips it: the Fetch
response lists the aborted transactions (producer id, first offset) of the fetched range,
and a producer's ABORT marker (a control batch, bit 0x20, one record whose key is version
int16 | type int16, type 0 ABORT, 1 COMMIT) ends its aborted transaction. Control batches
are never delivered; the offsets of both are stepped over.

Both directions run once per record, where a function call costs as much as the rest of
a record: the plain record (no key, no headers) takes hand-inlined paths in both.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import google_crc32c

from msgclient.contract import ValueColumns
from msgclient.errors import (
    ChecksumMismatchError,
    InvalidConfigurationError,
    MalformedFrameError,
    MessageEncodingError,
)
from msgclient.message import Message, OutgoingMessage
from msgclient.options import CompressionType
from protocols.columns import (
    column,
    common_prefix,
    consecutive_varint_columns,
    leading,
    valid_varints,
    varint_columns,
    varints,
)
from protocols.kafkawire.compression import KAFKA_CODEC_IDS, get_kafka_codec
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.record_run import RecordRun
from protocols.varint import uvarint

__all__ = [
    "decode_record_batches",
    "encode_record_batch",
    "encode_record_columns",
    "with_producer_state",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE = _HEADER.size  # 61
_LOG_OVERHEAD = 12  # baseOffset and batchLength, which batchLength does not count
_MAGIC_AT, _CRC_AT, _ATTRIBUTES_AT, _PRODUCER_AT = 16, 17, 21, 43
_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_U32 = struct.Struct(">I")
_MAGIC = 2
# attribute bits; bits 0-2 are the codec
_LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x08, 0x10, 0x20
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_ABORT = 0  # the control record type of an ABORT marker (1: COMMIT)
_NO_END = 1 << 63  # past every offset: no last stable offset to stop at
_MIN_RECORD = 7  # a record of one-byte fields: length, attributes, 3 varints, 0 headers
_INT31 = 0x7FFFFFFF  # sequence numbers wrap to 0 after the largest int32
_CODECS_BY_ID = {codec_id: kind for kind, codec_id in KAFKA_CODEC_IDS.items()}

# Varints of 0 to 8191 (one or two bytes): offset deltas and most sizes are among them,
# and a lookup here costs a fraction of computing one.
_SMALL_COUNT = 1 << 13
_SMALL: list[bytes] = [bytes((2 * i,)) for i in range(64)] + [
    bytes(((2 * i) & 0x7F | 0x80, i >> 6)) for i in range(64, _SMALL_COUNT)
]
# An offset delta below each limit takes one more varint byte than below the previous one.
_DELTA_WIDTH_LIMITS = (64, 1 << 13, 1 << 20, 1 << 27, 1 << 34)


def _varint(n: int) -> bytes:
    """Kafka's zigzag varint (and varlong) of a signed int."""
    if 0 <= n < _SMALL_COUNT:
        return _SMALL[n]
    return uvarint(_zigzag(n))


def _zigzag(n: int) -> int:
    """A signed int as Kafka's varints hold it: 0, -1, 1, -2, ... as 0, 1, 2, 3, ..."""
    return n << 1 if n >= 0 else (~n << 1) | 1


def _offset_delta_varints(count: int) -> list[bytes]:
    """Varints of 0 to at least ``count`` - 1."""
    if count <= _SMALL_COUNT:
        return _SMALL
    return _SMALL + [_varint(i) for i in range(_SMALL_COUNT, count)]


# -- encoding ----------------------------------------------------------------------------


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
    now_prefix = b"\x00" + _varint(now_ms - base_timestamp)  # attributes, timestamp delta
    deltas = _offset_delta_varints(count)
    parts: list[bytes] = []
    remaining = iter(messages)
    start = 0
    try:
        # By ranges of offset deltas of one varint width, so that the bytes around a plain
        # record's delta and value depend on the value's size only.
        for limit in _DELTA_WIDTH_LIMITS:
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
    now_prefix = b"\x00" + _varint(now_delta)  # attributes, timestamp delta
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
        for limit in _DELTA_WIDTH_LIMITS:  # as in encode_record_batch
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
        value_length = _varint(size)
        length = len(now_prefix) + width + 1 + len(value_length) + size + 1
        pieces = cache[size] = (_varint(length) + now_prefix, b"\x01" + value_length)
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
    attributes = (codec_id | _TRANSACTIONAL) if transactional else codec_id
    header = _HEADER.pack(
        0, _HEADER_SIZE - _LOG_OVERHEAD + len(records), -1, _MAGIC, 0, attributes, count - 1,
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
    fields = [b"\x00", _varint(timestamp_delta), offset_delta]  # attributes first
    if key is None:
        fields.append(b"\x01")  # length -1: null key
    else:
        if isinstance(key, str):
            key = key.encode("utf-8", "surrogateescape")
        fields += (_varint(len(key)), key)
    if value is None:
        fields.append(b"\x01")  # length -1: null value
    else:
        fields += (_varint(len(value)), value)
    fields.append(_varint(len(headers)) if headers else b"\x00")
    if headers:
        for name, text in headers.items():
            name_bytes = name.encode("utf-8", "surrogateescape")
            text_bytes = text.encode("utf-8", "surrogateescape")
            fields += (_varint(len(name_bytes)), name_bytes, _varint(len(text_bytes)), text_bytes)
    body = b"".join(fields)
    return _varint(len(body)) + body


def with_producer_state(
    batch: bytes, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes:
    """``batch`` with its producer id, epoch and base sequence replaced (CRC recomputed),
    for resending pending batches after the idempotent producer's state changed."""
    if len(batch) < _HEADER_SIZE or batch[_MAGIC_AT] != _MAGIC:
        raise MalformedFrameError("not a Kafka v2 record batch")
    state = _PRODUCER_STATE.pack(producer_id, producer_epoch, base_sequence)
    return _with_crc(batch[:_PRODUCER_AT] + state, batch[_PRODUCER_AT + len(state) :])


def _with_crc(head: bytes, rest: bytes) -> bytes:
    """``head + rest`` with the CRC field (in ``head``) set to the CRC-32C of what follows."""
    crc = google_crc32c.extend(google_crc32c.value(head[_ATTRIBUTES_AT:]), rest)
    return b"".join((head[:_CRC_AT], _U32.pack(crc), head[_ATTRIBUTES_AT:], rest))


# -- decoding ----------------------------------------------------------------------------


def decode_record_batches(
    data: bytes | memoryview,
    topic: str,
    partition: int,
    fetch_offset: int,
    *,
    max_uncompressed_bytes: int,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    last_stable_offset: int = -1,
) -> tuple[list[Sequence[Message]], int]:
    """The messages at or after ``fetch_offset`` in the records of one Fetch partition, in
    offset order as runs (a ``RecordRun`` for each run of plain records read by columns, a
    list of Messages for the records between them), and the offset to fetch next.

    Read committed: ``aborted_transactions`` are the partition's aborted transactions as
    the Fetch response lists them, (producer id, first offset) each: their records are not
    delivered (None: read uncommitted, every record is). No record at or after
    ``last_stable_offset`` (when >= 0) is delivered, and the next fetch starts there.
    Control batches (transaction markers) are never delivered. The offset to fetch next
    steps over skipped and control batches.

    A batch cut short at the end is how brokers fill a response to its size limit: it is
    left for the next fetch. Raises ``ChecksumMismatchError`` on a CRC mismatch,
    ``MalformedFrameError`` on any structure that does not hold together, and
    ``ProtocolError`` on a payload that does not decompress within
    ``max_uncompressed_bytes``.
    """
    data = bytes(data)
    size = len(data)
    runs: list[Sequence[Message]] = []
    next_offset = fetch_offset
    position = 0
    stable_end = last_stable_offset if last_stable_offset >= 0 else _NO_END
    # As the Java client's fetcher: aborted transactions by first offset, each moved to
    # the producer ids skipped when a batch reaches its first offset, until the
    # producer's ABORT marker. Nothing to do without any (most fetches).
    pending: list[tuple[int, int]] | None = None
    aborted_producers: set[int] = set()
    if aborted_transactions:
        pending = [(first, producer) for producer, first in aborted_transactions]
        heapq.heapify(pending)
    # And by what follows in this response (brokers that list no aborted transactions:
    # tansu).
    undone = (
        _aborted_by_what_follows(data, max_uncompressed_bytes)
        if aborted_transactions is not None
        else None
    )
    while size - position >= _LOG_OVERHEAD:
        base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(data, position)
        if size - position > _MAGIC_AT and data[position + _MAGIC_AT] != _MAGIC:
            magic = data[position + _MAGIC_AT]
            legacy = " (the legacy message format, magic 0 and 1, is not supported)"
            raise _malformed(base_offset, f"magic {magic}" + (legacy if magic < 2 else ""))
        if batch_length < _HEADER_SIZE - _LOG_OVERHEAD:
            raise _malformed(base_offset, f"length {batch_length} is less than its header")
        end = position + _LOG_OVERHEAD + batch_length
        if end > size:
            break  # truncated by the broker's size limit: fetched again next time
        header = _HEADER.unpack_from(data, position)
        crc, attributes, last_delta = header[4:7]
        if last_delta < 0:
            raise _malformed(base_offset, f"negative last offset delta {last_delta}")
        last_offset = base_offset + last_delta
        if base_offset >= stable_end:  # the next fetch starts at the last stable offset
            next_offset = max(next_offset, stable_end)
            break
        wanted = last_offset >= fetch_offset  # else all before what was asked for
        if wanted or pending is not None:
            body = data[position + _HEADER_SIZE : end]
            actual = google_crc32c.extend(
                google_crc32c.value(data[position + _ATTRIBUTES_AT : position + _HEADER_SIZE]),
                body,
            )
            if actual != crc:
                raise ChecksumMismatchError(
                    f"record batch at offset {base_offset}: CRC-32C is {actual:#010x}, "
                    f"the header says {crc:#010x}"
                )
            deliver = wanted and not attributes & _CONTROL  # markers are not messages
            if pending is not None and header[9] >= 0:  # a producer id: read committed
                while pending and pending[0][0] <= last_offset:
                    aborted_producers.add(heapq.heappop(pending)[1])
                producer_id = header[9]
                if producer_id in aborted_producers:
                    if attributes & _CONTROL:
                        if _is_abort_marker(header, body, max_uncompressed_bytes):
                            aborted_producers.discard(producer_id)
                    elif attributes & _TRANSACTIONAL:
                        deliver = False  # a record of an aborted transaction
            if deliver and undone and base_offset in undone:
                deliver = False
            if deliver:
                if last_offset >= stable_end:  # across the last stable offset
                    batch_runs: list[Sequence[Message]] = []
                    _decode_records(
                        header, body, topic, partition, fetch_offset, max_uncompressed_bytes,
                        batch_runs,
                    )  # fmt: skip
                    runs += _before(batch_runs, stable_end)
                else:
                    _decode_records(
                        header, body, topic, partition, fetch_offset, max_uncompressed_bytes, runs
                    )
        if last_offset >= stable_end:
            next_offset = max(next_offset, stable_end)
            break
        next_offset = max(next_offset, last_offset + 1)
        position = end
    return runs, next_offset


def _aborted_by_what_follows(data: bytes, max_uncompressed_bytes: int) -> set[int]:
    """The base offsets of the transactional batches in ``data`` that what follows them in
    it shows aborted: their producer's next marker is an ABORT, or a newer epoch of their
    producer id wrote before any marker (their transaction never ended: an incarnation
    that crashed, whose open transaction a broker that aborts it ends with an ABORT marker;
    tansu writes none). One header read per batch; nothing decoded but markers."""
    undone: set[int] = set()
    open_batches: dict[int, list[tuple[int, int]]] = {}  # producer id: (offset, epoch)
    size = len(data)
    position = 0
    while size - position >= _HEADER_SIZE:
        header = _HEADER.unpack_from(data, position)
        end = position + _LOG_OVERHEAD + header[1]
        if end > size or header[1] < _HEADER_SIZE - _LOG_OVERHEAD:
            break  # cut short (or malformed: the decoding loop says so)
        attributes, producer_id, epoch = header[5], header[9], header[10]
        if attributes & _TRANSACTIONAL and producer_id >= 0:
            waiting = open_batches.get(producer_id)
            if attributes & _CONTROL:
                if waiting is not None:
                    body = data[position + _HEADER_SIZE : end]
                    if _is_abort_marker(header, body, max_uncompressed_bytes):
                        undone.update(offset for offset, _ in waiting)
                    del open_batches[producer_id]
            elif waiting is None:
                open_batches[producer_id] = [(header[0], epoch)]
            else:
                if waiting[0][1] < epoch:
                    undone.update(offset for offset, older in waiting if older < epoch)
                    waiting[:] = [(o, e) for o, e in waiting if e >= epoch]
                waiting.append((header[0], epoch))
        position = end
    return undone


def _is_abort_marker(header: tuple[int, ...], body: bytes, max_uncompressed_bytes: int) -> bool:
    """Whether the control batch (``header`` as unpacked, ``body`` what follows) is an ABORT
    marker: its first record's key is version int16 | type int16, type 0 ABORT."""
    base_offset, attributes, count = header[0], header[5], header[12]
    if count <= 0:
        return False
    if attributes & 0x07:  # markers are written uncompressed; read them anyway
        kind = _CODECS_BY_ID.get(attributes & 0x07)
        if kind is None:
            raise _malformed(base_offset, f"unknown compression codec id {attributes & 0x07}")
        body = get_kafka_codec(kind).decompress(body, max_uncompressed_bytes)
    try:
        key = _record_at(body, 0, base_offset)[3]
    except IndexError:
        raise _malformed(base_offset, "a record runs past the end of the batch") from None
    if key is None or len(key) < _CONTROL_KEY.size:
        raise _malformed(base_offset, "a control record without a version and type key")
    version, kind_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise _malformed(base_offset, f"control record key version {version}")
    return bool(kind_id == _ABORT)


def _before(runs: list[Sequence[Message]], stop: int) -> list[Sequence[Message]]:
    """``runs`` without their messages at or after offset ``stop``."""
    kept: list[Sequence[Message]] = []
    for run in runs:
        if isinstance(run, RecordRun):
            count = stop - run.first_offset
            if count >= len(run):
                kept.append(run)
            elif count > 0:
                kept.append(run.part(0, count))
        else:
            below = [m for m in run if m.message_id().offset < stop]  # type: ignore[attr-defined]
            if below:
                kept.append(below)
    return kept


def _decode_records(
    header: tuple[int, ...],
    body: bytes,
    topic: str,
    partition: int,
    fetch_offset: int,
    max_uncompressed_bytes: int,
    runs: list[Sequence[Message]],
) -> None:
    """Appends the messages at or after ``fetch_offset`` of one batch (its ``header`` as
    unpacked, its ``body`` what follows) to ``runs``."""
    base_offset, attributes, base_timestamp = header[0], header[5], header[7]
    max_timestamp, base_sequence, count = header[8], header[11], header[12]
    if attributes & 0x07:
        kind = _CODECS_BY_ID.get(attributes & 0x07)
        if kind is None:
            raise _malformed(base_offset, f"unknown compression codec id {attributes & 0x07}")
        body = get_kafka_codec(kind).decompress(body, max_uncompressed_bytes)
    size = len(body)
    if not 0 <= count <= size // _MIN_RECORD:  # before the loop: a lie must fail fast
        raise _malformed(base_offset, f"{count} records cannot fit in {size} bytes")
    scale = 1  # timestamps are base + delta * scale: LogAppendTime ignores the deltas
    if attributes & _LOG_APPEND_TIME:
        base_timestamp, scale = max_timestamp, 0
    min_delta = fetch_offset - base_offset
    # A message's topic_name() is its partition's name, as on Pulsar (the consumer finds
    # the partition of an acknowledged message by it); its id holds topic and partition.
    partition_name = f"{topic}-{partition}"
    singles: list[Message] | None = None  # the Messages made one by one since the last run
    p = index = 0
    try:
        while index < count:
            record = _record_at(body, p, base_offset)
            end, timestamp_delta, offset_delta, key, value, headers = record[:6]
            if key is None and headers is None and value is not None and index + 1 < count:
                run, values, timestamps, after, value_size = _read_run(
                    body, p, record, count - index, base_timestamp, scale
                )
                if run > 1:
                    skip = max(0, min_delta - offset_delta)
                    if skip < run:
                        first_delta = offset_delta + skip
                        runs.append(RecordRun(
                            topic, partition, base_offset + first_delta,
                            values[skip:] if skip else values,
                            timestamps[skip:] if skip else timestamps,
                            (base_sequence + first_delta) & _INT31 if base_sequence >= 0 else -1,
                            value_size,
                        ))  # fmt: skip
                        singles = None
                    p = after
                    index += run
                    continue
            if offset_delta >= min_delta:
                timestamp = base_timestamp + timestamp_delta * scale
                sequence = (base_sequence + offset_delta) & _INT31 if base_sequence >= 0 else -1
                if singles is None:
                    singles = []
                    runs.append(singles)
                singles.append(Message(
                    b"" if value is None else value,  # data() of a null value, as on Pulsar
                    KafkaMessageId(topic, partition, base_offset + offset_delta),
                    partition_name, key, None, headers, timestamp, timestamp, 0, "", sequence,
                    value is None,
                ))  # fmt: skip
            p = end
            index += 1
    except IndexError:
        raise _malformed(base_offset, "a record runs past the end of the batch") from None
    if p != size:
        raise _malformed(base_offset, f"{size - p} bytes follow its {count} records")


def _read_run(
    body: bytes, p: int, record: _Record, most: int, base_timestamp: int, scale: int
) -> tuple[int, list[bytes], list[int], int, int]:
    """The plain records (no key, no headers, a value) from ``p`` on, the first of them
    ``record``, at offsets one apart (at most ``most``): how many, their values, their
    timestamps, where they end, and the size of every value when all have one (else -1).
    Records alike (one size, deltas as wide), 16 or more in a row, are read by columns;
    the others one by one."""
    end, timestamp_delta, offset_delta, _, value, _, timestamp_at, delta_at, key_at, value_at = (
        record
    )
    stride = end - p
    sample = p + (_MIN_RUN - 1) * stride  # the last record of a shortest run
    if (
        most >= _MIN_RUN
        and sample < len(body)
        and body[sample] == body[p]  # its length starts as this one's: likely alike
        and key_at - delta_at <= 3  # offset deltas below 2**20
    ):
        layout = (timestamp_at - p, delta_at - p, key_at - p, value_at - p)
        run, timestamp_columns = _uniform_run(body, p, stride, layout, most, offset_delta)
        if run > 1:
            values = _values(body, p, stride, layout[3], run)
            one_byte = len(timestamp_columns) == 1
            zigzags = timestamp_columns[0] if one_byte else varints(timestamp_columns)
            timestamps = _timestamps(zigzags, base_timestamp, scale)
            return run, values, timestamps, p + run * stride, stride - layout[3] - 1
    # The records after this one (read already), as long as they are plain.
    values, zigzag_list, after = _plain_records(body, end, most - 1, offset_delta + 1)
    if not values:
        return 1, [], [], end, -1
    values.insert(0, value or b"")
    zigzag_list.insert(0, _zigzag(timestamp_delta))
    return len(values), values, _timestamps(zigzag_list, base_timestamp, scale), after, -1


_Layout = tuple[int, int, int, int]  # a record's timestamp delta, offset delta, key, value
# Records alike read by columns from this many on: reading columns costs as much as some
# ten records read one by one, so shorter runs (varied sizes) are not worth a try.
_MIN_RUN = 16


def _uniform_run(
    body: bytes, p: int, stride: int, layout: _Layout, most: int, first_delta: int
) -> tuple[int, list[bytes]]:
    """How many records (at most ``most``) from ``p`` on are laid out as the plain record at
    ``p`` (no key, no headers), read by columns; and the byte columns of their timestamp
    deltas. Such records share their length, attributes, key and value length bytes, have
    a timestamp delta as wide, and offset deltas one apart from ``first_delta`` on (a
    producer's batch of equal-size messages; a compacted one has gaps). ``layout``: where
    the record's timestamp delta, offset delta, key length and value start, from ``p``."""
    timestamp_at, delta_at, key_at, value_at = layout
    sample = p + (_MIN_RUN - 1) * stride
    if (
        body[sample : sample + timestamp_at] != body[p : p + timestamp_at]
        or body[sample + key_at : sample + value_at] != body[p + key_at : p + value_at]
        or body[sample + delta_at : sample + key_at] != _varint(first_delta + _MIN_RUN - 1)
    ):
        return 1, []  # a record a shortest run away: another length, value size or offset
    limit = min(
        most, (len(body) - p) // stride, _DELTA_WIDTH_LIMITS[key_at - delta_at - 1] - first_delta
    )
    # Windows growing eightfold: where runs are short, each costs a short window, not
    # columns as long as the batch.
    window = min(limit, _MIN_RUN)
    while True:
        run, timestamp_columns = _alike(body, p, stride, layout, window, first_delta)
        if run < window or window == limit:
            return run, timestamp_columns
        window = min(limit, window * 8)


def _alike(
    body: bytes, p: int, stride: int, layout: _Layout, count: int, first_delta: int
) -> tuple[int, list[bytes]]:
    """``_uniform_run`` within the first ``count`` records from ``p`` (all in ``body``)."""
    timestamp_at, delta_at, key_at, value_at = layout
    run = count
    for constant in (*range(timestamp_at), *range(key_at, value_at), stride - 1):
        at = p + constant
        run = min(run, leading(column(body, at, stride, run), body[at]))
    timestamp_columns = varint_columns(body, p + timestamp_at, stride, run, delta_at - timestamp_at)
    run = min(run, valid_varints(timestamp_columns))
    delta_width = key_at - delta_at
    expected = consecutive_varint_columns(2 * first_delta, run, delta_width, step=2)
    actual = varint_columns(body, p + delta_at, stride, run, delta_width)
    for column_bytes, wanted in zip(actual, expected, strict=True):
        run = min(run, common_prefix(column_bytes, wanted))
    return run, [c[:run] for c in timestamp_columns]


def _plain_records(
    body: bytes, p: int, most: int, first_delta: int
) -> tuple[list[bytes], list[int], int]:
    """The values and (zigzag) timestamp deltas of the plain records from ``p`` on, of any
    sizes, at offset deltas one apart from ``first_delta`` on (at most ``most``), and where
    they end: read one by one, stopping at the first other record (which the general
    reader reads, or names if it is malformed)."""
    values: list[bytes] = []
    zigzags: list[int] = []
    delta = first_delta
    size = len(body)
    for _ in range(most):
        z = body[p]  # length
        if z < 0x80:
            q = p + 1
        elif body[p + 1] < 0x80:
            z, q = (z & 0x7F) | (body[p + 1] << 7), p + 2
        else:
            break
        end = q + (z >> 1)
        if z & 1 or end > size:
            break
        t = body[q + 1]  # the timestamp delta, after the attributes
        if t < 0x80:
            r = q + 2
        elif body[q + 2] < 0x80:
            t, r = (t & 0x7F) | (body[q + 2] << 7), q + 3
        else:
            break
        expected = _varint(delta)
        v = r + len(expected)
        if body[r:v] != expected or body[v] != 1:  # the next offset delta, a null key
            break
        n = body[v + 1]  # value length
        if n < 0x80:
            v += 2
        elif body[v + 2] < 0x80:
            n, v = (n & 0x7F) | (body[v + 2] << 7), v + 3
        else:
            break
        if n & 1 or v + (n >> 1) + 1 != end or body[end - 1]:  # a value, no headers
            break
        values.append(body[v : end - 1])
        zigzags.append(t)
        delta += 1
        p = end
    return values, zigzags, p


def _timestamps(zigzags: Sequence[int], base_timestamp: int, scale: int) -> list[int]:
    """The timestamps of records whose timestamp deltas are ``zigzags`` (as varints)."""
    if not scale:  # LogAppendTime: the batch's, for every record
        return [base_timestamp] * len(zigzags)
    if len(zigzags) > 128 and max(zigzags) < 128:
        # Deltas of one byte: each looked up in a table of the 128 there are, in C.
        table = [base_timestamp + ((z >> 1) ^ -(z & 1)) for z in range(128)]
        return list(map(table.__getitem__, zigzags))
    return [base_timestamp + ((z >> 1) ^ -(z & 1)) for z in zigzags]


def _values(body: bytes, p: int, stride: int, value_at: int, count: int) -> list[bytes]:
    """The values of ``count`` plain records laid out from ``p`` on, ``stride`` apart."""
    start = p + value_at
    size = stride - value_at - 1  # the value, then a zero header count
    return [body[v : v + size] for v in range(start, start + count * stride, stride)]


_Record = tuple[
    int, int, int, "bytes | None", "bytes | None", "dict[str, str] | None", int, int, int, int
]


def _record_at(data: bytes, p: int, base_offset: int) -> _Record:
    """The record at ``p``: (its end, timestamp delta, offset delta, key, value (None: a null
    value), headers, and where its timestamp delta, offset delta, key length and value
    start).
    Varints of one or two bytes are read in place, longer ones by _varint_at."""
    z = data[p]  # length
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    end = p + (z >> 1)
    if z & 1 or end > len(data):
        raise _malformed(base_offset, f"record length {_signed(z)} overruns the batch")
    timestamp_at = p + 1  # after the attributes byte (unused)
    z = data[timestamp_at]
    if z < 0x80:
        p += 2
    else:
        z, p = _varint_at(data, timestamp_at)
    timestamp_delta, delta_at = (z >> 1) ^ -(z & 1), p
    z = data[p]  # offset delta
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    if z & 1:
        raise _malformed(base_offset, f"offset delta {_signed(z)}")
    offset_delta, key_at = z >> 1, p
    z = data[p]  # key length
    if z < 0x80:
        p += 1
    else:
        z, p = _varint_at(data, p)
    key = None
    if not z & 1:
        key = data[p : p + (z >> 1)]
        p += z >> 1  # a key or value past the record's end fails the length check below
    elif z != 1:
        raise _malformed(base_offset, f"key length {_signed(z)}")
    z = data[p]  # value length
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    value_at = p
    value: bytes | None
    if not z & 1:
        value = data[p : p + (z >> 1)]
        p += z >> 1
    elif z == 1:
        value = None  # length -1: a null value (a tombstone)
    else:
        raise _malformed(base_offset, f"value length {_signed(z)}")
    headers = None
    if data[p] == 0:
        p += 1
    else:
        headers, p = _headers_at(data, p, end, base_offset)
    if p != end:
        raise _malformed(base_offset, f"a record's fields end at {p}, its length at {end}")
    return (
        end, timestamp_delta, offset_delta, key, value, headers,
        timestamp_at, delta_at, key_at, value_at,
    )  # fmt: skip


def _headers_at(
    data: bytes, p: int, record_end: int, base_offset: int
) -> tuple[dict[str, str], int]:
    """The headers at ``p`` (their count first) and the position after them."""
    z, p = _varint_at(data, p)
    count = z >> 1
    if z & 1 or count > (record_end - p) // 2:  # a header takes two bytes at least
        raise _malformed(base_offset, f"header count {_signed(z)} in a record")
    headers = {}
    for _ in range(count):
        z, p = _varint_at(data, p)
        end = p + (z >> 1)
        if z & 1 or end > record_end:
            raise _malformed(base_offset, f"header name length {_signed(z)} in a record")
        name = data[p:end].decode("utf-8", "surrogateescape")
        z, p = _varint_at(data, end)
        end = p + (z >> 1)
        if z == 1:
            headers[name] = ""  # null value
        elif z & 1 or end > record_end:
            raise _malformed(base_offset, f"header value length {_signed(z)} in a record")
        else:
            headers[name] = data[p:end].decode("utf-8", "surrogateescape")
            p = end
    return headers, p


def _varint_at(data: bytes, p: int) -> tuple[int, int]:
    """The raw (still zigzag) varint at ``p``, of at most 10 bytes (a varlong), and the
    position after it. Past the end of ``data``: IndexError, a record overrun."""
    z = data[p]
    if z < 0x80:  # the most common by far: returned before the loop
        return z, p + 1
    z &= 0x7F
    for i in range(p + 1, p + 10):
        byte = data[i]
        z |= (byte & 0x7F) << (7 * (i - p))
        if byte < 0x80:
            return z, i + 1
    raise MalformedFrameError(f"a varint at byte {p} of a batch runs over 10 bytes")


def _malformed(base_offset: int, what: str) -> MalformedFrameError:
    return MalformedFrameError(f"record batch at offset {base_offset}: {what}")


def _signed(z: int) -> int:
    """The int a zigzag varint encodes."""
    return (z >> 1) ^ -(z & 1)
