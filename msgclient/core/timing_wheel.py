"""A hashed timing wheel: many timeouts for the price of one event-loop timer.

The consumer-side trackers schedule one timeout per message (ack timeout, negative-ack
delay). A heap-based ``loop.call_at`` per message costs O(log n) per add and keeps every
cancelled handle in the heap until its time comes; a wheel costs O(1) to add and to cancel,
and groups the timeouts that fall in the same tick, so a tracker sends one command per tick
instead of one per message.

Why a single hashed wheel and not a hierarchical one (Kafka's): the trackers' delays span
one to a few revolutions when the wheel is sized for them (``wheel_size_for``), so an entry
is looked at once, twice at most; the hierarchical wheel's cascades would add work for
delays we do not have. Longer delays stay correct: each entry keeps its absolute deadline
tick, and a bucket's visit fires only the entries whose deadline tick has come (the rest
wait for a later revolution: the "rounds" of Netty's HashedWheelTimer, kept as a deadline
so that skipped or late ticks cannot miscount them).

The wheel ticks only when it has to: its one timer is armed for the next tick whose bucket
holds entries (never while the wheel is empty), and a late timer processes every tick it
missed. Time comes from a ``Scheduler``; the event loop is one, a test passes a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Protocol

from msgclient.errors import InvalidConfigurationError

log = logging.getLogger(__name__)

# Netty HashedWheelTimer's defaults (tickDuration 100 ms, ticksPerWheel 512).
DEFAULT_TICK = 0.1
DEFAULT_WHEEL_SIZE = 512


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """A clock and a one-shot timer on it; ``asyncio.AbstractEventLoop`` is one."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Cancellable: ...


def wheel_size_for(span: float, tick: float) -> int:
    """The number of buckets that lets a delay of ``span`` fire within one revolution."""
    return math.ceil(span / tick) + 1


class Timeout:
    """The handle ``TimingWheel.add`` returns (Netty's Timeout)."""

    __slots__ = ("_bucket", "_callback", "_wheel", "deadline_tick")

    def __init__(
        self,
        wheel: TimingWheel,
        bucket: dict[Timeout, None],
        deadline_tick: int,
        callback: Callable[[], None],
    ) -> None:
        self._wheel = wheel
        # None once the entry left its bucket: it is due (callback set) or done (callback None).
        self._bucket: dict[Timeout, None] | None = bucket
        self._callback: Callable[[], None] | None = callback
        self.deadline_tick = deadline_tick

    def cancel(self) -> bool:
        """Keep the callback from running; False if it already ran or was cancelled."""
        if self._callback is None:
            return False
        self._callback = None
        if self._bucket is not None:
            self._wheel._remove(self, self._bucket)
            self._bucket = None
        return True


class TimingWheel:
    """Timeouts in ``wheel_size`` buckets of ``tick`` seconds (Netty's HashedWheelTimer).

    A callback runs at the first tick at or after its deadline: never early, at most one
    tick late (plus the event loop's own lateness). The callbacks due at the same timer run
    are called one after the other, then ``after_expiry`` once, so that an owner can send
    what its callbacks collected as one command.
    """

    def __init__(
        self,
        tick: float = DEFAULT_TICK,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        *,
        scheduler: Scheduler | None = None,
        after_expiry: Callable[[], None] | None = None,
    ) -> None:
        if tick <= 0:
            raise InvalidConfigurationError(f"timing wheel tick must be > 0, got {tick}")
        if wheel_size < 1:
            raise InvalidConfigurationError(f"timing wheel size must be >= 1, got {wheel_size}")
        self._tick = tick
        self._size = wheel_size
        self._scheduler: Scheduler = scheduler or asyncio.get_running_loop()
        self._after_expiry = after_expiry
        self._origin = self._scheduler.time()  # the time of tick 0
        self._cursor = 0  # the last tick processed
        # Only buckets holding entries exist: an idle wheel costs no memory per bucket.
        # A dict per bucket is an insertion-ordered set: O(1) removal, callbacks in add order.
        self._buckets: dict[int, dict[Timeout, None]] = {}
        self._count = 0
        self._firing: list[Timeout] = []  # the due entries of the run in progress
        self._timer: Cancellable | None = None
        self._timer_tick = 0

    def __len__(self) -> int:
        return self._count

    def add(self, delay: float, callback: Callable[[], None]) -> Timeout:
        """Call ``callback`` once ``delay`` seconds have passed; cancel it with the handle."""
        now = self._scheduler.time()
        if self._count == 0:
            self._cursor = self._tick_at_or_before(now)  # idle ticks have nothing to process
        deadline_tick = max(self._tick_at_or_after(now + max(delay, 0.0)), self._cursor + 1)
        index = deadline_tick % self._size
        bucket = self._buckets.get(index)
        if bucket is None:
            bucket = self._buckets[index] = {}
        timeout = Timeout(self, bucket, deadline_tick, callback)
        bucket[timeout] = None
        self._count += 1
        if self._timer is None or deadline_tick < self._timer_tick:
            self._arm(deadline_tick)
        return timeout

    def clear(self) -> None:
        """Cancel every timeout (their handles' ``cancel`` then returns False)."""
        for bucket in self._buckets.values():
            for timeout in bucket:
                timeout._bucket = timeout._callback = None
        for timeout in self._firing:  # called from a callback: the rest of its run too
            timeout._callback = None
        self._buckets.clear()
        self._count = 0
        self._disarm()

    # -- internals ------------------------------------------------------------------------

    def _remove(self, timeout: Timeout, bucket: dict[Timeout, None]) -> None:
        del bucket[timeout]
        if not bucket:
            del self._buckets[timeout.deadline_tick % self._size]
        self._count -= 1
        if self._count == 0:
            self._disarm()

    def _tick_time(self, tick: int) -> float:
        return self._origin + tick * self._tick

    def _tick_at_or_after(self, when: float) -> int:
        tick = math.ceil((when - self._origin) / self._tick)
        # The division may round either way; settle on the tick whose own time says so.
        while self._tick_time(tick - 1) >= when:
            tick -= 1
        while self._tick_time(tick) < when:
            tick += 1
        return tick

    def _tick_at_or_before(self, when: float) -> int:
        tick = math.floor((when - self._origin) / self._tick)
        while self._tick_time(tick + 1) <= when:
            tick += 1
        while self._tick_time(tick) > when:
            tick -= 1
        return tick

    def _arm(self, tick: int) -> None:
        self._disarm()
        self._timer = self._scheduler.call_at(self._tick_time(tick), self._on_timer)
        self._timer_tick = tick

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _next_busy_tick(self) -> int:
        # Each index is one tick within the next revolution; a revolution visits them all.
        for tick in range(self._cursor + 1, self._cursor + self._size + 1):
            if tick % self._size in self._buckets:
                return tick
        raise AssertionError("a non-empty wheel has a non-empty bucket")

    def _on_timer(self) -> None:
        self._timer = None
        # From the clock, not the armed tick: a timer that ran early must not fire anything.
        now_tick = self._tick_at_or_before(self._scheduler.time())
        due: list[Timeout] = []
        # The ticks missed since the last run, at most one revolution: that visits each bucket.
        for tick in range(max(self._cursor + 1, now_tick - self._size + 1), now_tick + 1):
            bucket = self._buckets.get(tick % self._size)
            if bucket:
                expired = [t for t in bucket if t.deadline_tick <= now_tick]
                for timeout in expired:
                    del bucket[timeout]
                    timeout._bucket = None
                if not bucket:
                    del self._buckets[tick % self._size]
                due.extend(expired)
        # A late run visits buckets from the middle of a revolution: restore deadline order
        # (a stable sort, so add order within a tick; linear when only one tick was due).
        due.sort(key=_deadline_tick)
        self._cursor = max(self._cursor, now_tick)
        self._count -= len(due)
        # Armed before the callbacks run, so that what they add compares with a live timer.
        if self._count:
            self._arm(self._next_busy_tick())
        fired = False
        self._firing = due
        for timeout in due:
            callback = timeout._callback
            if callback is not None:  # an earlier callback of this run may have cancelled it
                timeout._callback = None
                fired = True
                _run(callback)
        self._firing = []
        if fired and self._after_expiry is not None:
            _run(self._after_expiry)


def _deadline_tick(timeout: Timeout) -> int:
    return timeout.deadline_tick


def _run(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # one owner's failure must not keep the other timeouts from firing
        log.exception("timing wheel callback failed")
