"""Kafka RecordBatch v2 (protocols/kafkawire/records/): encode_record_batch,
with_producer_state, decode_record_batches.

Batches round-trip every field under every codec; mutated batches (with their CRC made
right again, so the record parser is reached), random bytes and lying counts and lengths
give only ProtocolError, in memory bounded by the input and max_uncompressed_bytes.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections.abc import Mapping

import google_crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import MalformedFrameError, ProtocolError
from msgclient.message import Message, OutgoingMessage
from msgclient.options import CompressionType
from protocols.kafkawire.compression import get_kafka_codec
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.records import (
    decode_record_batches,
    encode_record_batch,
    with_producer_state,
)
from protocols.kafkawire.records.run import RecordRun
from tests.fuzz.strategies import INTERESTING_SIZES, KIB, MIB, bounded, examples, mutated, text
from tests.unit.kafka.test_records import DefaultRecordBatchBuilder, zz

TOPIC, PARTITION = "fuzz", 2
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header (written independently)
KINDS = [
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
]
CODEC_IDS = {kind: i for i, kind in enumerate(KINDS)}
COMPRESSIONS = st.sampled_from(KINDS)
NOW = 1_700_000_000_000
INT31 = 0x7FFFFFFF

# Codecs are made (and their packages imported) on first use: not inside a measured call.
for _kind in KINDS:
    get_kafka_codec(_kind)

_LOOP = asyncio.new_event_loop()  # the futures are never awaited; they need a loop to belong to
_LOOP.close()


class Sent:
    def __init__(
        self,
        value: bytes,
        key: str | bytes | None,
        headers: Mapping[str, str] | None,
        timestamp: int | None,
    ) -> None:
        self.value, self.key, self.headers, self.timestamp = value, key, headers, timestamp

    def outgoing(self) -> OutgoingMessage:
        return OutgoingMessage(
            self.value,
            _LOOP.create_future(),
            partition_key=self.key,
            properties=self.headers,
            event_timestamp=self.timestamp,
        )


# Half plain (no key, headers or timestamp): the encoder and decoder take fast paths there.
SENT = st.builds(Sent, st.binary(max_size=200), st.none(), st.none(), st.none()) | st.builds(
    Sent,
    st.binary(max_size=200),
    st.none() | text(10) | st.binary(max_size=20),
    st.none() | st.dictionaries(text(10), text(10), max_size=3),
    st.none() | st.integers(0, 2**41),
)
PRODUCER_STATE = st.tuples(
    st.just(-1) | st.integers(0, 2**63 - 1),
    st.just(-1) | st.integers(0, 2**15 - 1),
    st.sampled_from([-1, 0, INT31 - 5, INT31]) | st.integers(0, INT31),
)


def at_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch as a broker serves it: baseOffset assigned (it is outside the CRC)."""
    return struct.pack(">q", base_offset) + batch[8:]


def encode(sent: list[Sent], kind: CompressionType, state: tuple[int, int, int]) -> bytes:
    producer_id, epoch, sequence = state
    return encode_record_batch(
        [s.outgoing() for s in sent],
        compression=kind,
        now_ms=NOW,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def decode(data: bytes, fetch_offset: int = 0, limit: int = 1 * MIB) -> tuple[list[Message], int]:
    runs, next_offset = decode_record_batches(
        data, TOPIC, PARTITION, fetch_offset, max_uncompressed_bytes=limit
    )
    return [message for run in runs for message in run], next_offset


def check(message: Message, sent: Sent, offset: int, sequence: int) -> None:
    assert message.value() == sent.value
    assert message.message_id() == KafkaMessageId(TOPIC, PARTITION, offset)
    assert message.topic_name() == f"{TOPIC}-{PARTITION}"
    key = sent.key.encode("utf-8") if isinstance(sent.key, str) else sent.key
    assert message.key_bytes() == key
    assert message.properties() == dict(sent.headers or {})
    timestamp = NOW if sent.timestamp is None else sent.timestamp
    assert message.event_timestamp() == message.publish_timestamp() == timestamp
    assert message.sequence_id() == sequence


# -- round trips ---------------------------------------------------------------------------


@st.composite
def fetches(
    draw: st.DrawFn,
) -> tuple[bytes, list[tuple[Sent, int, int]], int, int]:
    """Batches at increasing offsets as a Fetch returns them: the bytes, every message with
    its offset and sequence, the fetch offset and the offset to fetch next."""
    stream, expected = [], []
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 3))):
        sent = draw(st.lists(SENT, min_size=1, max_size=8))
        state = draw(PRODUCER_STATE)
        stream.append(at_offset(encode(sent, draw(COMPRESSIONS), state), offset))
        for i, s in enumerate(sent):
            sequence = (state[2] + i) & INT31 if state[2] >= 0 else -1
            expected.append((s, offset + i, sequence))
        offset += len(sent) + draw(st.integers(0, 5))  # compaction leaves gaps
    first = expected[0][1]
    fetch_offset = draw(st.integers(first - 3, expected[-1][1] + 1))
    return b"".join(stream), expected, fetch_offset, expected[-1][1] + 1


@settings(max_examples=examples(0.25))
@given(fetches())
def test_what_is_produced_is_fetched(
    fetch: tuple[bytes, list[tuple[Sent, int, int]], int, int],
) -> None:
    data, expected, fetch_offset, next_offset = fetch
    messages, after = decode(data, fetch_offset)
    wanted = [(s, o, q) for s, o, q in expected if o >= fetch_offset]
    assert len(messages) == len(wanted)
    for message, (sent, offset, sequence) in zip(messages, wanted, strict=True):
        check(message, sent, offset, sequence)
    assert after == max(next_offset, fetch_offset)


# Runs of equal-size plain records, as a busy producer writes them, read by columns: what
# breaks a run (a timestamp or offset delta one byte wider, an offset gap, a record with a
# key, headers or a null value, another size) must end it at that record, no later; 16
# alike records in a row or more must be read as one run.
# A stretch of records: the offset step before its first (then one apart), its records'
# timestamp delta and kind, and how many there are.
STRETCH = st.tuples(
    st.sampled_from([1, 1, 1, 2, 100, 8000]),
    st.sampled_from([0, 0, 1, 5, -1, 63, 64, 8191, 8192, -70]),
    st.sampled_from(["plain"] * 4 + ["key", "header", "null", "other size"]),
    st.integers(1, 40),
)
MIN_RUN = 16  # records/reader.py reads runs this long or longer by columns
Written = tuple[int, int, bytes | None, bool]  # offset delta, timestamp, value, plain?


@st.composite
def plain_runs(draw: st.DrawFn) -> tuple[bytes, list[Written], int]:
    """One batch, written by kafka-python's builder (independent of the code under test):
    its bytes, each record's (offset, timestamp, value, plain?) and the base sequence."""
    size = draw(st.sampled_from([0, 1, 50, 127, 128]))
    base_sequence = draw(PRODUCER_STATE)[2]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=base_sequence, batch_size=1 << 30,
    )  # fmt: skip
    written = []
    delta = -1
    for step, timestamp_delta, kind, count in draw(st.lists(STRETCH, min_size=1, max_size=12)):
        for i in range(count):
            delta += step if i == 0 else 1
            size_now = size + 3 if kind == "other size" else size
            value: bytes | None = None if kind == "null" else bytes([delta & 0xFF]) * size_now
            key = b"k" if kind == "key" else None
            headers = [("h", b"v")] if kind == "header" else []
            timestamp = NOW + timestamp_delta + (i % 2)  # deltas differ within a stretch
            builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
            written.append((delta, timestamp, value, kind in ("plain", "other size")))
    return at_offset(bytes(builder.build()), 5000), written, base_sequence


@settings(max_examples=examples(0.25))
@given(plain_runs(), st.data())
def test_runs_of_plain_records_read_by_columns(
    batch: tuple[bytes, list[Written], int], data: st.DataObject
) -> None:
    raw, written, base_sequence = batch
    fetch_delta = data.draw(st.integers(0, written[-1][0] + 1))
    runs, next_offset = decode_record_batches(
        raw, TOPIC, PARTITION, 5000 + fetch_delta, max_uncompressed_bytes=MIB
    )
    wanted = [w for w in written if w[0] >= fetch_delta]
    messages = [message for run in runs for message in run]
    assert len(messages) == len(wanted)
    for message, (delta, timestamp, value, _) in zip(messages, wanted, strict=True):
        assert message.message_id() == KafkaMessageId(TOPIC, PARTITION, 5000 + delta)
        assert message.value() == value
        assert message.event_timestamp() == message.publish_timestamp() == timestamp
        sequence = (base_sequence + delta) & INT31 if base_sequence >= 0 else -1
        assert message.sequence_id() == sequence
    assert next_offset == 5000 + written[-1][0] + 1
    for run in runs:  # a run's columns are its messages' fields
        if isinstance(run, RecordRun):
            assert run.values(0, len(run)) == [m.value() for m in run]
            assert run.event_timestamps(0, len(run)) == [m.event_timestamp() for m in run]
            assert run.message_ids(0, len(run)) == [m.message_id() for m in run]
    base = written[0][1]  # the batch's base timestamp: its first record's
    in_runs = {
        offset for r in runs if isinstance(r, RecordRun)
        for offset in range(r.first_offset, r.first_offset + len(r))
    }  # fmt: skip

    def plain_pair(a: Written, b: Written) -> bool:
        return a[3] and b[3] and a[2] is not None and b[2] is not None and b[0] == a[0] + 1

    def alike(a: Written, b: Written) -> bool:
        return (
            plain_pair(a, b) and len(a[2] or b"") == len(b[2] or b"")
            and len(zz(a[0])) == len(zz(b[0])) and len(zz(a[1] - base)) == len(zz(b[1] - base))
        )  # fmt: skip

    # Plain records one offset apart, with timestamp deltas of up to two bytes: in runs
    # (read one by one when their sizes vary).
    for a, b in itertools.pairwise(wanted):
        if plain_pair(a, b) and len(zz(a[1] - base)) <= 2 and len(zz(b[1] - base)) <= 2:
            assert 5000 + a[0] in in_runs, a[0]
    # 16 alike records in a row or more (one size, deltas as wide): one run, of columns.
    for start in range(len(wanted) - MIN_RUN + 1):
        window = wanted[start : start + MIN_RUN]
        if all(alike(a, b) for a, b in itertools.pairwise(window)):
            first, last = 5000 + window[0][0], 5000 + window[-1][0]
            assert any(
                isinstance(r, RecordRun)
                and r.first_offset <= first
                and last < r.first_offset + len(r)
                for r in runs
            ), (first, last)


@settings(max_examples=examples(0.05))
@given(st.lists(SENT, min_size=1, max_size=8), COMPRESSIONS, PRODUCER_STATE, PRODUCER_STATE)
def test_with_producer_state_changes_only_the_producer_fields(
    sent: list[Sent],
    kind: CompressionType,
    state: tuple[int, int, int],
    new: tuple[int, int, int],
) -> None:
    restamped = with_producer_state(encode(sent, kind, state), *new)
    fields = HEADER.unpack_from(restamped)
    assert fields[9:12] == new
    messages, _ = decode(restamped)
    for i, (message, s) in enumerate(zip(messages, sent, strict=True)):
        check(message, s, i, (new[2] + i) & INT31 if new[2] >= 0 else -1)


@settings(max_examples=examples(0.05))
@given(fetches(), st.data())
def test_a_batch_cut_short_is_left_for_the_next_fetch(
    fetch: tuple[bytes, list[tuple[Sent, int, int]], int, int], data: st.DataObject
) -> None:
    stream, expected, _, _ = fetch
    cut = data.draw(st.integers(0, len(stream)))
    messages, after = decode(stream[:cut], expected[0][1])
    # Whole batches before the cut are decoded, the rest waits: a prefix of the messages.
    assert [m.value() for m in messages] == [s.value for s, _, _ in expected[: len(messages)]]
    complete = after - expected[0][1]
    assert len(messages) <= complete or after == expected[0][1]


# -- mutated and random batches ------------------------------------------------------------

LIMITS = st.sampled_from([64 * KIB, 1 * MIB])
# Per byte of input or of allowed output: a 7-byte record becomes a Message, its id, its
# value and an offset varint, a few hundred bytes.
PER_BYTE, FIXED = 96, 128 * KIB


def fixed_crc(data: bytes) -> bytes:
    """``data`` with the first batch's CRC made right for whatever its header now says."""
    if len(data) < HEADER.size:
        return data
    (length,) = struct.unpack_from(">i", data, 8)
    end = min(len(data), 12 + max(length, 49))
    crc = google_crc32c.value(data[21:end])
    return data[:17] + struct.pack(">I", crc) + data[21:]


def decode_within_bounds(data: bytes, limit: int, fetch_offset: int = 0) -> None:
    outcome = bounded(
        lambda: decode(data, fetch_offset, limit),
        ProtocolError,
        PER_BYTE * (len(data) + limit) + FIXED,
    )
    if outcome.error is None:
        messages, _ = outcome.result
        # No batch decodes past the limit, whatever its codec.
        assert sum(len(m.data()) for m in messages) <= limit + len(data)  # data(): b"" if null


def record_fields(batch: bytes) -> list[tuple[int, int]]:
    """Header size fields: batchLength, lastOffsetDelta, recordCount."""
    return [(8, 4), (23, 4), (57, 4)]


def rebatch(header: tuple[int, ...], records: bytes, kind: CompressionType) -> bytes:
    """A batch of ``header`` fields around ``records`` (compressed), lengths and CRC right."""
    body = get_kafka_codec(kind).compress(records) if kind.value else records
    fields = list(header)
    fields[1] = HEADER.size - 12 + len(body)
    fields[5] = (fields[5] & ~0x07) | CODEC_IDS[kind]
    return fixed_crc(HEADER.pack(*fields) + body)


@settings(max_examples=examples(0.4))
@given(st.lists(SENT, min_size=1, max_size=6), COMPRESSIONS, PRODUCER_STATE, LIMITS, st.data())
def test_mutated_batches_raise_only_protocol_errors(
    sent: list[Sent],
    kind: CompressionType,
    state: tuple[int, int, int],
    limit: int,
    data: st.DataObject,
) -> None:
    plain = encode(sent, CompressionType.NONE, state)
    header, records = HEADER.unpack_from(plain), plain[HEADER.size :]
    target = data.draw(st.sampled_from(["batch", "records", "header"]))
    if target == "records":  # the records, before compression: the record parser's input
        batch = rebatch(header, data.draw(mutated(records)), kind)
    elif target == "header":  # counts and lengths that lie, CRC right
        fields = list(header)
        lie = data.draw(st.sampled_from(INTERESTING_SIZES).map(lambda n: n % 2**32 - 2**31))
        fields[data.draw(st.sampled_from([6, 12]))] = lie  # lastOffsetDelta, recordCount
        batch = rebatch(tuple(fields), records, kind)
    else:
        batch = data.draw(mutated(rebatch(header, records, kind), record_fields(plain)))
        if data.draw(st.booleans()):
            batch = fixed_crc(batch)
    decode_within_bounds(batch, limit, data.draw(st.integers(-1, 20)))


@settings(max_examples=examples(0.1))
@given(st.binary(max_size=1024), LIMITS)
@example(b"\x00" * 61, 64 * KIB)
def test_random_bytes_raise_only_protocol_errors(data: bytes, limit: int) -> None:
    decode_within_bounds(data, limit)
    # The same bytes as records behind a header that fits them, CRC right.
    header = (0, 0, -1, 2, 0, 0, 0, NOW, NOW, -1, -1, -1, max(1, len(data) // 7))
    decode_within_bounds(rebatch(header, data, CompressionType.NONE), limit)


# -- lying sizes ---------------------------------------------------------------------------


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from([1_000_000, 2**31 - 1, -1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1),
    st.lists(SENT, min_size=1, max_size=4),
    COMPRESSIONS,
)
@example(1_000_000, [Sent(b"", None, None, None)], CompressionType.NONE)
def test_a_batch_claiming_a_million_records_fails_fast(
    count: int, sent: list[Sent], kind: CompressionType
) -> None:
    plain = encode(sent, CompressionType.NONE, (-1, -1, -1))
    fields = list(HEADER.unpack_from(plain))
    if 0 <= count <= len(sent):
        count = len(sent) + 1_000_000
    fields[12] = count
    batch = rebatch(tuple(fields), plain[HEADER.size :], kind)
    limit = 64 * KIB
    outcome = bounded(lambda: decode(batch, 0, limit), ProtocolError, 4 * len(batch) + FIXED)
    assert isinstance(outcome.error, MalformedFrameError)


@pytest.mark.parametrize("length", [2**31 - 1, 2**30, 1_000_000])
def test_a_2_gib_batch_length_waits_for_bytes_that_never_come(length: int) -> None:
    """A truncated batch is how brokers fill a fetch: left for the next one, not buffered."""
    batch = bytearray(
        encode([Sent(b"v" * 100, None, None, None)], CompressionType.NONE, (-1, -1, -1))
    )
    struct.pack_into(">i", batch, 8, length)
    outcome = bounded(lambda: decode(bytes(batch), 0), ProtocolError, 4 * len(batch) + 16 * KIB)
    assert outcome.result == ([], 0)


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 48])
def test_a_negative_or_short_batch_length_is_malformed(length: int) -> None:
    batch = bytearray(encode([Sent(b"v", None, None, None)], CompressionType.NONE, (-1, -1, -1)))
    struct.pack_into(">i", batch, 8, length)
    outcome = bounded(lambda: decode(bytes(batch), 0), ProtocolError, 4 * len(batch) + 16 * KIB)
    assert isinstance(outcome.error, MalformedFrameError)


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes(out + bytes((z,)))


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from(["length", "key", "value", "headers", "header_name"]),
    # Past any batch here, or negative (-1 is a null key or value: valid).
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 1_000_000, -2, -(2**31)])
    | st.integers(2**20, 2**63 - 1)
    | st.integers(-(2**63), -2),
    COMPRESSIONS,
)
def test_lying_record_lengths_fail_fast(field: str, lie: int, kind: CompressionType) -> None:
    """One record (no key, one header "h": "v") whose length, key, value, header count or
    header name length claims 2 GiB, 2**63 or a negative size."""
    value = b"x" * 10
    parts = {
        "attributes": b"\x00",
        "timestamp": zigzag(0),
        "offset": zigzag(0),
        "key": zigzag(-1),
        "value": zigzag(len(value)) + value,
        "headers": zigzag(1),
        "header_name": zigzag(1) + b"h",
        "header_value": zigzag(1) + b"v",
    }
    body = b"".join(parts.values())
    if field == "length":
        record = zigzag(lie) + body
    else:
        parts[field] = zigzag(lie) + (parts[field][1:] if field == "header_name" else b"")
        if field == "value":
            parts["value"] = zigzag(lie) + value
        body = b"".join(parts.values())
        record = zigzag(len(body)) + body
    header = (0, 0, -1, 2, 0, 0, 0, NOW, NOW, -1, -1, -1, 1)
    batch = rebatch(header, record, kind)
    outcome = bounded(lambda: decode(batch, 0, 64 * KIB), ProtocolError, 4 * len(batch) + FIXED)
    assert isinstance(outcome.error, MalformedFrameError)


# Batches of zero bytes, compressed: made here, as an example must not be charged with
# compressing 32 MiB.
BOMB_HEADER = (0, 0, -1, 2, 0, 0, 0, NOW, NOW, -1, -1, -1, 1)
BOMB_SIZES = [64 * KIB + 1, 4 * MIB, 32 * MIB]
BOMBS = {
    (kind, size): rebatch(BOMB_HEADER, bytes(size), kind)
    for kind in KINDS
    if kind.value
    for size in BOMB_SIZES
}


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from([k for k in KINDS if k.value]),
    st.sampled_from(BOMB_SIZES),
    st.sampled_from([1, 61, 64 * KIB]) | st.integers(1, 64 * KIB),
)
def test_compressed_bombs_stop_at_the_limit(kind: CompressionType, size: int, limit: int) -> None:
    batch = BOMBS[kind, size]
    outcome = bounded(
        lambda: decode(batch, 0, limit), ProtocolError, 4 * limit + 4 * len(batch) + FIXED
    )
    assert isinstance(outcome.error, ProtocolError)
