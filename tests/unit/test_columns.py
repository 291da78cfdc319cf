"""protocols/columns.py: records of one layout read by columns, checked against a reader
that goes byte by byte."""

from __future__ import annotations

import pytest

from protocols.columns import (
    column,
    common_prefix,
    consecutive_varint_columns,
    leading,
    valid_varints,
    varint_columns,
    varints,
)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes((n,)))


def records(numbers: list[int], width: int, filler: bytes = b"ab") -> bytes:
    """A record per number: two filler bytes, then its varint (of ``width`` bytes)."""
    assert all(len(uvarint(n)) == width for n in numbers)
    return b"".join(filler + uvarint(n) for n in numbers)


@pytest.mark.parametrize(
    ("first", "count", "step"),
    [(0, 64, 1), (0, 128, 1), (130, 1000, 1), (16380, 4, 1), (0, 64, 2), (128, 8000, 2)],
)
def test_consecutive_varint_columns_are_those_of_the_numbers(
    first: int, count: int, step: int
) -> None:
    numbers = list(range(first, first + count * step, step))
    width = len(uvarint(first))
    data = records(numbers, width)
    stride = 2 + width
    assert consecutive_varint_columns(first, count, width, step) == varint_columns(
        data, 2, stride, count, width
    )
    assert valid_varints(varint_columns(data, 2, stride, count, width)) == count
    assert varints(varint_columns(data, 2, stride, count, width)) == numbers


def test_a_step_that_does_not_divide_the_first_number_is_refused() -> None:
    with pytest.raises(ValueError, match="step 2"):
        consecutive_varint_columns(1, 3, 1, step=2)


def test_valid_varints_counts_up_to_the_first_varint_of_another_width() -> None:
    two_bytes = [200, 300, 16000]
    data = records(two_bytes, 2) + b"ab" + uvarint(5) + b"x" + records([400], 2)
    columns = varint_columns(data, 2, 4, 5, 2)
    assert valid_varints(columns) == 3  # the fourth ends after one byte
    assert varints([c[:3] for c in columns]) == two_bytes


def test_column_leading_and_common_prefix() -> None:
    data = b"a1a2a3b4a5"
    assert column(data, 0, 2, 5) == b"aaaba"
    assert column(data, 0, 2, 9) == b"aaaba"  # no further than the data
    assert leading(b"aaaba", ord("a")) == 3
    assert leading(b"", ord("a")) == 0
    for a, b, length in [
        (b"", b"", 0),
        (b"abc", b"abc", 3),
        (b"abc", b"abd", 2),
        (b"abc", b"ab", 2),
        (b"xbc", b"abc", 0),
        (bytes(1000) + b"\x01", bytes(1001), 1000),
    ]:
        assert common_prefix(a, b) == common_prefix(b, a) == length
