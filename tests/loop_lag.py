"""How late the event loop ran during a test, for bounds on when a real timer fired.

The client's timers (keepalive, send timeout, nack delay, ack timeout) share the session's
one event loop with the test's own work, the fault proxy and whatever earlier tests left
running, on a machine that may be busy. Where real time is the point (a real broker at
the other end), a bound on when a timer fired is its delay plus how late the loop
actually ran meanwhile, plus a fixed margin: it holds on a loaded machine without a slack
that would hide a late timer on a quiet one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class LoopLag:
    """The worst lateness of a timer ticking every ``period`` on the running loop."""

    def __init__(self, margin: float, period: float = 0.02) -> None:
        self.margin = margin
        self.period = period
        self.worst = 0.0
        self._loop = asyncio.get_running_loop()
        self._due = self._loop.time() + period
        self._timer = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        now = self._loop.time()
        self.worst = max(self.worst, now - self._due)
        self._due = now + self.period
        self._timer = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        self._timer.cancel()

    def allowance(self, timers: int = 1) -> float:
        """How late the last of ``timers`` timers armed one after the other may fire: the
        margin, plus the loop's worst lateness for each (a tick of this monitor fell due
        within a ``period`` of a client timer, so it was held up as long, less a period)."""
        return self.margin + timers * (self.worst + self.period)


@asynccontextmanager
async def measuring(margin: float) -> AsyncIterator[LoopLag]:
    """A LoopLag running for the block (a fixture's body)."""
    lag = LoopLag(margin)
    try:
        yield lag
    finally:
        lag.stop()
