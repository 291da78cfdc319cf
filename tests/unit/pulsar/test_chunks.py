"""ChunkAssembler (sans-IO): reassembly, interleaving, duplicates, bounds and expiry."""

from __future__ import annotations

import pytest

from msgclient.errors import MalformedFrameError
from protocols.pulsarwire.chunks import Assembled, ChunkAssembler
from protocols.pulsarwire.message_id import PulsarMessageId


class Recorder:
    def __init__(self) -> None:
        self.discarded: list[tuple[list[int], bool]] = []

    def __call__(self, ids: list[PulsarMessageId], expired: bool) -> None:
        self.discarded.append(([i.entry_id for i in ids], expired))


def make(max_pending: int = 10, expire_ms: int = 1000) -> tuple[ChunkAssembler[str], Recorder]:
    recorder = Recorder()
    return ChunkAssembler(max_pending, expire_ms, recorder), recorder


def chunk(
    assembler: ChunkAssembler[str],
    uuid: str,
    index: int,
    count: int,
    entry: int,
    now: float = 0,
) -> Assembled[str] | None:
    data = b"%s%d," % (uuid.encode(), index)
    return assembler.add(uuid, index, count, 3 * count, data, PulsarMessageId(0, entry), now)


def test_chunks_in_order_make_the_message() -> None:
    assembler, recorder = make()
    assert chunk(assembler, "a", 0, 3, 10) is None
    assert chunk(assembler, "a", 1, 3, 11) is None
    done = chunk(assembler, "a", 2, 3, 12)
    assert done is not None
    payload, ids, notes = done
    assert payload == b"a0,a1,a2,"
    assert [i.entry_id for i in ids] == [10, 11, 12]
    assert notes == [None, None, None]
    assert len(assembler) == 0 and recorder.discarded == []


def test_interleaved_messages() -> None:
    assembler, _ = make()
    assert chunk(assembler, "a", 0, 2, 1) is None
    assert chunk(assembler, "b", 0, 3, 2) is None
    assert chunk(assembler, "b", 1, 3, 3) is None
    a = chunk(assembler, "a", 1, 2, 4)
    b = chunk(assembler, "b", 2, 3, 5)
    assert a is not None and a[0] == b"a0,a1,"
    assert b is not None and b[0] == b"b0,b1,b2,"


def test_a_duplicate_chunk_is_ignored() -> None:
    assembler, recorder = make()
    chunk(assembler, "a", 0, 3, 1)
    chunk(assembler, "a", 1, 3, 2)
    assert chunk(assembler, "a", 1, 3, 2) is None  # redelivered
    assert chunk(assembler, "a", 0, 3, 1) is None
    done = chunk(assembler, "a", 2, 3, 3)
    assert done is not None and done[0] == b"a0,a1,a2,"
    assert recorder.discarded == []


def test_a_gap_discards_the_message_so_far() -> None:
    assembler, recorder = make()
    chunk(assembler, "a", 0, 4, 1)
    assert chunk(assembler, "a", 2, 4, 3) is None  # chunk 1 never came
    assert recorder.discarded == [([1, 3], False)]
    assert len(assembler) == 0


def test_a_chunk_without_its_start_is_discarded() -> None:
    assembler, recorder = make()
    assert chunk(assembler, "a", 1, 2, 7) is None
    assert recorder.discarded == [([7], False)]


def test_beyond_max_pending_the_oldest_goes() -> None:
    assembler, recorder = make(max_pending=2)
    chunk(assembler, "a", 0, 2, 1)
    chunk(assembler, "b", 0, 2, 2)
    chunk(assembler, "c", 0, 2, 3)
    assert recorder.discarded == [([1], False)]
    assert len(assembler) == 2
    assert chunk(assembler, "b", 1, 2, 4) is not None
    assert chunk(assembler, "c", 1, 2, 5) is not None


def test_zero_max_pending_is_unbounded() -> None:
    assembler, recorder = make(max_pending=0)
    for i in range(100):
        chunk(assembler, f"m{i}", 0, 2, i)
    assert len(assembler) == 100 and recorder.discarded == []


def test_expiry_drops_the_old_incomplete_ones() -> None:
    assembler, recorder = make(expire_ms=1000)
    chunk(assembler, "a", 0, 2, 1, now=0.0)
    chunk(assembler, "b", 0, 2, 2, now=0.5)
    assembler.expire(0.9)
    assert recorder.discarded == []
    assembler.expire(1.2)
    assert recorder.discarded == [([1], True)]
    assert len(assembler) == 1
    assembler.expire(1.5)
    assert recorder.discarded == [([1], True), ([2], True)]


def test_no_expiry_when_zero() -> None:
    assembler, recorder = make(expire_ms=0)
    chunk(assembler, "a", 0, 2, 1, now=0.0)
    assembler.expire(1e9)
    assert len(assembler) == 1 and recorder.discarded == []


def test_inconsistent_chunks_are_refused() -> None:
    assembler, _ = make()
    with pytest.raises(MalformedFrameError):
        chunk(assembler, "a", 3, 3, 1)
    chunk(assembler, "a", 0, 3, 1)
    with pytest.raises(MalformedFrameError):  # the count changed
        chunk(assembler, "a", 1, 4, 2)
    assert len(assembler) == 0


def test_more_bytes_than_declared_are_refused() -> None:
    assembler, _ = make()
    assembler.add("b", 0, 2, 4, b"123", PulsarMessageId(0, 1), 0)
    with pytest.raises(MalformedFrameError):
        assembler.add("b", 1, 2, 4, b"45", PulsarMessageId(0, 2), 0)


def test_notes_come_back_with_the_whole_and_size_counts_instead_of_the_bytes() -> None:
    """The consumer's note per chunk (how a chunk kept encrypted was encrypted) comes back
    in chunk order; such a chunk counts its plaintext size toward the declared total, not
    its bytes (which hold the cipher's tag too)."""
    assembler, _ = make()
    assert assembler.add("c", 0, 2, 4, b"12+tag", PulsarMessageId(0, 1), 0, "iv0", 2) is None
    done = assembler.add("c", 1, 2, 4, b"34", PulsarMessageId(0, 2), 0)
    assert done is not None
    assert done.payload == b"12+tag34" and done.notes == ["iv0", None]
    assembler.add("d", 0, 2, 4, b"12+tag", PulsarMessageId(0, 3), 0, "iv0", 2)
    with pytest.raises(MalformedFrameError):  # 2 + 3 bytes of 4
        assembler.add("d", 1, 2, 4, b"345+tag", PulsarMessageId(0, 4), 0, "iv1", 3)


def test_clear_forgets_everything() -> None:
    assembler, recorder = make()
    chunk(assembler, "a", 0, 2, 1)
    assembler.clear()
    assert len(assembler) == 0 and recorder.discarded == []
