"""Fakes shared by the unit tests: a clock the test moves, a message id, a redeliver hook."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from msgclient.message import MessageId


class FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    """A ``Scheduler`` whose clock moves only in ``advance`` and ``stall``."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.wakeups = 0  # timers run so far
        self._timers: list[tuple[float, int, FakeTimer]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object]) -> FakeTimer:
        timer = FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    @property
    def armed(self) -> int:
        """Timers scheduled and not cancelled."""
        return sum(not timer.cancelled for _, _, timer in self._timers)

    def advance(self, seconds: float) -> None:
        """Move the clock on, running each timer due on the way at its own time."""
        target = self.now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self.now = max(self.now, when)
                self.wakeups += 1
                timer.callback()
        self.now = target

    def stall(self, seconds: float) -> None:
        """Move the clock on without running timers, as a blocked event loop would."""
        self.now += seconds


class EntryId(MessageId):
    __slots__ = ("entry", "ledger")

    def __init__(self, ledger: int, entry: int) -> None:
        self.ledger = ledger
        self.entry = entry

    def serialize(self) -> bytes:
        return f"{self.ledger}:{self.entry}".encode()

    def _sort_key(self) -> tuple[int, ...]:
        return (self.ledger, self.entry)

    def __repr__(self) -> str:
        return f"EntryId({self.ledger}, {self.entry})"


class Redeliveries:
    """The ``redeliver`` callback: each call's ids, and the time of the call."""

    def __init__(self, clock: FakeScheduler) -> None:
        self.clock = clock
        self.calls: list[tuple[float, list[MessageId]]] = []

    def __call__(self, message_ids: list[MessageId]) -> None:
        self.calls.append((self.clock.time(), message_ids))

    @property
    def ids(self) -> list[list[MessageId]]:
        return [message_ids for _, message_ids in self.calls]
