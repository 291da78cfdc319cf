"""Kafka codecs (protocols/kafkawire/compression.py): decompress(data, max_size).

Round trips under every codec (several frames or gzip members too); random, mutated and
bomb payloads give only ProtocolError, never more than ``max_size`` bytes out, in memory
bounded by it and the input.
"""

from __future__ import annotations

import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import ProtocolError
from msgclient.options import CompressionType
from protocols.kafkawire.compression import KAFKA_CODEC_IDS, get_kafka_codec
from tests.fuzz.strategies import (
    KIB,
    MIB,
    ZSTD_WINDOW_BOMB,
    bounded,
    examples,
    in_fresh_thread,
    mutated,
)

KINDS = st.sampled_from(list(KAFKA_CODEC_IDS))
COMPRESSING = st.sampled_from([k for k in KAFKA_CODEC_IDS if k.value])
LIMITS = st.sampled_from([0, 1, 100, 64 * KIB, 256 * KIB]) | st.integers(0, 256 * KIB)
FIXED = 256 * KIB  # codec state: zlib's window, zstd's and lz4's contexts


def compressible() -> st.SearchStrategy[bytes]:
    return st.binary(max_size=4096) | st.builds(
        lambda piece, times: piece * times, st.binary(min_size=1, max_size=16), st.integers(1, 500)
    )


def decompress_bounded(kind: CompressionType, data: bytes, limit: int) -> bytes | None:
    codec = get_kafka_codec(kind)
    outcome = bounded(
        lambda: codec.decompress(data, limit), ProtocolError, 4 * limit + 4 * len(data) + FIXED
    )
    if outcome.error is None:
        assert len(outcome.result) <= limit
    return outcome.result  # type: ignore[no-any-return]


@settings(max_examples=examples(0.2))
@given(KINDS, st.lists(compressible(), min_size=1, max_size=3))
def test_round_trip(kind: CompressionType, pieces: list[bytes]) -> None:
    """Each piece compressed on its own and concatenated (gzip members, lz4 and zstd
    frames, xerial blocks) reads back as their concatenation."""
    codec = get_kafka_codec(kind)
    data = b"".join(pieces)
    if kind in (CompressionType.SNAPPY, CompressionType.NONE):
        compressed = codec.compress(data)  # one xerial stream (its header comes once)
    else:
        compressed = b"".join(codec.compress(p) for p in pieces)
    assert codec.decompress(compressed, len(data)) == data
    if data:  # one byte less than the payload holds: refused
        assert decompress_bounded(kind, compressed, len(data) - 1) is None


@settings(max_examples=examples(0.25))
@given(KINDS, st.binary(max_size=4096), LIMITS)
@example(CompressionType.SNAPPY, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x7f\xff\xff\xff", 100)
@example(CompressionType.SNAPPY, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\xff\xff\xff\xff", 100)
def test_random_bytes_raise_only_protocol_errors(
    kind: CompressionType, data: bytes, limit: int
) -> None:
    decompress_bounded(kind, data, limit)


def size_fields(kind: CompressionType, data: bytes) -> list[tuple[int, int]]:
    """xerial block lengths; lz4 and zstd sizes are found by the random offsets."""
    if kind is not CompressionType.SNAPPY:
        return []
    fields, pos = [], 16
    while pos + 4 <= len(data):
        fields.append((pos, 4))
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
    return fields


@settings(max_examples=examples(0.35))
@given(COMPRESSING, compressible(), LIMITS, st.data())
def test_mutated_payloads_raise_only_protocol_errors(
    kind: CompressionType, original: bytes, limit: int, data: st.DataObject
) -> None:
    valid = get_kafka_codec(kind).compress(original)
    decompress_bounded(kind, data.draw(mutated(valid, size_fields(kind, valid))), limit)


# Zero bytes, compressed (made here: an example must not be charged with compressing them).
BOMB_SIZES = [256 * KIB + 1, 4 * MIB, 32 * MIB]
BOMBS = {
    (kind, size): get_kafka_codec(kind).compress(bytes(size))
    for kind in KAFKA_CODEC_IDS
    if kind.value
    for size in BOMB_SIZES
}


@settings(max_examples=examples(0.2))
@given(COMPRESSING, st.sampled_from(BOMB_SIZES), LIMITS)
def test_bombs_stop_at_the_limit(kind: CompressionType, size: int, limit: int) -> None:
    assert decompress_bounded(kind, BOMBS[kind, size], limit) is None


# -- bugs found ----------------------------------------------------------------------------


def test_a_zstd_frame_cannot_reserve_more_than_a_small_multiple_of_max_size() -> None:
    """With max_size 64 KiB, the 2**27-byte window the frame declares used to be allocated
    anyway (C memory: tracemalloc does not see it); the window is now capped at 8 MiB, so
    with 32 MiB to spare the frame is a typed error, not an allocation failure in zstd."""
    codec = get_kafka_codec(CompressionType.ZSTD)
    _, error = in_fresh_thread(
        lambda: codec.decompress(ZSTD_WINDOW_BOMB, 64 * KIB), ceiling=32 * MIB
    )
    assert isinstance(error, ProtocolError), error
    assert "Allocation error" not in str(error) and "ZSTD" in str(error), error
