"""Records read by columns: the batch decoders' fast path for records of one layout.

A producer sending messages of one size writes batches whose records all have one layout:
the same fields, each as many bytes long. Such records sit at a fixed stride, so a byte of
their headers sits at the same offset in each of them, and one strided slice reads it for
all of them: a column. A constant field is checked by comparing its columns with its first
record's bytes, and a varint of a fixed width is a few columns, checked and combined with
no Python loop per record over bytes. Both batch decoders use this: Pulsar's records
(SingleMessageMetadata) and Kafka's (record batch v2).

Pure functions on bytes, as the decoders that call them.
"""

from __future__ import annotations

__all__ = [
    "column",
    "common_prefix",
    "consecutive_varint_columns",
    "leading",
    "valid_varints",
    "varint_columns",
    "varints",
]

# bytes.translate tables: 1 where a varint byte is wrong for its place, 0 where it is right.
_NOT_CONTINUED = bytes(1 if byte < 0x80 else 0 for byte in range(256))  # a byte before the last
_CONTINUED = bytes(1 if byte >= 0x80 else 0 for byte in range(256))  # the last byte


def column(data: bytes, start: int, stride: int, count: int) -> bytes:
    """``data[start]`` and every ``stride``-th byte after it: ``count`` bytes, fewer where
    ``data`` ends first."""
    return data[start : start + (count - 1) * stride + 1 : stride]


def varint_columns(data: bytes, start: int, stride: int, count: int, width: int) -> list[bytes]:
    """The ``width`` byte columns of a varint at ``start`` in ``count`` records."""
    return [column(data, start + byte, stride, count) for byte in range(width)]


def leading(column_bytes: bytes, byte: int) -> int:
    """How many bytes at the start of ``column_bytes`` are ``byte``."""
    return len(column_bytes) - len(column_bytes.lstrip(bytes((byte,))))


def valid_varints(columns: list[bytes]) -> int:
    """How many leading records hold a varint of exactly ``len(columns)`` bytes: each byte
    but the last carries the continuation bit, the last does not."""
    valid = len(columns[0])
    last = len(columns) - 1
    for index, column_bytes in enumerate(columns):
        wrong = column_bytes.translate(_NOT_CONTINUED if index < last else _CONTINUED).find(1)
        if 0 <= wrong < valid:
            valid = wrong
    return valid


def varints(columns: list[bytes]) -> list[int]:
    """The numbers of the varints in ``columns`` (checked by ``valid_varints``)."""
    numbers = list(columns[0])
    if len(columns) == 1:
        return numbers
    numbers = [n & 0x7F for n in numbers]
    last = len(columns) - 1
    for shift, column_bytes in enumerate(columns[1:], 1):
        mask = 0x7F if shift < last else 0xFF
        numbers = [
            n | ((b & mask) << (7 * shift)) for n, b in zip(numbers, column_bytes, strict=True)
        ]
    return numbers


def consecutive_varint_columns(first: int, count: int, width: int, step: int = 1) -> list[bytes]:
    """The byte columns of the varints of ``first``, ``first + step``, ... (``count`` numbers,
    each written in ``width`` bytes), built from runs (byte ``k`` changes every 128**k
    numbers): a few slices instead of a loop per number. ``step`` divides 128 and
    ``first``: 1 for Pulsar's sequence ids, 2 for Kafka's zigzag offset deltas."""
    if 128 % step or first % step:
        raise ValueError(f"step {step} must divide 128 and the first number {first}")
    end = first + count * step
    columns = []
    for byte in range(width):
        flag = 0x80 if byte < width - 1 else 0
        if byte == 0:  # changes with every number: slices of a cycle of 128 // step bytes
            cycle = bytes(range(flag, flag + 0x80, step))
            start = (first & 0x7F) // step
            repeats = (start + count) // len(cycle) + 1
            columns.append((cycle * repeats)[start : start + count])
            continue
        unit = 1 << (7 * byte)
        runs = []
        number = first
        while number < end:
            run_end = min(end, (number // unit + 1) * unit)
            byte_value = ((number >> (7 * byte)) & 0x7F) | flag
            runs.append(bytes((byte_value,)) * ((run_end - number) // step))
            number = run_end
        columns.append(b"".join(runs))
    return columns


def common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b``: found by halving, each
    step one comparison of slices (no loop per byte)."""
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size - 1
    while low < high:  # the prefix is at least low and at most high bytes long
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low
