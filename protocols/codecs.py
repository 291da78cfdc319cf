"""What the Pulsar and the Kafka codecs share: byte-like input, the errors they raise, and
zstd decompressors kept per thread with a bounded window.

Each adapter has its own codecs (the two wire formats frame compressed data differently:
Pulsar carries the uncompressed size in the metadata, Kafka does not); their optional
packages are imported the first time a codec is asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeAlias

from msgclient.errors import InvalidConfigurationError, ProtocolError

BytesLike: TypeAlias = bytes | bytearray | memoryview


def corrupt_payload(name: str, error: object) -> ProtocolError:
    return ProtocolError(f"corrupt {name} payload: {error}")


def missing_package(name: str, package: str, extra: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(
        f"{name} compression needs the {package!r} package: pip install msgclient[{extra}]"
    )


# zstd levels 1 to 19 use windows up to 8 MiB (2**23); a frame may declare up to 2**27 and
# the decoder reserves what it declares before reading a byte of content. 14 forged bytes
# would cost 128 MiB, so a frame may declare at most this, or the size it may decode to.
_ZSTD_WINDOW_FLOOR = 1 << 23


def zstd_decompressor(local: threading.local, new: Callable[..., Any], max_size: int) -> Any:
    """This thread's zstd decompressor for output of at most ``max_size`` bytes: its window
    is capped at the larger of 8 MiB and ``max_size`` (rounded up to a power of two).

    Decompressors are kept per thread (they must not be shared between threads) and per
    window cap; reusing one saves ~3 us of context setup per call.
    """
    window = max(_ZSTD_WINDOW_FLOOR, 1 << max(0, max_size - 1).bit_length())
    try:
        cache: dict[int, Any] = local.decompressors
    except AttributeError:
        cache = local.decompressors = {}
    decompressor = cache.get(window)
    if decompressor is None:
        decompressor = cache[window] = new(max_window_size=window)
    return decompressor
