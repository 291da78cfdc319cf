"""Kafka codecs: the formats the Java client writes and reads, and bounded decompression."""

from __future__ import annotations

import gzip
import random
import struct
import sys
import time
import tracemalloc
import warnings
from collections.abc import Iterator

import cramjam
import lz4.frame
import pytest
import zstandard

from msgclient.errors import InvalidConfigurationError, ProtocolError
from msgclient.options import CompressionType
from protocols.kafkawire.compression import KAFKA_CODEC_IDS, get_kafka_codec

CODECS = list(KAFKA_CODEC_IDS)
COMPRESSED = [kind for kind in CODECS if kind is not CompressionType.NONE]


def _payload(size: int) -> bytes:
    # Half random, half repetitive: codecs both copy literals and find matches.
    rnd = random.Random(size)
    text = b"".join(b"record-%d;" % rnd.randrange(1000) for _ in range(size // 8 + 1))
    return (rnd.randbytes(size // 2) + text)[:size]


PAYLOADS = {"empty": b"", "small": b"hello kafka", "1MiB": _payload(1 << 20)}


@pytest.fixture
def fresh_codecs() -> Iterator[None]:
    get_kafka_codec.cache_clear()
    yield
    get_kafka_codec.cache_clear()


def test_codec_ids_are_kafkas() -> None:
    with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBase as Kafka

    assert KAFKA_CODEC_IDS == {
        CompressionType.NONE: Kafka.CODEC_NONE,
        CompressionType.GZIP: Kafka.CODEC_GZIP,
        CompressionType.SNAPPY: Kafka.CODEC_SNAPPY,
        CompressionType.LZ4: Kafka.CODEC_LZ4,
        CompressionType.ZSTD: Kafka.CODEC_ZSTD,
    }


@pytest.mark.parametrize("kind", CODECS)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(kind: CompressionType, name: str) -> None:
    codec = get_kafka_codec(kind)
    data = PAYLOADS[name]
    compressed = codec.compress(data)
    assert codec.decompress(compressed, len(data)) == data
    assert codec.decompress(memoryview(compressed), len(data) + 100) == data


@pytest.mark.parametrize("kind", COMPRESSED)
def test_one_byte_over_the_limit_is_refused(kind: CompressionType) -> None:
    codec = get_kafka_codec(kind)
    data = PAYLOADS["1MiB"]
    with pytest.raises(ProtocolError, match="more than"):
        codec.decompress(codec.compress(data), len(data) - 1)


def test_zlib_is_not_a_kafka_codec() -> None:
    with pytest.raises(InvalidConfigurationError, match="GZIP"):
        get_kafka_codec(CompressionType.ZLIB)


# -- the formats ---------------------------------------------------------------------------


def test_gzip_is_the_gzip_format_and_reads_concatenated_members() -> None:
    codec = get_kafka_codec(CompressionType.GZIP)
    data = PAYLOADS["1MiB"]
    compressed = codec.compress(data)
    assert compressed[:2] == b"\x1f\x8b"
    assert gzip.decompress(compressed) == data
    members = gzip.compress(b"first;") + gzip.compress(b"second")
    assert codec.decompress(members, 100) == b"first;second"


def test_snappy_writes_the_xerial_framing_of_the_java_client() -> None:
    codec = get_kafka_codec(CompressionType.SNAPPY)
    data = PAYLOADS["1MiB"]
    compressed = codec.compress(data)
    assert compressed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # [u32 length][raw snappy block] chunks of 32 KiB of input each
    position, blocks = 16, []
    while position < len(compressed):
        (size,) = struct.unpack_from(">I", compressed, position)
        blocks.append(
            bytes(cramjam.snappy.decompress_raw(compressed[position + 4 : position + 4 + size]))
        )
        position += 4 + size
    assert position == len(compressed)
    assert b"".join(blocks) == data
    assert {len(block) for block in blocks[:-1]} == {32 * 1024}


def test_snappy_reads_plain_raw_snappy_and_little_endian_xerial_versions() -> None:
    codec = get_kafka_codec(CompressionType.SNAPPY)
    data = PAYLOADS["1MiB"]
    assert codec.decompress(bytes(cramjam.snappy.compress_raw(data)), len(data)) == data
    block = bytes(cramjam.snappy.compress_raw(b"redpanda"))
    framed = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert codec.decompress(framed, 8) == b"redpanda"


def test_lz4_writes_the_frame_the_java_client_reads() -> None:
    codec = get_kafka_codec(CompressionType.LZ4)
    data = PAYLOADS["1MiB"]
    compressed = codec.compress(data)
    assert compressed[:4] == b"\x04\x22\x4d\x18"  # frame magic
    flags, block_descriptor = compressed[4], compressed[5]
    assert flags & 0x20  # independent blocks: Java rejects dependent ones
    assert not flags & 0x08  # no content size
    assert block_descriptor >> 4 == 4  # 64 KiB blocks
    assert lz4.frame.decompress(compressed) == data


def test_lz4_reads_linked_blocks_content_sizes_and_several_frames() -> None:
    codec = get_kafka_codec(CompressionType.LZ4)
    data = PAYLOADS["1MiB"]
    linked = lz4.frame.compress(data, block_linked=True, store_size=True, content_checksum=True)
    assert codec.decompress(linked, len(data)) == data
    two = lz4.frame.compress(b"one;") + lz4.frame.compress(b"two")
    assert codec.decompress(two, 100) == b"one;two"


def test_zstd_reads_frames_with_and_without_content_size_and_several_frames() -> None:
    codec = get_kafka_codec(CompressionType.ZSTD)
    data = PAYLOADS["1MiB"]
    compressed = codec.compress(data)
    assert zstandard.ZstdDecompressor().decompress(compressed) == data
    streamed = zstandard.ZstdCompressor().compressobj()
    unsized = streamed.compress(data) + streamed.flush()
    assert zstandard.frame_content_size(unsized) == -1
    assert codec.decompress(unsized, len(data)) == data
    compressor = zstandard.ZstdCompressor()
    assert codec.decompress(compressor.compress(b"one;") + compressor.compress(b"two"), 9) == (
        b"one;two"
    )


# -- hostile payloads ----------------------------------------------------------------------

_BOMB = 64 << 20  # 64 MiB of zeros: a few KiB compressed


def _bombs() -> dict[CompressionType, bytes]:
    zeros = bytes(_BOMB)
    sized_zstd = zstandard.ZstdCompressor(write_content_size=True).compress(zeros)
    return {
        CompressionType.GZIP: get_kafka_codec(CompressionType.GZIP).compress(zeros),
        # The frame says 64 MiB up front: a decoder trusting it allocates that.
        CompressionType.LZ4: lz4.frame.compress(zeros, store_size=True),
        CompressionType.ZSTD: sized_zstd,
        CompressionType.SNAPPY: get_kafka_codec(CompressionType.SNAPPY).compress(zeros),
    }


@pytest.fixture(scope="module")
def bombs() -> dict[CompressionType, bytes]:
    return _bombs()


@pytest.mark.parametrize("kind", COMPRESSED)
def test_a_bomb_stops_at_the_limit_without_allocating_it(
    kind: CompressionType, bombs: dict[CompressionType, bytes]
) -> None:
    codec = get_kafka_codec(kind)
    tracemalloc.start()
    started = time.thread_time()  # CPU time: a busy machine does not count
    try:
        with pytest.raises(ProtocolError, match="more than 1048576 bytes"):
            codec.decompress(bombs[kind], 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.thread_time() - started < 2
    assert peak < 8 << 20


def test_snappy_block_declaring_a_huge_size_is_refused_before_allocating() -> None:
    codec = get_kafka_codec(CompressionType.SNAPPY)
    lying = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # raw block: "4 GiB follow"
    with pytest.raises(ProtocolError, match="more than"):
        codec.decompress(lying, 1 << 20)
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(lying)) + lying
    with pytest.raises(ProtocolError, match="more than"):
        codec.decompress(framed, 1 << 20)


# Compressible records, and one block boundary of the xerial framing inside them.
CORRUPTIBLE = PAYLOADS["1MiB"][-100_000:]


def cuts(compressed: bytes) -> list[int]:
    """Every cut point of the first and last 300 bytes (headers, trailers, the first and
    last blocks), and every 97th in between."""
    end = len(compressed)
    return sorted({*range(300), *range(300, end - 300, 97), *range(max(end - 300, 0), end)})


def xerial_boundaries(compressed: bytes) -> set[int]:
    """Where the blocks of a xerial snappy stream end (16-byte header, then length + block)."""
    ends = {16}
    position = 16
    while position < len(compressed):
        position += 4 + int.from_bytes(compressed[position : position + 4], "big")
        ends.add(position)
    return ends


@pytest.mark.parametrize("kind", [CompressionType.GZIP, CompressionType.LZ4])
def test_a_truncated_payload_raises_protocol_error(kind: CompressionType) -> None:
    # Both formats mark their end (gzip's trailer, the LZ4 frame's end mark): every cut is
    # found, even one between two blocks.
    codec = get_kafka_codec(kind)
    compressed = codec.compress(CORRUPTIBLE)
    for cut in cuts(compressed):
        with pytest.raises(ProtocolError):
            codec.decompress(compressed[:cut], len(CORRUPTIBLE))


def test_a_truncated_snappy_payload_raises_unless_cut_between_blocks() -> None:
    # The xerial framing has no end mark: a cut after a whole block is a shorter stream,
    # which decodes to those blocks' records (the record parser then finds records missing).
    codec = get_kafka_codec(CompressionType.SNAPPY)
    compressed = codec.compress(CORRUPTIBLE)
    boundaries = xerial_boundaries(compressed)
    assert len(boundaries) > 3  # the payload spans several blocks
    for cut in sorted(set(cuts(compressed)) | boundaries - {len(compressed)}):
        if cut in boundaries:
            out = codec.decompress(compressed[:cut], len(CORRUPTIBLE))
            assert CORRUPTIBLE.startswith(out) and len(out) % (32 * 1024) == 0
        else:
            with pytest.raises(ProtocolError):
                codec.decompress(compressed[:cut], len(CORRUPTIBLE))


def test_a_truncated_zstd_payload_ends_early() -> None:
    # A stream reader, not a one-shot decompress (compression.py: the declared size is not
    # trusted): a cut frame just ends early, and the record parser finds records missing.
    codec = get_kafka_codec(CompressionType.ZSTD)
    compressed = codec.compress(CORRUPTIBLE)
    for cut in cuts(compressed):
        out = codec.decompress(compressed[:cut], len(CORRUPTIBLE))
        assert CORRUPTIBLE.startswith(out) and len(out) < len(CORRUPTIBLE)


def test_a_corrupt_gzip_payload_raises_protocol_error_or_decodes_unchanged() -> None:
    # gzip has a CRC-32 of the data: a flipped bit either breaks the stream or is caught by
    # the check, unless it changed nothing (a header field readers ignore, padding bits).
    codec = get_kafka_codec(CompressionType.GZIP)
    compressed = codec.compress(CORRUPTIBLE)
    rnd = random.Random(1)
    for position in [*range(64), *rnd.sample(range(64, len(compressed)), 500)]:
        mutated = bytearray(compressed)
        mutated[position] ^= 1 << rnd.randrange(8)
        try:
            out = codec.decompress(bytes(mutated), len(CORRUPTIBLE))
        except ProtocolError:
            continue
        assert out == CORRUPTIBLE, position


@pytest.mark.parametrize("kind", COMPRESSED)
def test_corrupt_payloads_fail_only_with_protocol_error_and_within_the_limit(
    kind: CompressionType,
) -> None:
    # LZ4 frames (as the Java client writes them), xerial snappy and zstd frames carry no
    # checksum of the data: a flipped literal decodes to other bytes, which no codec can
    # tell. What holds for every codec: no other exception, no more than the limit.
    codec = get_kafka_codec(kind)
    compressed = codec.compress(CORRUPTIBLE)
    rnd = random.Random(kind.value)
    outcomes = set()
    for _ in range(300):
        mutated = bytearray(compressed)
        for _ in range(rnd.randrange(1, 5)):
            mutated[rnd.randrange(len(mutated))] = rnd.randrange(256)
        try:
            out = codec.decompress(bytes(mutated), len(CORRUPTIBLE))
        except ProtocolError:
            outcomes.add("refused")
            continue
        outcomes.add("decoded")
        assert len(out) <= len(CORRUPTIBLE)
    assert "refused" in outcomes  # corruption of the framing is found


@pytest.mark.parametrize("kind", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_garbage_raises_protocol_error(kind: CompressionType) -> None:
    # Each of these formats starts with a magic number that random bytes do not have.
    codec = get_kafka_codec(kind)
    rnd = random.Random(kind.value)
    for size in range(1, 200):
        with pytest.raises(ProtocolError):
            codec.decompress(rnd.randbytes(size), 1 << 20)


def test_gzip_truncation_is_an_error() -> None:
    codec = get_kafka_codec(CompressionType.GZIP)
    compressed = codec.compress(PAYLOADS["1MiB"])
    with pytest.raises(ProtocolError, match="truncated"):
        codec.decompress(compressed[: len(compressed) // 2], 1 << 21)


def test_lz4_truncation_is_an_error() -> None:
    codec = get_kafka_codec(CompressionType.LZ4)
    compressed = codec.compress(PAYLOADS["1MiB"])
    with pytest.raises(ProtocolError, match="truncated"):
        codec.decompress(compressed[: len(compressed) // 2], 1 << 21)


# -- optional packages ---------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_codecs")
@pytest.mark.parametrize(
    ("kind", "module", "extra"),
    [
        (CompressionType.LZ4, "lz4.frame", "lz4"),
        (CompressionType.ZSTD, "zstandard", "zstd"),
        (CompressionType.SNAPPY, "cramjam", "snappy"),
    ],
)
def test_missing_package_names_the_extra(
    kind: CompressionType, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(InvalidConfigurationError, match=rf"pip install msgclient\[{extra}\]"):
        get_kafka_codec(kind)
    monkeypatch.undo()
    assert get_kafka_codec(kind).decompress(get_kafka_codec(kind).compress(b"x"), 1) == b"x"
