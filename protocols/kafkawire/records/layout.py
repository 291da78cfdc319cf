"""Kafka RecordBatch v2 (magic 2): the layout both directions share.

A batch (big-endian, 61-byte header)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records

and a record, its integers zigzag varints::

    length | attributes i8 | timestampDelta | offsetDelta | keyLength | key |
    valueLength | value | headerCount | (nameLength | name | valueLength | value)*

``batchLength`` counts from partitionLeaderEpoch on; the CRC-32C covers attributes to the
end; with a codec set, everything after recordCount is compressed as one payload.
"""

from __future__ import annotations

import struct

from protocols.varint import uvarint

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset and batchLength, which batchLength does not count
MAGIC_AT, ATTRIBUTES_AT = 16, 21
MAGIC = 2
# attribute bits; bits 0-2 are the codec
LOG_APPEND_TIME, TRANSACTIONAL, CONTROL = 0x08, 0x10, 0x20

# Varints of 0 to 8191 (one or two bytes): offset deltas and most sizes are among them,
# and a lookup here costs a fraction of computing one.
SMALL_COUNT = 1 << 13
SMALL_VARINTS: list[bytes] = [bytes((2 * i,)) for i in range(64)] + [
    bytes(((2 * i) & 0x7F | 0x80, i >> 6)) for i in range(64, SMALL_COUNT)
]
# An offset delta below each limit takes one more varint byte than below the previous one.
DELTA_WIDTH_LIMITS = (64, 1 << 13, 1 << 20, 1 << 27, 1 << 34)


def varint(n: int) -> bytes:
    """Kafka's zigzag varint (and varlong) of a signed int."""
    if 0 <= n < SMALL_COUNT:
        return SMALL_VARINTS[n]
    return uvarint(zigzag(n))


def zigzag(n: int) -> int:
    """A signed int as Kafka's varints hold it: 0, -1, 1, -2, ... as 0, 1, 2, 3, ..."""
    return n << 1 if n >= 0 else (~n << 1) | 1
