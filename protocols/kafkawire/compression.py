"""Kafka's compression codecs, as the Java client writes and reads them.

A compressed RecordBatch carries no uncompressed size, so ``decompress`` takes a ceiling
instead and stops as soon as the output passes it, whatever sizes the payload declares:
a forged payload costs about ``max_size`` bytes, never what it claims. Formats: GZIP is
the gzip format, SNAPPY the xerial framing of the Java client (plain raw snappy, as other
clients may write, is read too), LZ4 the standard LZ4 frame with independent blocks, ZSTD
a zstd frame.

The LZ4, zstd and Snappy libraries are optional; each is imported the first time its codec
is asked for, and a missing one raises ``InvalidConfigurationError`` naming the pip extra.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable
from typing import Any, Protocol

from msgclient.errors import ProtocolError
from msgclient.options import CompressionType
from protocols.codecs import (
    BytesLike,
    SnappyBlocks,
    Zstd,
    codec_factory,
    corrupt_payload,
    load_package,
)

__all__ = ["KAFKA_CODEC_IDS", "KafkaCodec", "get_kafka_codec"]

# The codec id in bits 0-2 of a RecordBatch's attributes.
KAFKA_CODEC_IDS: dict[CompressionType, int] = {
    CompressionType.NONE: 0,
    CompressionType.GZIP: 1,
    CompressionType.SNAPPY: 2,
    CompressionType.LZ4: 3,
    CompressionType.ZSTD: 4,
}

# Output is produced at most this much at a time: lz4 and zstandard allocate the whole
# max_length they are given up front, so asking for max_size at once would cost a large
# allocation per small batch.
_CHUNK = 1 << 20


class KafkaCodec(Protocol):
    """Compresses the records of a batch, and restores them up to a size limit.

    Instances are shared and safe to call from several threads at once.
    """

    def compress(self, data: BytesLike) -> bytes: ...

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        """Raise ``ProtocolError`` if ``data`` cannot be decompressed or would decompress
        to more than ``max_size`` bytes. Formats without a checksum of their own (LZ4 as
        the Java client writes it, xerial Snappy, zstd) may turn damaged input into other
        bytes, and a cut zstd frame into a prefix: the batch's CRC-32C, checked before
        decompressing, is what catches damage (the record parser then finds a short
        batch)."""


@functools.cache
def get_kafka_codec(kind: CompressionType) -> KafkaCodec:
    """The shared Kafka codec for ``kind``; raises ``InvalidConfigurationError`` if its
    package is missing (that failure is not cached, so installing the package is enough)
    or if Kafka has no such codec (ZLIB).
    """
    return codec_factory(_CODECS, kind, "Kafka (use GZIP on Kafka)")()


def _too_big(name: str, max_size: int) -> ProtocolError:
    return ProtocolError(f"{name} payload decompresses to more than {max_size} bytes")


class _NoneCodec:
    __slots__ = ()

    def compress(self, data: BytesLike) -> bytes:
        return bytes(data)

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        if len(data) > max_size:
            raise _too_big("uncompressed", max_size)
        return bytes(data)


class _GzipCodec:
    __slots__ = ()

    def compress(self, data: BytesLike) -> bytes:
        # Level 6, Java's GZIPOutputStream default; wbits 31 writes the gzip wrapper.
        return zlib.compress(data, 6, 31)

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        parts: list[bytes] = []
        budget = max_size + 1  # one byte more than allowed exposes an oversize stream
        rest = bytes(data)
        try:
            while True:  # concatenated gzip members are one stream, as GZIPInputStream reads
                stream = zlib.decompressobj(31)
                out = stream.decompress(rest, budget)
                parts.append(out)
                budget -= len(out)
                if budget <= 0:
                    raise _too_big("GZIP", max_size)
                if not stream.eof:
                    raise corrupt_payload("GZIP", "truncated stream")
                rest = stream.unused_data
                if not rest:
                    return b"".join(parts)
        except zlib.error as error:
            raise corrupt_payload("GZIP", error) from error


class _Lz4Codec:
    __slots__ = ("_compress", "_decompressor", "_error")

    def __init__(self) -> None:
        frame = load_package("lz4.frame", "LZ4", "lz4")
        # What the Java client writes and insists on reading: independent 64 KiB blocks
        # ("Dependent block stream is unsupported"), no content size or checksum.
        self._compress = functools.partial(
            frame.compress,
            block_size=frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        self._decompressor = frame.LZ4FrameDecompressor
        self._error: type[Exception] = RuntimeError  # what lz4.frame raises on bad input

    def compress(self, data: BytesLike) -> bytes:
        out: bytes = self._compress(data)
        return out

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        parts: list[bytes] = []
        budget = max_size + 1
        rest: BytesLike = data
        try:
            while True:  # one frame after the other, if there are several
                stream: Any = self._decompressor()
                out = stream.decompress(rest, min(budget, _CHUNK))
                while True:
                    parts.append(out)
                    budget -= len(out)
                    if budget <= 0:
                        raise _too_big("LZ4", max_size)
                    if stream.eof or stream.needs_input:
                        break
                    out = stream.decompress(b"", min(budget, _CHUNK))
                if not stream.eof:
                    raise corrupt_payload("LZ4", "truncated frame")
                rest = stream.unused_data
                if not rest:
                    return b"".join(parts)
        except self._error as error:
            raise corrupt_payload("LZ4", error) from error


class _ZstdCodec:
    __slots__ = ("_zstd",)

    def __init__(self) -> None:
        self._zstd = Zstd()

    def compress(self, data: BytesLike) -> bytes:
        return self._zstd.compress(data)

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        decompressor = self._zstd.decompressor(max_size)
        # A stream reader, not decompress(): that one trusts the frame's declared content
        # size for its allocation. A truncated frame just ends early here; the record
        # parser then finds records missing.
        parts: list[bytes] = []
        budget = max_size + 1
        try:
            reader = decompressor.stream_reader(data, read_across_frames=True)
            while budget > 0:
                out = reader.read(min(budget, _CHUNK))
                if not out:
                    return b"".join(parts)
                parts.append(out)
                budget -= len(out)
        except self._zstd.error as error:
            raise corrupt_payload("ZSTD", error) from error
        raise _too_big("ZSTD", max_size)


# xerial snappy-java's stream header: marker, "SNAPPY\0", then version and compatible
# version as big-endian int32 (both 1). Readers ignore the two versions (some producers
# write them little-endian).
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size, what the Java client writes
_I32 = struct.Struct(">i")


class _SnappyCodec:
    __slots__ = ("_snappy",)

    def __init__(self) -> None:
        self._snappy = SnappyBlocks()

    def compress(self, data: BytesLike) -> bytes:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(self._snappy.compress(view[start : start + _XERIAL_BLOCK]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)

    def decompress(self, data: BytesLike, max_size: int) -> bytes:
        data = bytes(data)
        if len(data) < 16 or not data.startswith(_XERIAL_MAGIC):
            return self._block(data, max_size, max_size)
        parts: list[bytes] = []
        budget = max_size
        position = 16
        while position < len(data):
            if position + 4 > len(data):
                raise corrupt_payload("SNAPPY", "truncated xerial block length")
            (size,) = _I32.unpack_from(data, position)
            position += 4
            if size < 0 or position + size > len(data):
                overrun = f"xerial block of {size} bytes overruns the payload"
                raise corrupt_payload("SNAPPY", overrun)
            out = self._block(data[position : position + size], budget, max_size)
            budget -= len(out)
            parts.append(out)
            position += size
        return b"".join(parts)

    def _block(self, block: bytes, budget: int, max_size: int) -> bytes:
        snappy = self._snappy
        try:
            # A raw block starts with its uncompressed length: check it before allocating.
            if snappy.length(block) > budget:
                raise _too_big("SNAPPY", max_size)
            return bytes(snappy.decompress(block))
        except snappy.error as error:
            raise corrupt_payload("SNAPPY", error) from error


_CODECS: dict[CompressionType, Callable[[], KafkaCodec]] = {
    CompressionType.NONE: _NoneCodec,
    CompressionType.GZIP: _GzipCodec,
    CompressionType.SNAPPY: _SnappyCodec,
    CompressionType.LZ4: _Lz4Codec,
    CompressionType.ZSTD: _ZstdCodec,
}
