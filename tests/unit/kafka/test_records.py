"""RecordBatch v2: round trips, interop both ways with kafka-python, and hostile bytes."""

from __future__ import annotations

import asyncio
import random
import struct
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import cramjam
import google_crc32c
import pytest

from msgclient.errors import (
    ChecksumMismatchError,
    InvalidConfigurationError,
    MalformedFrameError,
    MessageEncodingError,
    ProtocolError,
)
from msgclient.message import Message, OutgoingMessage
from msgclient.options import CompressionType
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.records import (
    decode_record_batches,
    encode_record_batch,
    with_producer_state,
)
from protocols.kafkawire.records.run import RecordRun

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

NONE, GZIP, SNAPPY, LZ4, ZSTD = (
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
)
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
CODEC_IDS = {NONE: 0, GZIP: 1, SNAPPY: 2, LZ4: 3, ZSTD: 4}
NOW = 1_700_000_000_000
LIMIT = 64 << 20
TOPIC, PARTITION = "orders", 3
HEADER = struct.Struct(">qiibIhiqqqhii")

_LOOP = asyncio.new_event_loop()  # the futures are never awaited; they need a loop to belong to
_LOOP.close()


def out(
    value: bytes = b"v",
    key: str | bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timestamp: int | None = None,
) -> OutgoingMessage:
    return OutgoingMessage(
        value,
        _LOOP.create_future(),
        partition_key=key,
        properties=headers,
        event_timestamp=timestamp,
    )


def encode(
    messages: Sequence[OutgoingMessage], compression: CompressionType = NONE, **kw: int
) -> bytes:
    return encode_record_batch(messages, compression=compression, now_ms=NOW, **kw)


def decode(
    data: bytes | memoryview, fetch_offset: int = 0, limit: int = LIMIT
) -> tuple[list[Message], int]:
    runs, next_offset = decode_record_batches(
        data, TOPIC, PARTITION, fetch_offset, max_uncompressed_bytes=limit
    )
    return [message for run in runs for message in run], next_offset


def at_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch as a broker serves it: baseOffset assigned (it is outside the CRC)."""
    return struct.pack(">q", base_offset) + batch[8:]


def with_crc(batch: bytes | bytearray) -> bytes:
    batch = bytes(batch)
    return batch[:17] + struct.pack(">I", google_crc32c.value(batch[21:])) + batch[21:]


def patched(batch: bytes, field: int, value: int) -> bytes:
    """The batch with one header field (index in HEADER) changed and its CRC fixed."""
    fields = list(HEADER.unpack_from(batch))
    fields[field] = value
    return with_crc(HEADER.pack(*fields) + batch[HEADER.size :])


ATTRIBUTES, LAST_DELTA, MAX_TIMESTAMP, COUNT = 5, 6, 8, 12


def zz(n: int) -> bytes:
    """A zigzag varint, written independently of the code under test."""
    z = (n << 1) ^ (n >> 63)
    varint = bytearray()
    while z >= 0x80:
        varint.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes(varint + bytes((z,)))


def raw_record(
    offset_delta: int,
    value: bytes | None = b"v",
    key: bytes | None = None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    timestamp_delta: int = 0,
) -> bytes:
    body = b"\x00" + zz(timestamp_delta) + zz(offset_delta)
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += zz(len(headers))
    for name, text in headers:
        body += zz(len(name)) + name + (zz(-1) if text is None else zz(len(text)) + text)
    return zz(len(body)) + body


def raw_batch(
    records: bytes, count: int, *, attributes: int = 0, last_delta: int | None = None
) -> bytes:
    """A batch around hand-made records bytes, its CRC right whatever the records say."""
    last = count - 1 if last_delta is None else last_delta
    head = HEADER.pack(
        0, HEADER.size - 12 + len(records), -1, 2, 0, attributes, last, NOW, NOW, -1, -1, -1, count
    )
    return with_crc(head + records)


def assert_message(
    message: Message,
    offset: int,
    value: bytes | None,
    key: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timestamp: int = NOW,
    sequence: int = -1,
) -> None:
    assert message.value() == value
    assert message.has_null_value() == (value is None)
    assert message.data() == (value or b"")
    assert message.message_id() == KafkaMessageId(TOPIC, PARTITION, offset)
    assert message.topic_name() == f"{TOPIC}-{PARTITION}"  # the partition's name, as on Pulsar
    assert message.key_bytes() == key
    assert message.properties() == dict(headers or {})
    assert message.event_timestamp() == message.publish_timestamp() == timestamp
    assert message.sequence_id() == sequence
    assert message.redelivery_count() == 0
    assert message.producer_name() == ""
    assert message.ordering_key() is None


def offset(message: Message) -> int:
    message_id = message.message_id()
    assert isinstance(message_id, KafkaMessageId)
    return message_id.offset


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-snappy for kafka-python's codec module, made of cramjam (not installed here)."""

    class Snappy:
        @staticmethod
        def compress(data: bytes) -> bytes:
            return bytes(cramjam.snappy.compress_raw(data))

        @staticmethod
        def decompress(data: bytes) -> bytes:
            return bytes(cramjam.snappy.decompress_raw(data))

    monkeypatch.setattr(kafka.codec, "snappy", Snappy)


# -- round trips ---------------------------------------------------------------------------

VARIED = [
    out(b"plain"),
    out(b"str key", key="clé"),
    out(b"bytes key", key=b"\xff\x00not utf-8"),
    out(b"empty key", key=b""),
    out(b"headers", headers={"trace": "abc", "ünïcode": "välue", "raw": "\udcff\udc80"}),
    out(b"", key="empty value"),
    out(b"early", timestamp=NOW - 5_000),
    out(b"late", key="k", headers={"h": ""}, timestamp=NOW + 70_000),
    out(b"plain again"),
]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_keys_headers_and_timestamps(codec: CompressionType) -> None:
    messages, next_offset = decode(at_offset(encode(VARIED, codec), 100))
    assert next_offset == 100 + len(VARIED)
    assert len(messages) == len(VARIED)
    for i, (message, sent) in enumerate(zip(messages, VARIED, strict=True)):
        key = sent.partition_key
        assert_message(
            message,
            100 + i,
            sent.value,
            key.encode("utf-8", "surrogateescape") if isinstance(key, str) else key,
            sent.properties,
            NOW if sent.event_timestamp is None else sent.event_timestamp,
        )
    assert messages[1].partition_key() == "clé"
    assert messages[4].properties()["raw"] == "\udcff\udc80"  # undecodable bytes come back


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_empty_and_one_mebibyte_values(codec: CompressionType) -> None:
    big = random.Random(1).randbytes(1 << 19) + b"kafka" * (1 << 17)
    values = [b"", big, b"", b"x"]
    messages, _ = decode(encode([out(v) for v in values], codec))
    assert [m.value() for m in messages] == values


def test_header_fields() -> None:
    batch = encode(
        [out(b"a", timestamp=NOW - 10), out(b"b"), out(b"c", timestamp=NOW + 99)],
        LZ4,
        producer_id=77,
        producer_epoch=3,
        base_sequence=41,
    )
    fields = HEADER.unpack_from(batch)
    # baseOffset, batchLength, partitionLeaderEpoch, magic
    assert fields[:4] == (0, len(batch) - 12, -1, 2)
    assert fields[4] == google_crc32c.value(batch[21:])
    assert fields[ATTRIBUTES] == CODEC_IDS[LZ4]  # CreateTime, not transactional, not control
    assert (fields[LAST_DELTA], fields[COUNT]) == (2, 3)
    assert fields[7:9] == (NOW - 10, NOW + 99)  # base and max timestamps
    assert fields[9:12] == (77, 3, 41)  # producer id, epoch, base sequence


def test_sequence_numbers_follow_the_base_sequence_and_wrap() -> None:
    batch = encode(
        [out(b"a"), out(b"b"), out(b"c")], producer_id=5, producer_epoch=0, base_sequence=9
    )
    assert [m.sequence_id() for m in decode(batch)[0]] == [9, 10, 11]
    batch = with_producer_state(batch, 5, 0, 2**31 - 2)
    assert [m.sequence_id() for m in decode(batch)[0]] == [2**31 - 2, 2**31 - 1, 0]


def test_more_records_than_two_byte_offset_deltas() -> None:
    values = [b"%d" % i for i in range(9000)]
    messages, next_offset = decode(at_offset(encode([out(v) for v in values]), 5))
    assert [m.value() for m in messages] == values
    assert messages[-1].message_id() == KafkaMessageId(TOPIC, PARTITION, 9004)
    assert next_offset == 9005


def test_a_batch_of_equal_size_values_is_read_as_runs_of_columns() -> None:
    # (Runs shorter than 16 records are read record by record: test_runs_of_plain_records.)
    # Offset deltas of one, two and three bytes (from 64 and from 8192 on): one run each;
    # timestamps that differ within a run (a producer's batch spans milliseconds).
    count = 9000
    records = b"".join(raw_record(i, b"%06d" % i, timestamp_delta=i // 1000) for i in range(count))
    batch = at_offset(raw_batch(records, count), 100)
    runs, next_offset = decode_record_batches(
        batch, TOPIC, PARTITION, 100, max_uncompressed_bytes=LIMIT
    )
    assert [type(run) for run in runs] == [RecordRun] * 3
    assert [(r.first_offset, len(r)) for r in runs] == [(100, 64), (164, 8128), (8292, 808)]
    run = runs[1]
    assert run.values(0, 2) == [b"000064", b"000065"]
    assert run.event_timestamps(935, 937) == [NOW, NOW + 1]  # offsets 999 and 1000
    assert run.publish_timestamps(935, 937) == [NOW, NOW + 1]
    assert run.key_bytes(0, 2) == run.properties(0, 2) == [None, None]
    assert run.message_ids(0, 1) == [KafkaMessageId(TOPIC, PARTITION, 164)]
    assert run.topic_name() == f"{TOPIC}-{PARTITION}"
    for message, i in zip([m for r in runs for m in r], range(count), strict=True):
        assert_message(message, 100 + i, b"%06d" % i, timestamp=NOW + i // 1000)
    assert next_offset == 100 + count


def test_parts_of_a_run_hold_its_messages() -> None:
    sent = [out(b"%03d" % i) for i in range(20)]
    [run], _ = decode_record_batches(
        at_offset(encode(sent, base_sequence=2**31 - 3), 50),
        TOPIC, PARTITION, 50, max_uncompressed_bytes=LIMIT,
    )  # fmt: skip
    assert isinstance(run, RecordRun)
    head, rest = run.part(0, 4), run.part(4, 20)
    assert (head.first_offset, len(head), rest.first_offset, len(rest)) == (50, 4, 54, 16)
    for i, message in enumerate([*head, *rest]):
        assert_message(message, 50 + i, b"%03d" % i, sequence=(2**31 - 3 + i) & 0x7FFFFFFF)


def test_memoryview_input() -> None:
    batch = encode([out(b"a"), out(b"b")])
    assert [m.value() for m in decode(memoryview(batch))[0]] == [b"a", b"b"]


def test_zlib_is_refused_with_a_pointer_to_gzip() -> None:
    with pytest.raises(InvalidConfigurationError, match="use GZIP on Kafka"):
        encode([out()], CompressionType.ZLIB)


def test_an_empty_batch_cannot_be_encoded() -> None:
    with pytest.raises(MessageEncodingError):
        encode([])


def test_an_unencodable_key_is_an_encoding_error() -> None:
    with pytest.raises(MessageEncodingError):
        encode([out(key="\ud800")])  # a lone surrogate that surrogateescape cannot write


# -- fetch responses -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_fetch_offset_in_the_middle_of_a_batch(codec: CompressionType) -> None:
    batch = at_offset(encode([out(b"%d" % i) for i in range(10)], codec), 50)
    messages, next_offset = decode(batch, fetch_offset=56)
    assert [m.value() for m in messages] == [b"6", b"7", b"8", b"9"]
    assert messages[0].message_id() == KafkaMessageId(TOPIC, PARTITION, 56)
    assert next_offset == 60


def test_a_batch_before_the_fetch_offset_yields_nothing() -> None:
    batch = at_offset(encode([out(), out()]), 50)
    assert decode(batch, fetch_offset=52) == ([], 52)
    assert decode(batch, fetch_offset=70) == ([], 70)


def test_several_batches_concatenated() -> None:
    data = (
        at_offset(encode([out(b"a"), out(b"b", key="k")], GZIP), 0)
        + at_offset(encode([out(b"c")]), 2)
        + at_offset(encode([out(b"d"), out(b"e")], ZSTD), 10)  # compaction left a gap
    )
    messages, next_offset = decode(data, fetch_offset=1)
    assert [(offset(m), m.value()) for m in messages] == [
        (1, b"b"),
        (2, b"c"),
        (10, b"d"),
        (11, b"e"),
    ]
    assert next_offset == 12


def test_no_data_and_short_data() -> None:
    assert decode(b"", fetch_offset=7) == ([], 7)
    assert decode(b"\x00" * 11, fetch_offset=7) == ([], 7)


def test_a_truncated_trailing_batch_is_left_for_the_next_fetch() -> None:
    first = at_offset(encode([out(b"a"), out(b"b")]), 0)
    second = at_offset(encode([out(b"c" * 50), out(b"d")], SNAPPY), 2)
    for cut in range(len(second)):
        messages, next_offset = decode(first + second[:cut])
        assert [m.value() for m in messages] == [b"a", b"b"]
        assert next_offset == 2
    assert decode(first + second)[1] == 4


def test_a_control_batch_yields_no_message_but_advances_the_offset() -> None:
    # A transaction commit marker: key (version 0, type 1), value (version 0, epoch 0).
    marker = encode([out(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01")])
    control = patched(at_offset(marker, 9), ATTRIBUTES, 0x30)  # control, transactional
    data = at_offset(encode([out(b"a")]), 8) + control + at_offset(encode([out(b"b")]), 10)
    messages, next_offset = decode(data)
    assert [m.value() for m in messages] == [b"a", b"b"]
    assert next_offset == 11
    assert decode(control) == ([], 10)


def test_log_append_time_stamps_every_record_with_the_max_timestamp() -> None:
    batch = encode([out(b"a", timestamp=1), out(b"b"), out(b"c", key="k")])
    batch = patched(patched(batch, MAX_TIMESTAMP, NOW + 123), ATTRIBUTES, 0x08)
    assert {m.event_timestamp() for m in decode(batch)[0]} == {NOW + 123}


def test_tombstones_decode_to_null_values_and_null_header_values_to_empty() -> None:
    records = (
        raw_record(0, value=None)
        + raw_record(1, headers=[(b"h", None)])
        + raw_record(2, value=None)
    )
    messages, _ = decode(raw_batch(records, 3))
    assert [m.value() for m in messages] == [None, b"v", None]
    assert [m.has_null_value() for m in messages] == [True, False, True]
    assert [m.data() for m in messages] == [b"", b"v", b""]
    assert messages[1].properties() == {"h": ""}


def test_runs_of_plain_records_with_gaps_and_interruptions() -> None:
    # The decoder's shortcut for runs of alike records must give way at every difference.
    records = b"".join(
        [
            raw_record(0, b"aaaa"),
            raw_record(1, b"bbbb"),
            raw_record(3, b"cccc"),  # offset gap
            raw_record(4, b"dddd", timestamp_delta=1),  # other timestamp
            raw_record(5, b"eeee", timestamp_delta=1),
            raw_record(6, b"ffff", key=b"k"),
            raw_record(7, b"gggg", timestamp_delta=1),
            raw_record(8, None, timestamp_delta=1),  # tombstone: same length as "gg"
            raw_record(9, b"hh", headers=[]),
            raw_record(10, b"", headers=[(b"", b"")]),  # same length, with a header
            raw_record(11, b"iiii", timestamp_delta=1),
            raw_record(300, b"jjjj", timestamp_delta=1),  # wider offset delta
            raw_record(301, b"kkkk", timestamp_delta=1),
        ]
    )
    messages, next_offset = decode(raw_batch(records, 13, last_delta=301))
    summary = [
        (offset(m), m.value(), m.key_bytes(), m.properties(), m.event_timestamp()) for m in messages
    ]
    assert summary == [
        (0, b"aaaa", None, {}, NOW),
        (1, b"bbbb", None, {}, NOW),
        (3, b"cccc", None, {}, NOW),
        (4, b"dddd", None, {}, NOW + 1),
        (5, b"eeee", None, {}, NOW + 1),
        (6, b"ffff", b"k", {}, NOW),
        (7, b"gggg", None, {}, NOW + 1),
        (8, None, None, {}, NOW + 1),
        (9, b"hh", None, {}, NOW),
        (10, b"", None, {"": ""}, NOW),
        (11, b"iiii", None, {}, NOW + 1),
        (300, b"jjjj", None, {}, NOW + 1),
        (301, b"kkkk", None, {}, NOW + 1),
    ]
    assert next_offset == 302


# -- producer state ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_with_producer_state_is_the_batch_encoded_with_that_state(codec: CompressionType) -> None:
    messages = [out(b"a"), out(b"b", key="k", headers={"h": "v"})]
    batch = encode(messages, codec)
    replaced = with_producer_state(batch, 1234, 5, 678)
    assert replaced == encode(
        messages, codec, producer_id=1234, producer_epoch=5, base_sequence=678
    )
    assert HEADER.unpack_from(replaced)[9:12] == (1234, 5, 678)
    assert struct.unpack_from(">I", replaced, 17)[0] == google_crc32c.value(replaced[21:])
    assert [m.sequence_id() for m in decode(replaced)[0]] == [678, 679]


def test_with_producer_state_refuses_what_is_not_a_batch() -> None:
    with pytest.raises(MalformedFrameError):
        with_producer_state(b"short", 1, 1, 1)


# -- interop with kafka-python -------------------------------------------------------------


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_what_we_write(codec: CompressionType) -> None:
    sent = [*VARIED, *(out(b"compressible %d " % i * 20) for i in range(50))]
    batch = encode(sent, codec, producer_id=99, producer_epoch=4, base_sequence=1000)
    records = MemoryRecords(at_offset(batch, 500))
    kafka_batch: Any = records.next_batch()
    assert records.next_batch() is None
    assert isinstance(kafka_batch, DefaultRecordBatch)
    assert kafka_batch.validate_crc()
    assert kafka_batch.compression_type == CODEC_IDS[codec]
    assert (kafka_batch.producer_id, kafka_batch.producer_epoch) == (99, 4)
    assert kafka_batch.base_sequence == 1000
    assert kafka_batch.last_offset == 500 + len(sent) - 1
    assert kafka_batch.max_timestamp == NOW + 70_000
    for i, (record, message) in enumerate(zip(kafka_batch, sent, strict=True)):
        key = message.partition_key
        assert record.offset == 500 + i
        assert record.value == message.value
        assert record.key == (key.encode() if isinstance(key, str) else key)
        assert record.timestamp == (message.event_timestamp or NOW)
        assert record.headers == [
            (name, text.encode("utf-8", "surrogateescape"))
            for name, text in (message.properties or {}).items()
        ]


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize("codec", CODECS)
def test_we_read_what_kafka_python_writes(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_IDS[codec],
        is_transactional=False,
        producer_id=31,
        producer_epoch=2,
        base_sequence=7,
        batch_size=1 << 30,
    )
    written: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (0, NOW, None, b"plain", []),
        (1, NOW + 3, b"key", b"keyed", []),
        (2, NOW - 2, None, None, []),  # tombstone
        (3, NOW, b"k", b"with headers", [("a", b"1"), ("b", None), ("é", b"\xff")]),
        (7, NOW + 1, None, b"after a gap", []),
        *((8 + i, NOW + 1, None, b"compressible %d " % i * 20, []) for i in range(40)),
    ]
    for offset, timestamp, key, value, headers in written:
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    data = at_offset(bytes(builder.build()), 1000)
    assert HEADER.unpack_from(data)[ATTRIBUTES] == CODEC_IDS[codec]  # really compressed
    messages, next_offset = decode(data, fetch_offset=1001)
    assert next_offset == 1000 + 47 + 1
    assert len(messages) == len(written) - 1
    for message, (offset, timestamp, key, value, headers) in zip(
        messages, written[1:], strict=True
    ):
        assert_message(
            message,
            1000 + offset,
            value,
            key,
            {name: (text or b"").decode("utf-8", "surrogateescape") for name, text in headers}
            or None,
            timestamp,
            sequence=7 + offset,
        )


# -- hostile bytes -------------------------------------------------------------------------


def test_a_bad_crc_is_a_checksum_mismatch() -> None:
    batch = bytearray(encode([out(b"payload")]))
    batch[-3] ^= 0x01
    with pytest.raises(ChecksumMismatchError, match="CRC-32C"):
        decode(bytes(batch))
    batch = bytearray(encode([out(b"payload")]))
    batch[12] ^= 0xFF  # partitionLeaderEpoch is outside the CRC: brokers set it
    assert [m.value() for m in decode(bytes(batch))[0]] == [b"payload"]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_format_is_refused_by_name(magic: int) -> None:
    batch = bytearray(encode([out()]))
    batch[16] = magic
    with pytest.raises(
        MalformedFrameError, match="legacy message format, magic 0 and 1, is not supported"
    ):
        decode(bytes(batch))


def test_unknown_magic_and_codec() -> None:
    batch = bytearray(encode([out()]))
    batch[16] = 3
    with pytest.raises(MalformedFrameError, match="magic 3"):
        decode(bytes(batch))
    with pytest.raises(MalformedFrameError, match="codec id 5"):
        decode(patched(encode([out()]), ATTRIBUTES, 5))


def test_batch_lengths_that_lie() -> None:
    batch = encode([out()])
    with pytest.raises(MalformedFrameError, match="less than its header"):
        decode(batch[:8] + struct.pack(">i", 20) + batch[12:])
    with pytest.raises(MalformedFrameError, match="less than its header"):
        decode(batch[:8] + struct.pack(">i", -1) + batch[12:])
    with pytest.raises(MalformedFrameError, match="negative last offset delta"):
        decode(patched(batch, LAST_DELTA, -5))


def test_record_counts_that_lie_fail_fast() -> None:
    batch = encode([out(b"x")])
    started = time.thread_time()  # CPU time: a busy machine does not count
    for count in (1_000_000, 2**31 - 1, -1):
        with pytest.raises(MalformedFrameError, match="records cannot fit"):
            decode(patched(batch, COUNT, count))
    assert time.thread_time() - started < 0.5
    two = encode([out(b"x"), out(b"y")])
    with pytest.raises(MalformedFrameError, match="bytes follow"):
        decode(patched(two, COUNT, 1))
    with pytest.raises(MalformedFrameError, match="past the end"):
        decode(patched(encode([out(b"x" * 20), out(b"y" * 20)]), COUNT, 3))


def test_a_compressed_count_that_lies_fails_after_bounded_decompression() -> None:
    batch = encode([out(b"x")], GZIP)
    with pytest.raises(MalformedFrameError, match="records cannot fit"):
        decode(patched(batch, COUNT, 1_000_000))


@pytest.mark.parametrize(
    ("records", "count", "error"),
    [
        (zz(-5) + raw_record(0)[1:], 1, "record length -5"),
        (zz(500) + raw_record(0)[1:], 1, "record length 500 overruns"),
        (zz(8) + raw_record(0)[1:] + b"\x00", 1, "fields end at"),  # one byte too long
        (raw_record(0)[:-1] + raw_record(1), 2, "header count 7"),  # reads into the next
        (raw_record(-1), 1, "offset delta -1"),
        (zz(6) + b"\x00\x00\x00" + zz(-2) + b"\x00\x00", 1, "key length -2"),
        (zz(6) + b"\x00\x00\x00\x01" + zz(-4) + b"\x00", 1, "value length -4"),
        (zz(7) + b"\x00\x00\x00" + zz(60) + b"\x01\x00\x00", 1, "fields end at|past the end"),
        (zz(6) + b"\x00\x00\x00\x01" + zz(90) + b"\x00", 1, "fields end at|past the end"),
        (zz(8) + b"\x00\x00\x00\x01\x00" + zz(1_000_000) + b"\x00", 1, "header count 1000000"),
        (zz(8) + b"\x00\x00\x00\x01\x00" + zz(-1) + b"\x00\x00", 1, "header count -1"),
        (zz(8) + b"\x00\x00\x00\x01\x00\x02" + zz(-2) + b"\x00", 1, "header name length -2"),
        (zz(8) + b"\x00\x00\x00\x01\x00\x02" + zz(40) + b"\x00", 1, "header name length 40"),
        (zz(8) + b"\x00\x00\x00\x01\x00\x02\x00" + zz(-9), 1, "header value length -9"),
        (zz(8) + b"\x00\x00\x00\x01\x00\x02\x00" + zz(30), 1, "header value length 30"),
        (zz(16) + b"\x00" + b"\xff" * 11 + b"\x00\x01\x01\x00", 1, "runs over 10 bytes"),
        (raw_record(0) + b"\x00", 1, "1 bytes follow"),
        (raw_record(0) + raw_record(1)[:-2], 2, "past the end|overruns"),
    ],
)
def test_records_that_lie(records: bytes, count: int, error: str) -> None:
    with pytest.raises(MalformedFrameError, match=error):
        decode(raw_batch(records, count))


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompression_is_bounded(codec: CompressionType) -> None:
    batch = encode([out(bytes(1 << 20)) for _ in range(8)], codec)  # 8 MiB, a few KiB packed
    started = time.thread_time()  # CPU time: a busy machine does not count
    with pytest.raises(ProtocolError, match="more than 1048576 bytes"):
        decode(batch, limit=1 << 20)
    assert time.thread_time() - started < 2
    assert len(decode(batch, limit=(8 << 20) + 1000)[0]) == 8


def test_a_truncated_zstd_payload_is_malformed() -> None:
    # zstd streams carry no end marker we check: the missing records give it away.
    from protocols.kafkawire.compression import get_kafka_codec

    codec = get_kafka_codec(ZSTD)
    whole = encode([out(random.Random(2).randbytes(200)) for _ in range(50)])
    packed = codec.compress(whole[61:])
    with pytest.raises(MalformedFrameError):
        decode(raw_batch(packed[: len(packed) // 2], 50, attributes=CODEC_IDS[ZSTD]))


def _mutations(seed: int) -> Iterator[bytes]:
    rnd = random.Random(seed)
    sources = [
        encode([out(b"%d" % i) for i in range(20)]),
        encode(VARIED),
        encode(VARIED, GZIP),
        encode([out(b"x" * 300, key="k") for _ in range(5)], SNAPPY),
        encode(VARIED, LZ4),
        encode(VARIED, ZSTD),
        encode(VARIED) + encode([out(b"second")]),
    ]
    for i in range(400):
        data = bytearray(rnd.choice(sources))
        for _ in range(rnd.randrange(1, 4)):
            choice = rnd.randrange(4)
            position = rnd.randrange(len(data))
            if choice == 0:
                data[position] = rnd.randrange(256)
            elif choice == 1:
                del data[position : position + rnd.randrange(1, 8)]
            elif choice == 2:
                data[position:position] = rnd.randbytes(rnd.randrange(1, 8))
            else:
                data[position] ^= 1 << rnd.randrange(8)
        if i % 4:  # most with the CRC made right, so that the structure gets parsed
            data = bytearray(with_crc(data)) if len(data) >= 21 else data
        yield bytes(data)


def test_random_mutations_raise_only_protocol_errors() -> None:
    outcomes = {"decoded": 0, "refused": 0}
    for data in _mutations(seed=20240601):
        try:
            decode(data, limit=1 << 20)
        except ProtocolError:
            outcomes["refused"] += 1
        else:
            outcomes["decoded"] += 1
    assert outcomes["refused"] > 100 and outcomes["decoded"] > 10, outcomes
