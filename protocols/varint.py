"""The base-128 varint encoder both wire formats use: protobuf's (Pulsar's metadata, message
ids) and Kafka's (record fields, after zigzag; the lengths of flexible request versions)."""

from __future__ import annotations

_ONE_BYTE = [bytes((n,)) for n in range(0x80)]
_UINT64 = 0xFFFFFFFFFFFFFFFF


def uvarint(n: int) -> bytes:
    """The varint of ``n``; a negative ``n`` as protobuf writes an int64, by its 64-bit
    two's complement (ten bytes)."""
    # Unrolled up to three bytes: sizes, batch indexes, and the sequence ids a producer
    # writes per message (past 16383 they take three) are that short.
    if n < 0x80:
        if n >= 0:
            return _ONE_BYTE[n]
        n &= _UINT64
    elif n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    elif n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
