"""Counting limits with FIFO waiters: pending messages per producer, bytes per client.

One class serves both the producer's ``max_pending_messages`` and the client-wide
``memory_limit`` (the Java client's Semaphore and MemoryLimitController): acquire N units,
release N units, and either fail fast or wait in line when the limit is reached.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Limit:
    """``capacity`` units shared by many holders; ``capacity == 0`` means unlimited.

    Waiters are served in arrival order, and ``try_acquire`` never jumps the line, so a
    stream of small requests cannot starve a large one.
    """

    __slots__ = ("_capacity", "_used", "_waiters")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self._capacity = capacity
        self._used = 0
        # (units, held, waiter): ``held`` units the waiter holds already (see acquire)
        self._waiters: deque[tuple[int, int, asyncio.Future[None]]] = deque()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def used(self) -> int:
        return self._used

    def try_acquire(self, units: int, held: int = 0) -> bool:
        """Take ``units`` now if they are free and nobody is waiting; never blocks.

        A request larger than the whole capacity passes when nothing is held (as in
        ``acquire``): otherwise it could never pass.
        """
        capacity, used = self._capacity, self._used
        if not capacity:
            self._used = used + units
            return True
        # _fits inline: two calls a message sent (pending messages, memory)
        if self._waiters or (used > held and used + units > capacity):
            return False
        self._used = used + units
        return True

    async def acquire(self, units: int, held: int = 0) -> None:
        """Take ``units``, waiting in line while the limit is reached.

        A request larger than the whole capacity waits until nothing else is held, so that
        one oversized item can still pass instead of waiting forever. ``held``: units the
        caller holds already for the same item (a chunked message's first permit), which
        do not count as held by others.
        """
        if self.try_acquire(units, held):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((units, held, waiter))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(units)  # granted just as we were cancelled: give it back
            else:
                self._wake()  # a cancelled head must not hold up those behind it
            raise

    def release(self, units: int) -> None:
        self._used -= units
        self._wake()

    def _fits(self, units: int, held: int) -> bool:
        return self._used <= held or self._used + units <= self._capacity

    def _wake(self) -> None:
        while self._waiters:
            units, held, waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            if not self._fits(units, held):
                return
            self._waiters.popleft()
            self._used += units
            waiter.set_result(None)
