"""Exponential backoff with jitter for reconnects (the Java client's Backoff), and the
signal that cuts every wait short when retrying at once is worth it (a cluster switch)."""

from __future__ import annotations

import asyncio
import random

DEFAULT_INITIAL_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 60.0


class RetrySignal:
    """Wakes every ``Backoff.wait`` of a client at once, and starts their delays over: after
    a switch to another cluster, what was failing against the old one tries the new one now
    rather than when its backoff (up to a minute) runs out."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()
        self.generation = 0  # how many times it fired

    def fire(self) -> None:
        self.generation += 1
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def sleep(self, delay: float) -> None:
        """``delay`` seconds, or until ``fire``."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(delay, _wake, waiter)
        self._waiters.add(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiters.discard(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_JITTER = random.Random()


class Backoff:
    """Delays that double from ``initial`` up to ``maximum``, each shortened by up to 10%.

    The jitter keeps many clients that lost the same broker from reconnecting in lockstep.
    With a ``signal``, ``wait`` ends early when it fires, and the delays start over; if it
    fired between two waits (while an attempt ran, against the old cluster), the next
    delay is none: the attempt is made again at once.
    """

    def __init__(
        self,
        initial: float = DEFAULT_INITIAL_BACKOFF,
        maximum: float = DEFAULT_MAX_BACKOFF,
        rng: random.Random | None = None,
        signal: RetrySignal | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 < initial <= maximum, got {initial}, {maximum}")
        self._initial = initial
        self._maximum = maximum
        self._next = initial
        # One generator for all: seeding one from system entropy per Backoff cost more than
        # the requests that make one (a transaction makes three).
        self._random = rng or _JITTER
        self._signal = signal
        self._generation = 0 if signal is None else signal.generation

    def next(self) -> float:
        """The delay before the next attempt; each call doubles the following one."""
        if self._started_over():
            return 0.0  # fired since the last attempt: that one is made again at once
        delay = self._next
        self._next = min(self._next * 2, self._maximum)
        return delay - delay * 0.1 * self._random.random()

    def reset(self) -> None:
        """Start over from ``initial`` (after a successful attempt)."""
        self._next = self._initial
        self._started_over()  # a signal before the success asks for no retry

    async def wait(self, delay: float | None = None) -> None:
        """Sleep ``delay`` (by default the next delay), cut short if the signal fires."""
        if delay is None:
            delay = self.next()
        if self._signal is None:
            await asyncio.sleep(delay)
        elif delay > 0:
            await self._signal.sleep(delay)
            self._started_over()  # if cut short by the signal, the delays start over

    def _started_over(self) -> bool:
        """If the signal fired since this was last asked: note it, start the delays over
        from ``initial``, and answer True."""
        if self._signal is None or self._generation == self._signal.generation:
            return False
        self._generation = self._signal.generation
        self._next = self._initial
        return True
