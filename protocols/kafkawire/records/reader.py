"""Kafka RecordBatch v2, the consumer's direction: the records of a Fetch partition to
messages, by columns where records are alike. Pure functions on bytes; the layout is in
``layout.py``.

Transactions (read_committed): a transactional batch (attributes bit 0x10) of a producer
whose transaction was aborted is skipped, as the Java client's fetcher skips it: the Fetch
response lists the aborted transactions (producer id, first offset) of the fetched range,
and a producer's ABORT marker (a control batch, bit 0x20, one record whose key is version
int16 | type int16, type 0 ABORT, 1 COMMIT) ends its aborted transaction. Control batches
are never delivered; the offsets of both are stepped over.

This runs once per record, where a function call costs as much as the rest of a record:
the plain record (no key, no headers) takes hand-inlined paths.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Sequence

import google_crc32c

from msgclient.errors import ChecksumMismatchError
from msgclient.message import Message
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
from protocols.kafkawire.records.layout import (
    ATTRIBUTES_AT,
    CONTROL,
    DELTA_WIDTH_LIMITS,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_AT,
    TRANSACTIONAL,
    varint,
    zigzag,
)
from protocols.kafkawire.records.record import Record, malformed, record_at
from protocols.kafkawire.records.run import RecordRun

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_ABORT = 0  # the control record type of an ABORT marker (1: COMMIT)
_NO_END = 1 << 63  # past every offset: no last stable offset to stop at
_MIN_RECORD = 7  # a record of one-byte fields: length, attributes, 3 varints, 0 headers
_INT31 = 0x7FFFFFFF  # sequence numbers wrap to 0 after the largest int32
_CODECS_BY_ID = {codec_id: kind for kind, codec_id in KAFKA_CODEC_IDS.items()}


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
    while size - position >= LOG_OVERHEAD:
        base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(data, position)
        if size - position > MAGIC_AT and data[position + MAGIC_AT] != MAGIC:
            magic = data[position + MAGIC_AT]
            legacy = " (the legacy message format, magic 0 and 1, is not supported)"
            raise malformed(base_offset, f"magic {magic}" + (legacy if magic < 2 else ""))
        if batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise malformed(base_offset, f"length {batch_length} is less than its header")
        end = position + LOG_OVERHEAD + batch_length
        if end > size:
            break  # truncated by the broker's size limit: fetched again next time
        header = HEADER.unpack_from(data, position)
        crc, attributes, last_delta = header[4:7]
        if last_delta < 0:
            raise malformed(base_offset, f"negative last offset delta {last_delta}")
        last_offset = base_offset + last_delta
        if base_offset >= stable_end:  # the next fetch starts at the last stable offset
            next_offset = max(next_offset, stable_end)
            break
        wanted = last_offset >= fetch_offset  # else all before what was asked for
        if wanted or pending is not None:
            body = data[position + HEADER_SIZE : end]
            actual = google_crc32c.extend(
                google_crc32c.value(data[position + ATTRIBUTES_AT : position + HEADER_SIZE]),
                body,
            )
            if actual != crc:
                raise ChecksumMismatchError(
                    f"record batch at offset {base_offset}: CRC-32C is {actual:#010x}, "
                    f"the header says {crc:#010x}"
                )
            deliver = wanted and not attributes & CONTROL  # markers are not messages
            if pending is not None and header[9] >= 0:  # a producer id: read committed
                while pending and pending[0][0] <= last_offset:
                    aborted_producers.add(heapq.heappop(pending)[1])
                producer_id = header[9]
                if producer_id in aborted_producers:
                    if attributes & CONTROL:
                        if _is_abort_marker(header, body, max_uncompressed_bytes):
                            aborted_producers.discard(producer_id)
                    elif attributes & TRANSACTIONAL:
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
    while size - position >= HEADER_SIZE:
        header = HEADER.unpack_from(data, position)
        end = position + LOG_OVERHEAD + header[1]
        if end > size or header[1] < HEADER_SIZE - LOG_OVERHEAD:
            break  # cut short (or malformed: the decoding loop says so)
        attributes, producer_id, epoch = header[5], header[9], header[10]
        if attributes & TRANSACTIONAL and producer_id >= 0:
            waiting = open_batches.get(producer_id)
            if attributes & CONTROL:
                if waiting is not None:
                    body = data[position + HEADER_SIZE : end]
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
            raise malformed(base_offset, f"unknown compression codec id {attributes & 0x07}")
        body = get_kafka_codec(kind).decompress(body, max_uncompressed_bytes)
    try:
        key = record_at(body, 0, base_offset)[3]
    except IndexError:
        raise malformed(base_offset, "a record runs past the end of the batch") from None
    if key is None or len(key) < _CONTROL_KEY.size:
        raise malformed(base_offset, "a control record without a version and type key")
    version, kind_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise malformed(base_offset, f"control record key version {version}")
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
            raise malformed(base_offset, f"unknown compression codec id {attributes & 0x07}")
        body = get_kafka_codec(kind).decompress(body, max_uncompressed_bytes)
    size = len(body)
    if not 0 <= count <= size // _MIN_RECORD:  # before the loop: a lie must fail fast
        raise malformed(base_offset, f"{count} records cannot fit in {size} bytes")
    scale = 1  # timestamps are base + delta * scale: LogAppendTime ignores the deltas
    if attributes & LOG_APPEND_TIME:
        base_timestamp, scale = max_timestamp, 0
    min_delta = fetch_offset - base_offset
    # A message's topic_name() is its partition's name, as on Pulsar (the consumer finds
    # the partition of an acknowledged message by it); its id holds topic and partition.
    partition_name = f"{topic}-{partition}"
    singles: list[Message] | None = None  # the Messages made one by one since the last run
    p = index = 0
    try:
        while index < count:
            record = record_at(body, p, base_offset)
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
        raise malformed(base_offset, "a record runs past the end of the batch") from None
    if p != size:
        raise malformed(base_offset, f"{size - p} bytes follow its {count} records")


def _read_run(
    body: bytes, p: int, record: Record, most: int, base_timestamp: int, scale: int
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
    zigzag_list.insert(0, zigzag(timestamp_delta))
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
        or body[sample + delta_at : sample + key_at] != varint(first_delta + _MIN_RUN - 1)
    ):
        return 1, []  # a record a shortest run away: another length, value size or offset
    limit = min(
        most, (len(body) - p) // stride, DELTA_WIDTH_LIMITS[key_at - delta_at - 1] - first_delta
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
        expected = varint(delta)
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
