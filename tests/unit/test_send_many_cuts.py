"""send_many's batch cuts: values of one size are cut by arithmetic, as the per-value
loop would cut them; the size check that decides it looks at every value."""

from __future__ import annotations

import pytest

from msgclient.bulk_columns import cuts, uniform_cuts
from msgclient.contract import uniform_size


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 4096, 20_000])
@pytest.mark.parametrize("count", [1, 7, 100, 1001])
@pytest.mark.parametrize(("max_count", "max_bytes"), [(1, 10_000), (100, 10_000), (1000, 16_384)])
def test_uniform_cuts_are_the_loops_cuts(
    size: int, count: int, max_count: int, max_bytes: int
) -> None:
    values: list[bytes | None] = [b"x" * size] * count
    assert list(uniform_cuts(count, size, max_count, max_bytes)) == list(
        cuts(values, max_count, max_bytes)
    )


def test_uniform_size_looks_at_every_value() -> None:
    assert uniform_size([b"ab", b"cd", b"ef"]) == 2
    assert uniform_size([b""] * 3) == 0
    assert uniform_size([b"ab", b"cd", b"e"]) is None  # a size differs
    assert uniform_size([b"ab", None, b"cd"]) is None  # a null value
    assert uniform_size([None, b"ab"]) is None
    assert uniform_size([b"ab", bytearray(b"cd")]) is None  # not bytes: checked one by one
    assert uniform_size([b"ab", "cd"]) is None  # type: ignore[list-item]
