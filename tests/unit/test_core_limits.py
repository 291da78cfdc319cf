"""Limit: counting units with FIFO waiters (max_pending_messages, memory_limit)."""

from __future__ import annotations

import asyncio

import pytest

from msgclient.core.send.limits import Limit

WAIT = 5.0  # seconds: no wait in these tests should come close, even on a loaded machine


async def settle() -> None:
    """Let every ready callback and task step run (waiters wake through call_soon)."""
    for _ in range(5):
        await asyncio.sleep(0)


def start_acquire(limit: Limit, units: int) -> asyncio.Task[None]:
    return asyncio.ensure_future(limit.acquire(units))


def test_try_acquire_takes_free_units_and_release_gives_them_back() -> None:
    limit = Limit(10)
    assert limit.try_acquire(4)
    assert limit.try_acquire(6)
    assert limit.used == 10
    assert not limit.try_acquire(1)
    assert limit.used == 10  # a refusal takes nothing
    limit.release(3)
    assert limit.used == 7
    assert limit.try_acquire(3)
    assert limit.used == 10


def test_capacity_zero_is_unlimited() -> None:
    limit = Limit(0)
    assert limit.try_acquire(10**9)
    assert limit.try_acquire(10**9)
    assert limit.used == 2 * 10**9  # still counted, for memory_used
    limit.release(2 * 10**9)
    assert limit.used == 0


async def test_capacity_zero_acquire_never_waits() -> None:
    limit = Limit(0)
    async with asyncio.timeout(WAIT):
        await limit.acquire(10**12)
    assert limit.used == 10**12


def test_negative_capacity_is_rejected() -> None:
    with pytest.raises(ValueError, match="capacity must be >= 0"):
        Limit(-1)


async def test_acquire_returns_at_once_when_free() -> None:
    limit = Limit(5)
    async with asyncio.timeout(WAIT):
        await limit.acquire(5)
    assert limit.used == 5


async def test_acquire_waits_for_release() -> None:
    limit = Limit(5)
    assert limit.try_acquire(5)
    waiter = start_acquire(limit, 2)
    await settle()
    assert not waiter.done()
    limit.release(1)  # 4 used + 2 > 5: still not enough
    await settle()
    assert not waiter.done()
    limit.release(1)
    async with asyncio.timeout(WAIT):
        await waiter
    assert limit.used == 5


async def test_waiters_are_served_in_arrival_order() -> None:
    limit = Limit(3)
    assert limit.try_acquire(3)
    order: list[str] = []

    async def take(name: str, units: int) -> None:
        await limit.acquire(units)
        order.append(name)

    tasks = [asyncio.ensure_future(take(n, u)) for n, u in (("a", 2), ("b", 1), ("c", 1))]
    await settle()
    limit.release(1)  # 1 free: "a" needs 2, and "b" must not pass it
    await settle()
    assert order == []
    limit.release(1)  # 2 free: "a"
    await settle()
    assert order == ["a"]
    limit.release(2)  # "b" and "c"
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*tasks)
    assert order == ["a", "b", "c"]


async def test_try_acquire_does_not_jump_the_line() -> None:
    limit = Limit(3)
    assert limit.try_acquire(3)
    big = start_acquire(limit, 3)
    await settle()
    limit.release(1)
    # One unit is free, but a waiter is first in line: a small request must not take it,
    # or a stream of small requests could starve the big one forever.
    assert not limit.try_acquire(1)
    assert limit.used == 2
    limit.release(2)
    async with asyncio.timeout(WAIT):
        await big
    assert limit.used == 3


async def test_acquire_does_not_jump_the_line_either() -> None:
    limit = Limit(2)
    assert limit.try_acquire(2)
    first = start_acquire(limit, 2)
    await settle()
    limit.release(1)
    second = start_acquire(limit, 1)  # one unit free, but "first" waits ahead
    await settle()
    assert not first.done() and not second.done()
    limit.release(1)
    async with asyncio.timeout(WAIT):
        await first
    assert not second.done()
    limit.release(2)
    async with asyncio.timeout(WAIT):
        await second
    assert limit.used == 1


async def test_cancelled_waiter_leaks_nothing_and_does_not_block_those_behind() -> None:
    limit = Limit(4)
    assert limit.try_acquire(4)
    head = start_acquire(limit, 4)
    behind = start_acquire(limit, 1)
    await settle()
    limit.release(1)  # 1 free: not enough for the head, and "behind" waits after it
    await settle()
    assert not behind.done()
    head.cancel()
    async with asyncio.timeout(WAIT):
        await behind  # the cancelled head no longer holds up the line
        with pytest.raises(asyncio.CancelledError):
            await head
    assert limit.used == 4  # 3 held + 1 for "behind"; the head took nothing


async def test_waiter_cancelled_after_being_granted_gives_its_units_back() -> None:
    limit = Limit(2)
    assert limit.try_acquire(2)
    waiter = start_acquire(limit, 2)
    await settle()
    limit.release(2)  # grants the waiter: the units are counted as its own now...
    assert limit.used == 2
    waiter.cancel()  # ...but it is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(WAIT):
            await waiter
    assert limit.used == 0
    assert limit.try_acquire(2)


async def test_cancelled_waiter_in_the_middle_is_skipped() -> None:
    limit = Limit(2)
    assert limit.try_acquire(2)
    first = start_acquire(limit, 1)
    middle = start_acquire(limit, 1)
    last = start_acquire(limit, 1)
    await settle()
    middle.cancel()
    await settle()
    limit.release(2)
    async with asyncio.timeout(WAIT):
        await asyncio.gather(first, last)
    assert middle.cancelled()
    assert limit.used == 2
    limit.release(2)
    assert limit.try_acquire(2)  # no cancelled waiter left in line to block it


async def test_oversized_request_waits_until_nothing_is_held_then_passes() -> None:
    limit = Limit(10)
    assert limit.try_acquire(4)
    oversized = start_acquire(limit, 25)
    await settle()
    assert not oversized.done()
    limit.release(4)
    async with asyncio.timeout(WAIT):
        await oversized
    assert limit.used == 25
    assert not limit.try_acquire(1)
    limit.release(25)
    assert limit.used == 0


async def test_oversized_request_passes_at_once_when_nothing_is_held() -> None:
    limit = Limit(10)
    async with asyncio.timeout(WAIT):
        await limit.acquire(25)
    assert limit.used == 25


def test_oversized_try_acquire_passes_only_when_nothing_is_held() -> None:
    limit = Limit(10)
    assert limit.try_acquire(25)
    assert not limit.try_acquire(1)
    limit.release(25)
    assert limit.try_acquire(1)
    assert not limit.try_acquire(25)


def test_units_held_by_the_requester_do_not_count_as_held_by_others() -> None:
    """A chunked message holds its first permit and asks for one a chunk more: with
    nothing else held it passes even over the capacity, as any oversized request."""
    limit = Limit(3)
    assert limit.try_acquire(1)  # the message's first permit
    assert not limit.try_acquire(4)  # held by another, it would have to wait
    assert limit.try_acquire(4, held=1)
    assert limit.used == 5


async def test_a_waiter_holding_units_passes_once_the_others_are_released() -> None:
    limit = Limit(3)
    assert limit.try_acquire(2)  # others
    assert limit.try_acquire(1)  # the requester's own
    more = asyncio.ensure_future(limit.acquire(4, held=1))
    await settle()
    assert not more.done()
    assert not limit.try_acquire(1)  # behind the waiter, in line
    limit.release(2)
    async with asyncio.timeout(WAIT):
        await more
    assert limit.used == 5
