"""Key hashes for partition routing, bit for bit as in the Pulsar Java client.

A keyed message goes to partition ``sign_safe_mod(hash(key), partitions)``. Producers in
any language agree on the partition only if they agree on the hash, so these follow Pulsar's
``JavaStringHash``, ``Murmur3_32Hash`` and ``MathUtils.signSafeMod`` exactly.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from operator import mul

__all__ = ["java_string_hash", "murmur3_32_hash", "sign_safe_mod"]

_INT_MAX = 0x7FFFFFFF  # Java's Integer.MAX_VALUE: both hashes are masked with it
_U32 = 0xFFFFFFFF

# -- JavaStringHash: String.hashCode() & Integer.MAX_VALUE ------------------------------

# hashCode() is sum(unit[i] * 31**(n-1-i)) over UTF-16 code units, modulo 2**32; the mask
# keeps only 31 bits, so powers modulo 2**31 suffice. Up to _SHORT units a plain Horner loop
# is fastest; above, sum(map(mul, ...)) runs the dot product in C, ~1.5x faster than the loop.
_SHORT = 16
_CHUNK = 256
_POWERS = tuple(pow(31, k, 1 << 31) for k in range(_CHUNK + 1))
# UTF-16 in native byte order, so that memoryview.cast("H") reads code units directly.
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_string_hash(key: str) -> int:
    """Pulsar's ``JavaStringHash``: ``key.hashCode() & Integer.MAX_VALUE``, in 0..2**31-1.

    Java hashes UTF-16 code units, so a character outside the BMP (an emoji) counts as its
    two surrogates.
    """
    units: Sequence[int]
    if key.isascii():  # one byte per char, and each byte is its UTF-16 code unit
        units = key.encode("ascii")
    else:
        # surrogatepass: a lone surrogate is a code unit of its own, as in a Java String.
        units = memoryview(key.encode(_UTF16_NATIVE, "surrogatepass")).cast("H")
    if len(units) <= _SHORT:
        h = 0
        for unit in units:
            h = h * 31 + unit  # unmasked: stays below 2**96 for 16 units
        return h & _INT_MAX
    if len(units) <= _CHUNK:
        h = sum(map(mul, reversed(units), _POWERS))
        return h & _INT_MAX
    # Longer keys: Horner over chunks, hash(a + b) = hash(a) * 31**len(b) + hash(b).
    h = 0
    for start in range(0, len(units), _CHUNK):
        chunk = units[start : start + _CHUNK]
        h = (h * _POWERS[len(chunk)] + sum(map(mul, reversed(chunk), _POWERS))) & _INT_MAX
    return h


# -- Murmur3_32Hash: MurmurHash3 x86_32, seed 0, of the key's UTF-8 bytes ----------------

_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def murmur3_32_hash(key: str) -> int:
    """Pulsar's ``Murmur3_32Hash``: MurmurHash3 (x86, 32-bit, seed 0) of the key's UTF-8 bytes,
    masked with ``Integer.MAX_VALUE``, in 0..2**31-1.
    """
    # "replace" turns a lone surrogate into "?", as Java's String.getBytes(UTF_8) does.
    data = key.encode("utf-8", "replace")
    length = len(data)
    body = length & ~3
    h = 0  # Pulsar's seed
    # Masks are applied only where bits above 32 would leak down (before a shift right):
    # the low 32 bits of a product or sum depend only on the low 32 bits of its inputs.
    for block in struct.unpack_from(f"<{body >> 2}I", data):  # little-endian 4-byte blocks
        k = (block * _C1) & _U32
        h = (h ^ ((k << 15 | k >> 17) * _C2)) & _U32
        h = ((h << 13 | h >> 19) * 5 + 0xE6546B64) & _U32
    k = (int.from_bytes(data[body:], "little") * _C1) & _U32  # the 0-3 tail bytes
    h = (h ^ ((k << 15 | k >> 17) * _C2) ^ length) & _U32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _U32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _U32
    return (h ^ (h >> 16)) & _INT_MAX


def sign_safe_mod(dividend: int, divisor: int) -> int:
    """Pulsar's ``MathUtils.signSafeMod``: Java's ``dividend % divisor``, plus ``divisor``
    when that is negative. For a positive divisor this is the index in ``0..divisor-1``.
    """
    # Java's % truncates toward zero, so the remainder takes the dividend's sign.
    mod = abs(dividend) % abs(divisor)
    return divisor - mod if dividend < 0 and mod else mod
