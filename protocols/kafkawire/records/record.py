"""One Kafka record (RecordBatch v2) read at a position of its batch's records, every
field checked: the general reader, for records the column readers do not take."""

from __future__ import annotations

from msgclient.errors import MalformedFrameError

Record = tuple[
    int, int, int, "bytes | None", "bytes | None", "dict[str, str] | None", int, int, int, int
]


def record_at(data: bytes, p: int, base_offset: int) -> Record:
    """The record at ``p``: (its end, timestamp delta, offset delta, key, value (None: a null
    value), headers, and where its timestamp delta, offset delta, key length and value
    start).
    Varints of one or two bytes are read in place, longer ones by _varint_at."""
    z = data[p]  # length
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    end = p + (z >> 1)
    if z & 1 or end > len(data):
        raise malformed(base_offset, f"record length {_signed(z)} overruns the batch")
    timestamp_at = p + 1  # after the attributes byte (unused)
    z = data[timestamp_at]
    if z < 0x80:
        p += 2
    else:
        z, p = _varint_at(data, timestamp_at)
    timestamp_delta, delta_at = (z >> 1) ^ -(z & 1), p
    z = data[p]  # offset delta
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    if z & 1:
        raise malformed(base_offset, f"offset delta {_signed(z)}")
    offset_delta, key_at = z >> 1, p
    z = data[p]  # key length
    if z < 0x80:
        p += 1
    else:
        z, p = _varint_at(data, p)
    key = None
    if not z & 1:
        key = data[p : p + (z >> 1)]
        p += z >> 1  # a key or value past the record's end fails the length check below
    elif z != 1:
        raise malformed(base_offset, f"key length {_signed(z)}")
    z = data[p]  # value length
    if z < 0x80:
        p += 1
    elif data[p + 1] < 0x80:
        z, p = (z & 0x7F) | (data[p + 1] << 7), p + 2
    else:
        z, p = _varint_at(data, p)
    value_at = p
    value: bytes | None
    if not z & 1:
        value = data[p : p + (z >> 1)]
        p += z >> 1
    elif z == 1:
        value = None  # length -1: a null value (a tombstone)
    else:
        raise malformed(base_offset, f"value length {_signed(z)}")
    headers = None
    if data[p] == 0:
        p += 1
    else:
        headers, p = _headers_at(data, p, end, base_offset)
    if p != end:
        raise malformed(base_offset, f"a record's fields end at {p}, its length at {end}")
    return (
        end, timestamp_delta, offset_delta, key, value, headers,
        timestamp_at, delta_at, key_at, value_at,
    )  # fmt: skip


def _headers_at(
    data: bytes, p: int, record_end: int, base_offset: int
) -> tuple[dict[str, str], int]:
    """The headers at ``p`` (their count first) and the position after them."""
    z, p = _varint_at(data, p)
    count = z >> 1
    if z & 1 or count > (record_end - p) // 2:  # a header takes two bytes at least
        raise malformed(base_offset, f"header count {_signed(z)} in a record")
    headers = {}
    for _ in range(count):
        z, p = _varint_at(data, p)
        end = p + (z >> 1)
        if z & 1 or end > record_end:
            raise malformed(base_offset, f"header name length {_signed(z)} in a record")
        name = data[p:end].decode("utf-8", "surrogateescape")
        z, p = _varint_at(data, end)
        end = p + (z >> 1)
        if z == 1:
            headers[name] = ""  # null value
        elif z & 1 or end > record_end:
            raise malformed(base_offset, f"header value length {_signed(z)} in a record")
        else:
            headers[name] = data[p:end].decode("utf-8", "surrogateescape")
            p = end
    return headers, p


def _varint_at(data: bytes, p: int) -> tuple[int, int]:
    """The raw (still zigzag) varint at ``p``, of at most 10 bytes (a varlong), and the
    position after it. Past the end of ``data``: IndexError, a record overrun."""
    z = data[p]
    if z < 0x80:  # the most common by far: returned before the loop
        return z, p + 1
    z &= 0x7F
    for i in range(p + 1, p + 10):
        byte = data[i]
        z |= (byte & 0x7F) << (7 * (i - p))
        if byte < 0x80:
            return z, i + 1
    raise MalformedFrameError(f"a varint at byte {p} of a batch runs over 10 bytes")


def malformed(base_offset: int, what: str) -> MalformedFrameError:
    return MalformedFrameError(f"record batch at offset {base_offset}: {what}")


def _signed(z: int) -> int:
    """The int a zigzag varint encodes."""
    return (z >> 1) ^ -(z & 1)
