"""TimingWheel: O(1) add and cancel, never early, one timer armed only while entries exist.

A fake clock drives it (``tests.unit.fakes.FakeScheduler``): time moves only when a test
says so, and the timers it passes run at their own time, in order.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
import time
from collections.abc import Callable

import pytest

from msgclient.core.timing_wheel import TimingWheel, wheel_size_for
from msgclient.errors import InvalidConfigurationError
from tests.unit.fakes import FakeScheduler

TICK = 0.1
EPSILON = 1e-9


class Recorder:
    """Callbacks that note when they ran, next to the deadline they were given."""

    def __init__(self, scheduler: FakeScheduler) -> None:
        self.scheduler = scheduler
        self.fired: list[tuple[str, float, float]] = []  # (name, deadline, fired at)

    def callback(self, name: str, delay: float) -> Callable[[], None]:
        deadline = self.scheduler.time() + delay
        return lambda: self.fired.append((name, deadline, self.scheduler.time()))

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.fired]


@pytest.fixture
def clock() -> FakeScheduler:
    return FakeScheduler()


def make_wheel(
    clock: FakeScheduler, size: int = 8, after_expiry: Callable[[], None] | None = None
) -> TimingWheel:
    return TimingWheel(TICK, size, scheduler=clock, after_expiry=after_expiry)


def test_fires_after_the_delay_and_not_before(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)
    wheel.add(0.35, recorder.callback("a", 0.35))
    clock.advance(0.349)
    assert recorder.fired == []
    clock.advance(0.2)
    [(_, deadline, fired_at)] = recorder.fired
    assert deadline <= fired_at < deadline + TICK + EPSILON
    assert len(wheel) == 0


def test_entries_due_in_the_same_tick_fire_together_then_after_expiry(
    clock: FakeScheduler,
) -> None:
    runs: list[list[str]] = []
    recorder = Recorder(clock)
    wheel = make_wheel(clock, after_expiry=lambda: runs.append(recorder.names[:]))
    for name, delay in [("a", 0.39), ("b", 0.31), ("c", 0.33), ("late", 0.41)]:
        wheel.add(delay, recorder.callback(name, delay))
    clock.advance(1.0)
    assert runs == [["a", "b", "c"], ["a", "b", "c", "late"]]  # in add order, per tick
    assert clock.wakeups == 2


def test_cancel_keeps_the_callback_from_running(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)
    kept = wheel.add(0.2, recorder.callback("kept", 0.2))
    cancelled = wheel.add(0.2, recorder.callback("cancelled", 0.2))
    assert cancelled.cancel() is True
    assert cancelled.cancel() is False
    assert len(wheel) == 1
    clock.advance(1.0)
    assert recorder.names == ["kept"]
    assert kept.cancel() is False  # after firing: a no-op
    assert recorder.names == ["kept"]


def test_one_timer_armed_only_while_entries_exist(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    assert clock.armed == 0
    first = wheel.add(0.5, lambda: None)
    second = wheel.add(0.2, lambda: None)
    assert clock.armed == 1
    first.cancel()
    second.cancel()
    assert clock.armed == 0  # all cancelled: disarmed
    wheel.add(0.3, lambda: None)
    clock.advance(1.0)
    assert clock.armed == 0  # all fired: nothing ticks while idle
    clock.advance(100.0)
    assert clock.wakeups == 1


def test_empty_ticks_are_skipped(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock, size=512)
    recorder = Recorder(clock)
    wheel.add(10.0, recorder.callback("a", 10.0))
    wheel.add(20.0, recorder.callback("b", 20.0))
    clock.advance(30.0)
    assert recorder.names == ["a", "b"]
    assert clock.wakeups == 2  # not 200 ticks


def test_delays_longer_than_a_revolution_wait_their_rounds(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock, size=8)  # one revolution: 0.8 s
    recorder = Recorder(clock)
    # Same bucket, three different rounds.
    for name, delay in [("round0", 0.3), ("round1", 1.1), ("round5", 4.3)]:
        wheel.add(delay, recorder.callback(name, delay))
    clock.advance(1.0)
    assert recorder.names == ["round0"]
    clock.advance(3.2)
    assert recorder.names == ["round0", "round1"]
    clock.advance(1.0)
    assert recorder.names == ["round0", "round1", "round5"]
    for _, deadline, fired_at in recorder.fired:
        assert deadline <= fired_at < deadline + TICK + EPSILON


def test_a_late_timer_fires_every_missed_tick_at_once(clock: FakeScheduler) -> None:
    runs: list[int] = []
    recorder = Recorder(clock)
    wheel = make_wheel(clock, size=4, after_expiry=lambda: runs.append(len(recorder.fired)))
    for name, delay in [("a", 0.15), ("b", 0.45), ("c", 1.0), ("d", 3.0)]:
        wheel.add(delay, recorder.callback(name, delay))
    clock.stall(2.0)  # the loop was blocked past several revolutions
    clock.advance(0.0)
    assert recorder.names == ["a", "b", "c"]
    assert runs == [3]
    clock.advance(2.0)
    assert recorder.names == ["a", "b", "c", "d"]
    for _, deadline, fired_at in recorder.fired:
        assert fired_at >= deadline


def test_callbacks_may_add_entries(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)

    def again(round_: int) -> None:
        recorder.callback(f"round{round_}", 0.0)()
        if round_ < 5:
            wheel.add(0.25, lambda: again(round_ + 1))
        if round_ == 0:
            wheel.add(0.0, recorder.callback("zero delay", 0.0))

    wheel.add(0.25, lambda: again(0))
    clock.advance(0.35)
    assert recorder.names == ["round0"]  # a zero delay still waits for the next tick
    clock.advance(10.0)
    assert recorder.names == ["round0", "zero delay", *(f"round{i}" for i in range(1, 6))]
    fired_at = [at for name, _, at in recorder.fired if name.startswith("round")]
    assert all(b - a >= 0.25 for a, b in itertools.pairwise(fired_at))
    assert clock.armed == 0


def test_a_callback_may_cancel_an_entry_due_in_the_same_run(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)
    cancelled: list[bool] = []
    wheel.add(0.2, lambda: cancelled.append(second.cancel()))
    second = wheel.add(0.2, recorder.callback("second", 0.2))
    clock.advance(1.0)
    assert cancelled == [True]
    assert recorder.fired == []


def test_a_failing_callback_does_not_stop_the_others(
    clock: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)

    def fail() -> None:
        raise RuntimeError("boom")

    wheel.add(0.2, fail)
    wheel.add(0.2, recorder.callback("after", 0.2))
    with caplog.at_level(logging.ERROR):
        clock.advance(1.0)
    assert recorder.names == ["after"]
    assert "timing wheel callback failed" in caplog.text


def test_clear_cancels_everything(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)
    handle = wheel.add(0.2, recorder.callback("a", 0.2))
    wheel.add(5.0, recorder.callback("b", 5.0))
    wheel.clear()
    assert len(wheel) == 0
    assert clock.armed == 0
    assert handle.cancel() is False
    clock.advance(10.0)
    assert recorder.fired == []


def test_clear_from_a_callback_stops_the_rest_of_its_run(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock)
    recorder = Recorder(clock)
    wheel.add(0.2, wheel.clear)
    wheel.add(0.2, recorder.callback("same tick", 0.2))
    wheel.add(0.5, recorder.callback("later", 0.5))
    clock.advance(1.0)
    assert recorder.fired == []
    assert clock.armed == 0


def test_100k_entries_added_and_half_cancelled(clock: FakeScheduler) -> None:
    rng = random.Random(7)
    wheel = make_wheel(clock, size=512)
    fired: list[tuple[int, float, float]] = []

    def note(i: int, deadline: float) -> None:
        fired.append((i, deadline, clock.now))

    started = time.perf_counter()
    handles = []
    for i in range(100_000):
        delay = rng.uniform(0.0, 120.0)  # beyond the 51.2 s revolution too
        handles.append(wheel.add(delay, functools.partial(note, i, clock.time() + delay)))
    added = time.perf_counter()
    assert all(handle.cancel() for handle in handles[::2])
    cancelled = time.perf_counter()
    assert len(wheel) == 50_000
    clock.advance(130.0)
    expired = time.perf_counter()
    print(
        f"100k adds {added - started:.3f}s, 50k cancels {cancelled - added:.3f}s, "
        f"50k expiries {expired - cancelled:.3f}s, {clock.wakeups} timer wakeups"
    )
    assert sorted(i for i, _, _ in fired) == list(range(1, 100_000, 2))
    assert all(deadline <= at < deadline + TICK + EPSILON for _, deadline, at in fired)
    assert len(wheel) == 0
    assert clock.armed == 0
    assert clock.wakeups <= 1300  # at most once per tick that had something due


def test_100k_entries_added_and_all_cancelled_leave_nothing(clock: FakeScheduler) -> None:
    wheel = make_wheel(clock, size=512)
    handles = [wheel.add(float(i % 600), lambda: None) for i in range(100_000)]
    for handle in handles:
        handle.cancel()
    assert len(wheel) == 0
    assert clock.armed == 0
    clock.advance(700.0)
    assert clock.wakeups == 0


async def test_runs_on_the_event_loop_by_default() -> None:
    loop = asyncio.get_running_loop()
    fired = asyncio.Event()
    wheel = TimingWheel(tick=0.01, wheel_size=16)
    deadline = loop.time() + 0.03
    wheel.add(0.03, fired.set)
    async with asyncio.timeout(1.0):
        await fired.wait()
    assert loop.time() >= deadline
    assert len(wheel) == 0


def test_wheel_size_covers_a_span_in_one_revolution() -> None:
    assert wheel_size_for(60.0, 0.1) == 601
    assert wheel_size_for(1.0, 1.0) == 2


@pytest.mark.parametrize(("tick", "size"), [(0.0, 8), (-1.0, 8), (0.1, 0)])
def test_rejects_bad_configuration(clock: FakeScheduler, tick: float, size: int) -> None:
    with pytest.raises(InvalidConfigurationError):
        TimingWheel(tick, size, scheduler=clock)
