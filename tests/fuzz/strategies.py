"""Shared pieces of the codec fuzz tests: mutations of valid encodings, the example budget,
and the checks that a decoder raised only its own errors within bounded memory."""

from __future__ import annotations

import contextlib
import itertools
import resource
import threading
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st

T = TypeVar("T")

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

# Sizes a lying peer would send: the edges of every integer width, 2 GiB, 2**63 (negative
# ones come from the signed draws of mutated()).
INTERESTING_SIZES = (
    0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 61, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF,
    1_000_000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
)  # fmt: skip


def examples(share: float) -> int:
    """This test's part of its codec's budget (the profile's max_examples)."""
    return max(10, int(settings().max_examples * share))


# -- mutations -----------------------------------------------------------------------------


def varint(n: int) -> bytes:
    """An unsigned LEB128 varint (protobuf's; Kafka's zigzag ones take it too)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _size_field(value: int, width: int) -> bytes:
    return (value % (1 << (8 * width))).to_bytes(width, "big")


# Strategies are built once: building them inside a draw costs more than the draw.
_KINDS = st.sampled_from(("flip", "byte", "truncate", "cut", "insert", "splice", "size", "varint"))
_SIZES = st.sampled_from(INTERESTING_SIZES)
_VARINT_VALUES = _SIZES | st.integers(0, 2**64 - 1)
_SIZE_VALUES = _SIZES | st.integers(-(2**31), 2**32 - 1)
_NEAR_LENGTH = st.sampled_from((-5, -4, -1, 0, 1, 4))  # added to the input's length
_WIDTHS = st.sampled_from((1, 2, 4, 8))
_BITS = st.integers(0, 7)
_BYTES = st.integers(0, 255)
_INSERTS = st.binary(min_size=1, max_size=16)
_SHORT = st.integers(1, 16)
_SPLICE = st.integers(1, 64)
_VARINT_SPAN = st.integers(0, 10)


@st.composite
def mutated(
    draw: st.DrawFn, valid: bytes, size_fields: Sequence[tuple[int, int]] = (), most: int = 4
) -> bytes:
    """``valid`` with 1 to ``most`` mutations: bit flips, byte changes, truncation, cuts,
    insertions, splices of its own bytes, and size fields replaced with lying values.

    ``size_fields`` are known (offset, width) size fields of ``valid``: they are picked
    often, besides random offsets of every width and varints (protobuf and Kafka sizes).
    """
    data = bytearray(valid)
    fields = st.sampled_from(size_fields) if size_fields else None
    for _ in range(draw(st.integers(1, most))):
        kind = draw(_KINDS)
        if kind == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(_INSERTS)
        elif kind == "varint":
            at = draw(st.integers(0, len(data)))
            value = draw(_VARINT_VALUES)
            if draw(st.booleans()):
                value = value << 1  # zigzag: Kafka's varints
            data[at : at + draw(_VARINT_SPAN)] = varint(value)
        elif kind == "size":
            value = draw(_SIZE_VALUES) if draw(st.booleans()) else len(data) + draw(_NEAR_LENGTH)
            if fields is not None and draw(st.booleans()):
                at, width = draw(fields)
            else:
                width = draw(_WIDTHS)
                at = draw(st.integers(0, len(data)))
            data[at : at + width] = _size_field(value, width)
        elif data:
            at = draw(st.integers(0, len(data) - 1))
            if kind == "flip":
                data[at] ^= 1 << draw(_BITS)
            elif kind == "byte":
                data[at] = draw(_BYTES)
            elif kind == "cut":
                del data[at : at + draw(_SHORT)]
            else:  # splice: a run of its own bytes copied elsewhere (repeats a structure)
                start = draw(st.integers(0, len(data) - 1))
                data[at:at] = data[start : start + draw(_SPLICE)]
    return bytes(data)


def chunked(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` split at the given offsets (taken modulo its length, sorted)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


# -- bounded runs --------------------------------------------------------------------------

# Address space a call may add before the kernel refuses it: a runaway allocation turns
# into MemoryError (reported as unbounded) instead of swapping a shared machine.
_CEILING = 1 * GIB


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def memory_ceiling(extra: int = _CEILING) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Outcome:
    """What a bounded call did: its result or allowed error, and its peak allocation."""

    __slots__ = ("error", "peak", "result")

    def __init__(self, result: Any, error: BaseException | None, peak: int) -> None:
        self.result, self.error, self.peak = result, error, peak


def bounded(
    call: Callable[[], T],
    allowed: type[BaseException] | tuple[type[BaseException], ...],
    max_bytes: int,
) -> Outcome:
    """Run ``call``; fail the test if it raises anything but ``allowed`` or its peak
    Python allocation (tracemalloc) passes ``max_bytes``."""
    tracing = tracemalloc.is_tracing()
    result: Any = None
    error: BaseException | None = None
    # The ceiling is set before tracing starts: its own bookkeeping is not the call's.
    with memory_ceiling():
        if not tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        try:
            result = call()
        except allowed as exc:
            error = exc
        except MemoryError as exc:
            raise AssertionError(f"unbounded allocation: {exc!r}") from exc
        finally:
            peak = tracemalloc.get_traced_memory()[1] - base
            if not tracing:
                tracemalloc.stop()
    # The result is still referenced: the peak covers it and what decoding it took.
    assert peak <= max_bytes, f"peak allocation {peak} bytes, the bound is {max_bytes}"
    return Outcome(result, error, peak)


def only(
    call: Callable[[], T], allowed: type[BaseException] | tuple[type[BaseException], ...]
) -> tuple[T | None, BaseException | None]:
    """``call()``'s result, or the ``allowed`` error it raised (anything else fails)."""
    try:
        with memory_ceiling():
            return call(), None
    except allowed as exc:
        return None, exc
    except MemoryError as exc:
        raise AssertionError(f"unbounded allocation: {exc!r}") from exc


def in_fresh_thread(
    call: Callable[[], T], ceiling: int = _CEILING
) -> tuple[T | None, BaseException | None]:
    """``call()`` in a new thread (codecs keep per-thread contexts, whose buffers an earlier
    call may have grown) under a memory ceiling: its result, or the exception it raised.
    The ceiling is set once the thread runs, so that its stack is not counted."""
    box: list[Any] = [None, None]

    def run() -> None:
        try:
            with memory_ceiling(ceiling):
                box[0] = call()
        except BaseException as exc:  # handed to the caller
            box[1] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box[0], box[1]


# A 14-byte zstd frame: no content size, a window of 2**27 bytes (the most zstd accepts by
# default), one raw block of 5 bytes. Decoders reserve the window before reading a block.
ZSTD_WINDOW_BOMB = b"\x28\xb5\x2f\xfd\x00\x88" + bytes(((5 << 3) | 1, 0, 0)) + b"hello"


def text(max_size: int = 20) -> st.SearchStrategy[str]:
    """Text that UTF-8 can carry (no lone surrogates), as protobuf strings require."""
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=max_size)


__all__ = [
    "GIB",
    "INTERESTING_SIZES",
    "KIB",
    "MIB",
    "ZSTD_WINDOW_BOMB",
    "Outcome",
    "bounded",
    "chunked",
    "examples",
    "in_fresh_thread",
    "memory_ceiling",
    "mutated",
    "only",
    "text",
    "varint",
]
