"""``--rate``: at most N messages a second (a token bucket holding a tenth of a second's
worth, so an idle input earns no burst)."""

from __future__ import annotations

import asyncio


class RateLimit:
    def __init__(self, per_second: float) -> None:
        self._rate = per_second
        self._capacity = max(1.0, per_second / 10)
        self._tokens = 1.0
        self._loop = asyncio.get_running_loop()
        self._at = self._loop.time()

    def _refill(self) -> None:
        now = self._loop.time()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._rate)
        self._at = now

    async def take(self, wanted: int) -> int:
        """Wait until a message may go; how many may go now (1 to ``wanted``)."""
        self._refill()
        if self._tokens < 1:
            await asyncio.sleep((1 - self._tokens) / self._rate)
            self._refill()
        count = max(1, min(wanted, int(self._tokens)))
        self._tokens -= count
        return count
