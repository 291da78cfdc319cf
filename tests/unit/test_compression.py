"""Codecs must produce and accept exactly the bytes the Pulsar Java and C++ clients do."""

from __future__ import annotations

import random
import re
import sys
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.block
import pytest
import zstandard

from msgclient.errors import InvalidConfigurationError, ProtocolError
from msgclient.options import CompressionType
from protocols.pulsarwire.compression import PULSAR_COMPRESSION_TYPES, get_codec

ALL = list(PULSAR_COMPRESSION_TYPES)
COMPRESSED = [kind for kind in ALL if kind is not CompressionType.NONE]


def _payload(size: int) -> bytes:
    # Half random, half repetitive, so that codecs both copy literals and find matches.
    rnd = random.Random(size)
    text = b"".join(b"message-%d;" % rnd.randrange(1000) for _ in range(size // 8 + 1))
    return (rnd.randbytes(size // 2) + text)[:size]


PAYLOADS = {"empty": b"", "small": b"hello pulsar", "1MiB": _payload(1 << 20)}


@pytest.fixture
def fresh_codecs() -> Iterator[None]:
    get_codec.cache_clear()
    yield
    get_codec.cache_clear()


def test_enum_values_are_the_protobuf_ones() -> None:
    # PulsarApi.proto: enum CompressionType { NONE = 0; LZ4 = 1; ZLIB = 2; ZSTD = 3; SNAPPY = 4; }
    assert {kind.name: kind.value for kind in PULSAR_COMPRESSION_TYPES} == {
        "NONE": 0,
        "LZ4": 1,
        "ZLIB": 2,
        "ZSTD": 3,
        "SNAPPY": 4,
    }


def test_gzip_is_kafka_only() -> None:
    with pytest.raises(InvalidConfigurationError, match="GZIP is invalid on Pulsar"):
        get_codec(CompressionType.GZIP)


def test_enum_values_match_the_official_client() -> None:
    official = pytest.importorskip("_pulsar").CompressionType
    for name, kind in [("NONE", "NONE"), ("LZ4", "LZ4"), ("ZLib", "ZLIB"), ("ZSTD", "ZSTD")]:
        assert int(getattr(official, name)) == CompressionType[kind].value
    assert int(official.SNAPPY) == CompressionType.SNAPPY.value


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(kind: CompressionType, name: str) -> None:
    data = PAYLOADS[name]
    codec = get_codec(kind)
    compressed = codec.compress(data)
    assert isinstance(compressed, bytes)
    if name == "1MiB" and kind is not CompressionType.NONE:
        assert len(compressed) < len(data)
    assert codec.decompress(compressed, len(data)) == data


@pytest.mark.parametrize("kind", ALL)
def test_accepts_bytearray_and_memoryview(kind: CompressionType) -> None:
    data = PAYLOADS["small"]
    codec = get_codec(kind)
    compressed = codec.compress(bytearray(data))
    assert codec.compress(memoryview(data)) == compressed
    assert codec.decompress(memoryview(compressed), len(data)) == data


def test_codecs_are_cached() -> None:
    assert get_codec(CompressionType.ZSTD) is get_codec(CompressionType.ZSTD)


def test_none_ignores_the_size() -> None:
    # Producers leave uncompressed_size at its default 0 on uncompressed messages.
    assert get_codec(CompressionType.NONE).decompress(b"abc", 0) == b"abc"


# -- formats, checked with other implementations and hand-made blocks ---------------------


def test_lz4_is_a_raw_block() -> None:
    data = PAYLOADS["1MiB"]
    compressed = get_codec(CompressionType.LZ4).compress(data)
    assert not compressed.startswith(b"\x04\x22\x4d\x18")  # no LZ4 frame magic
    assert lz4.block.decompress(compressed, uncompressed_size=len(data)) == data
    assert bytes(cramjam.lz4.decompress_block(compressed, output_len=len(data))) == data
    # By hand: token 0x30 = 3 literals and no match (a block's last sequence), then "abc".
    assert get_codec(CompressionType.LZ4).decompress(b"\x30abc", 3) == b"abc"


def test_zlib_is_a_zlib_stream() -> None:
    data = PAYLOADS["1MiB"]
    compressed = get_codec(CompressionType.ZLIB).compress(data)
    assert zlib.decompress(compressed) == data
    assert bytes(cramjam.zlib.decompress(compressed)) == data


def test_zlib_reads_the_java_clients_unfinished_stream() -> None:
    # The Java client deflates with SYNC_FLUSH and never calls finish(): no final block,
    # no Adler-32 trailer. zlib.decompress() rejects that; the codec must not.
    data = PAYLOADS["1MiB"]
    deflater = zlib.compressobj()
    java_style = deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)
    assert java_style.endswith(b"\x00\x00\xff\xff")
    with pytest.raises(zlib.error):
        zlib.decompress(java_style)
    assert get_codec(CompressionType.ZLIB).decompress(java_style, len(data)) == data


def test_zstd_is_a_frame_with_its_size() -> None:
    data = PAYLOADS["1MiB"]
    compressed = get_codec(CompressionType.ZSTD).compress(data)
    assert compressed.startswith(b"\x28\xb5\x2f\xfd")  # zstd frame magic
    assert zstandard.frame_content_size(compressed) == len(data)  # as ZSTD_compress writes
    assert bytes(cramjam.zstd.decompress(compressed)) == data


def test_zstd_reads_a_frame_without_its_size() -> None:
    data = PAYLOADS["1MiB"]
    sizeless = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert get_codec(CompressionType.ZSTD).decompress(sizeless, len(data)) == data


def test_snappy_is_a_raw_block() -> None:
    data = PAYLOADS["1MiB"]
    compressed = get_codec(CompressionType.SNAPPY).compress(data)
    assert not compressed.startswith(b"\xff\x06\x00\x00sNaPpY")  # no framing-format header
    assert compressed.startswith(b"\x80\x80\x40")  # varint of the length, 1 << 20
    # (No independent snappy decoder is installed: python-snappy wraps cramjam since 0.7.
    # The official client reading our SNAPPY batches is the cross-check, in tests/pulsar.)
    # By hand: varint length 3, then literal tag (3 - 1) << 2 = 0x08, then "abc".
    assert get_codec(CompressionType.SNAPPY).decompress(b"\x03\x08abc", 3) == b"abc"


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", COMPRESSED)
def test_corrupt_input_raises_protocol_error(kind: CompressionType) -> None:
    data = PAYLOADS["1MiB"]
    compressed = bytearray(get_codec(kind).compress(data))
    # Garble the body but keep the headers (zlib's, zstd's frame header, snappy's length).
    compressed[16 : len(compressed) // 2] = random.Random(1).randbytes(len(compressed) // 2 - 16)
    with pytest.raises(ProtocolError):
        get_codec(kind).decompress(bytes(compressed), len(data))


@pytest.mark.parametrize("kind", COMPRESSED)
def test_truncated_input_raises_protocol_error(kind: CompressionType) -> None:
    data = PAYLOADS["1MiB"]
    compressed = get_codec(kind).compress(data)
    with pytest.raises(ProtocolError):
        get_codec(kind).decompress(compressed[: len(compressed) // 2], len(data))


@pytest.mark.parametrize("kind", COMPRESSED)
@pytest.mark.parametrize("delta", [-1, 1])
def test_wrong_size_raises_protocol_error(kind: CompressionType, delta: int) -> None:
    data = PAYLOADS["small"]
    compressed = get_codec(kind).compress(data)
    with pytest.raises(ProtocolError):
        get_codec(kind).decompress(compressed, len(data) + delta)


@pytest.mark.usefixtures("fresh_codecs")
@pytest.mark.parametrize(
    ("kind", "modules", "extra"),
    [
        (CompressionType.LZ4, ["lz4", "lz4.block"], "msgclient[lz4]"),
        (CompressionType.ZSTD, ["zstandard"], "msgclient[zstd]"),
        (CompressionType.SNAPPY, ["cramjam"], "msgclient[snappy]"),
    ],
)
def test_missing_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, kind: CompressionType, modules: list[str], extra: str
) -> None:
    with monkeypatch.context() as patch:
        for name in modules:
            patch.setitem(sys.modules, name, None)  # makes "import name" fail
        with pytest.raises(InvalidConfigurationError, match=re.escape(f"pip install {extra}")):
            get_codec(kind)
    # The failure is not cached: with the package back, the codec loads.
    assert get_codec(kind).decompress(get_codec(kind).compress(b"x"), 1) == b"x"


def test_zstd_codec_is_thread_safe() -> None:
    codec = get_codec(CompressionType.ZSTD)
    inputs = [_payload(100_000 + i) for i in range(16)]

    def round_trip(data: bytes) -> bool:
        return codec.decompress(codec.compress(data), len(data)) == data

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(round_trip, inputs * 4))
