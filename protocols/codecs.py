"""What the Pulsar and the Kafka codecs share: byte-like input, the errors they raise, the
import of each optional package, zstd contexts kept per thread, and Snappy's raw block
functions.

Each adapter has its own codecs (the two wire formats frame compressed data differently:
Pulsar carries the uncompressed size in the metadata, Kafka does not); their optional
packages are imported the first time a codec is asked for, and a missing one raises
``InvalidConfigurationError`` naming the pip extra.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from msgclient.errors import InvalidConfigurationError, ProtocolError
from msgclient.options import CompressionType

BytesLike: TypeAlias = bytes | bytearray | memoryview
C = TypeVar("C")


def corrupt_payload(name: str, error: object) -> ProtocolError:
    return ProtocolError(f"corrupt {name} payload: {error}")


def codec_factory(
    codecs: Mapping[CompressionType, Callable[[], C]], kind: CompressionType, wire: str
) -> Callable[[], C]:
    """What makes ``kind``'s codec among a wire format's ``codecs``; a kind the format does
    not have raises InvalidConfigurationError listing those it has."""
    factory = codecs.get(kind)
    if factory is None:
        raise InvalidConfigurationError(
            f"option compression_type={kind} is invalid on {wire}: use one of "
            + ", ".join(str(k) for k in codecs)
        )
    return factory


def load_package(module: str, codec: str, extra: str) -> Any:
    """Import ``module`` for the ``codec`` compression; a missing package raises
    InvalidConfigurationError naming ``pip install msgclient[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.partition(".")[0]
        raise InvalidConfigurationError(
            f"{codec} compression needs the {package!r} package: pip install msgclient[{extra}]"
        ) from error


# zstd levels 1 to 19 use windows up to 8 MiB (2**23); a frame may declare up to 2**27 and
# the decoder reserves what it declares before reading a byte of content. 14 forged bytes
# would cost 128 MiB, so a frame may declare at most this, or the size it may decode to.
_ZSTD_WINDOW_FLOOR = 1 << 23


class Zstd:
    """zstandard at level 3 (the Java and C++ Pulsar clients', and Kafka's default
    compression.zstd.level), with its contexts kept per thread: they must not be shared
    between threads, and reusing one saves ~3 us of set-up per call, most of a small
    entry's cost."""

    __slots__ = ("_local", "error", "module")

    def __init__(self) -> None:
        self.module = load_package("zstandard", "ZSTD", "zstd")
        self.error: type[Exception] = self.module.ZstdError
        self._local = threading.local()

    def compress(self, data: BytesLike) -> bytes:
        try:
            compressor: Any = self._local.compressor
        except AttributeError:
            compressor = self._local.compressor = self.module.ZstdCompressor(level=3)
        out: bytes = compressor.compress(data)
        return out

    def decompressor(self, max_size: int) -> Any:
        """This thread's decompressor for output of at most ``max_size`` bytes: its window
        is capped at the larger of 8 MiB and ``max_size`` (rounded up to a power of two),
        one kept per cap."""
        window = max(_ZSTD_WINDOW_FLOOR, 1 << max(0, max_size - 1).bit_length())
        try:
            cache: dict[int, Any] = self._local.decompressors
        except AttributeError:
            cache = self._local.decompressors = {}
        decompressor = cache.get(window)
        if decompressor is None:
            decompressor = cache[window] = self.module.ZstdDecompressor(max_window_size=window)
        return decompressor


class SnappyBlocks:
    """Snappy raw blocks (cramjam): Pulsar's payload format, and each block of Kafka's
    xerial framing."""

    __slots__ = ("compress", "decompress", "error", "length")

    def __init__(self) -> None:
        snappy = load_package("cramjam", "SNAPPY", "snappy")
        self.compress = snappy.snappy.compress_raw
        self.decompress = snappy.snappy.decompress_raw
        self.length = snappy.snappy.decompress_raw_len  # the length a block declares
        self.error: type[Exception] = snappy.DecompressionError
