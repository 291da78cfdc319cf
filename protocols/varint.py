"""The base-128 varint encoder both wire formats use: protobuf's (Pulsar's metadata, message
ids) and Kafka's (record fields, after zigzag; the lengths of flexible request versions)."""

from __future__ import annotations

_ONE_BYTE = [bytes((n,)) for n in range(0x80)]
_UINT64 = 0xFFFFFFFFFFFFFFFF


def uvarint(n: int) -> bytes:
    """The varint of ``n``; a negative ``n`` as protobuf writes an int64, by its 64-bit
    two's complement (ten bytes)."""
    if 0 <= n < 0x80:  # lengths, small ids and counts: the common case, a lookup
        return _ONE_BYTE[n]
    if 0 <= n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    n &= _UINT64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
