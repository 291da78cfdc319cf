"""Pulsar payload compression, byte-compatible with the Java and C++ clients.

Every codec writes the bare compressed bytes; the uncompressed size travels in the message
metadata, so decompressing needs it. Formats: LZ4 raw block (no frame), zlib stream, zstd
frame, Snappy raw block (not the framing format).

The LZ4, zstd and Snappy libraries are optional; each is imported the first time its codec
is asked for, and a missing one raises ``InvalidConfigurationError`` naming the pip extra.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from typing import Protocol

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

__all__ = ["PULSAR_COMPRESSION_TYPES", "Codec", "get_codec"]


class Codec(Protocol):
    """Compresses a payload, and restores one given its uncompressed size.

    Instances are shared and safe to call from several threads at once.
    """

    def compress(self, data: BytesLike) -> bytes: ...

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        """Raise ``ProtocolError`` if ``data`` is corrupt or not ``uncompressed_size`` long."""


@functools.cache
def get_codec(kind: CompressionType) -> Codec:
    """The shared Pulsar codec for ``kind``; raises ``InvalidConfigurationError`` if its
    package is missing (that failure is not cached, so installing the package is enough)
    or if Pulsar has no such codec (GZIP).
    """
    return codec_factory(_CODECS, kind, "Pulsar")()


def _checked(name: str, out: bytes, uncompressed_size: int) -> bytes:
    if len(out) != uncompressed_size:
        raise ProtocolError(
            f"{name} payload decompressed to {len(out)} bytes, metadata says {uncompressed_size}"
        )
    return out


class _NoneCodec:
    __slots__ = ()

    def compress(self, data: BytesLike) -> bytes:
        return bytes(data)

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        # Not checked: producers leave uncompressed_size at 0 on uncompressed messages.
        return bytes(data)


class _ZlibCodec:
    __slots__ = ()

    def compress(self, data: BytesLike) -> bytes:
        return zlib.compress(data)  # level 6, as Java's Deflater() and C++'s compress()

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        # A decompressobj, not zlib.decompress: the Java client sync-flushes without
        # finishing, so its streams lack the end marker that zlib.decompress insists on.
        # The +1 bound stops a lying stream early while still exposing an oversize one.
        try:
            out = zlib.decompressobj().decompress(data, uncompressed_size + 1)
        except zlib.error as error:
            raise corrupt_payload("ZLIB", error) from error
        return _checked("ZLIB", out, uncompressed_size)


class _Lz4Codec:
    __slots__ = ("_compress", "_decompress", "_error")

    def __init__(self) -> None:
        block = load_package("lz4.block", "LZ4", "lz4")
        self._compress = block.compress
        self._decompress = block.decompress
        self._error: type[Exception] = block.LZ4BlockError

    def compress(self, data: BytesLike) -> bytes:
        out: bytes = self._compress(data, store_size=False)
        return out

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        try:
            out: bytes = self._decompress(data, uncompressed_size=uncompressed_size)
        except self._error as error:
            raise corrupt_payload("LZ4", error) from error
        return _checked("LZ4", out, uncompressed_size)


class _ZstdCodec:
    __slots__ = ("_zstd",)

    def __init__(self) -> None:
        self._zstd = Zstd()

    def compress(self, data: BytesLike) -> bytes:
        return self._zstd.compress(data)

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        zstd = self._zstd
        decompressor = zstd.decompressor(uncompressed_size)
        # A frame that records its size is allocated at that size: refuse a lie first.
        try:
            recorded = int(zstd.module.frame_content_size(data))
        except zstd.error:
            recorded = -1  # none recorded, or not a frame: decompress says what is wrong
        if recorded > uncompressed_size:
            raise ProtocolError(
                f"ZSTD frame says {recorded} bytes, metadata says {uncompressed_size}"
            )
        try:
            # max_output_size only matters for frames that do not record their size.
            out: bytes = decompressor.decompress(data, max_output_size=uncompressed_size)
        except zstd.error as error:
            raise corrupt_payload("ZSTD", error) from error
        return _checked("ZSTD", out, uncompressed_size)


class _SnappyCodec:
    __slots__ = ("_snappy",)

    def __init__(self) -> None:
        self._snappy = SnappyBlocks()

    def compress(self, data: BytesLike) -> bytes:
        return bytes(self._snappy.compress(data))

    def decompress(self, data: BytesLike, uncompressed_size: int) -> bytes:
        snappy = self._snappy
        try:
            # The block starts with its uncompressed length: check it before allocating.
            declared = snappy.length(data)
            if declared != uncompressed_size:
                raise ProtocolError(
                    f"SNAPPY payload declares {declared} bytes, metadata says {uncompressed_size}"
                )
            return bytes(snappy.decompress(data))
        except snappy.error as error:
            raise corrupt_payload("SNAPPY", error) from error


_CODECS: dict[CompressionType, Callable[[], Codec]] = {
    CompressionType.NONE: _NoneCodec,
    CompressionType.LZ4: _Lz4Codec,
    CompressionType.ZLIB: _ZlibCodec,
    CompressionType.ZSTD: _ZstdCodec,
    CompressionType.SNAPPY: _SnappyCodec,
}

PULSAR_COMPRESSION_TYPES = tuple(_CODECS)  # what Pulsar's wire format has (no GZIP)
