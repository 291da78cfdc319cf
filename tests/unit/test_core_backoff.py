"""Backoff: reconnect delays that double up to a maximum, with up to 10% jitter, and the
RetrySignal that cuts the waits short."""

from __future__ import annotations

import asyncio
import random

import pytest

from msgclient.core.network.backoff import Backoff, RetrySignal


class FixedRandom(random.Random):
    """A Random whose random() always returns ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def test_delays_double_up_to_the_maximum_without_jitter() -> None:
    backoff = Backoff(0.1, 1.0, rng=FixedRandom(0.0))
    delays = [backoff.next() for _ in range(7)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_jitter_shortens_each_delay_by_at_most_ten_percent() -> None:
    backoff = Backoff(0.1, 1.0, rng=FixedRandom(0.999999))
    delays = [backoff.next() for _ in range(6)]
    nominal = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert delays == pytest.approx([d * 0.9 for d in nominal], rel=1e-5)


def test_jittered_delays_stay_within_ten_percent_of_the_nominal_delay() -> None:
    backoff = Backoff(0.05, 3.2, rng=random.Random(1234))
    nominal = 0.05
    seen: set[float] = set()
    for _ in range(200):
        delay = backoff.next()
        assert 0.9 * nominal <= delay <= nominal
        seen.add(round(delay / nominal, 6))
        nominal = min(nominal * 2, 3.2)
    assert len(seen) > 50  # the jitter really varies


def test_reset_starts_over_from_the_initial_delay() -> None:
    backoff = Backoff(0.1, 10.0, rng=FixedRandom(0.0))
    for _ in range(5):
        backoff.next()
    assert backoff.next() == pytest.approx(3.2)
    backoff.reset()
    assert [backoff.next() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.4])


def test_maximum_equal_to_initial_is_a_constant_delay() -> None:
    backoff = Backoff(0.5, 0.5, rng=FixedRandom(0.0))
    assert [backoff.next() for _ in range(3)] == pytest.approx([0.5, 0.5, 0.5])


@pytest.mark.parametrize(("initial", "maximum"), [(0, 1), (-1, 1), (2, 1)])
def test_bad_bounds_are_rejected(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError, match="0 < initial <= maximum"):
        Backoff(initial, maximum)


async def test_a_fired_signal_cuts_every_wait_short_and_starts_the_delays_over() -> None:
    signal = RetrySignal()
    backoffs = [Backoff(10.0, 60.0, random.Random(1), signal) for _ in range(3)]
    for backoff in backoffs:
        backoff.next()  # the next waits would be 18-20 s
    loop = asyncio.get_running_loop()
    started = loop.time()
    waits = [asyncio.ensure_future(backoff.wait()) for backoff in backoffs]
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waits)
    signal.fire()
    # Cut short: done within seconds (a loaded machine's margin), not after 18-20 s.
    await asyncio.wait_for(asyncio.gather(*waits), timeout=5)
    assert loop.time() - started < 5
    assert all(9.0 <= b.next() <= 10.0 for b in backoffs)  # from the initial delay again


async def test_wait_sleeps_the_delay_without_a_signal_or_when_it_does_not_fire() -> None:
    loop = asyncio.get_running_loop()
    for signal in (None, RetrySignal()):
        backoff = Backoff(0.05, 1.0, random.Random(2), signal)
        started = loop.time()
        await asyncio.wait_for(backoff.wait(), timeout=5)
        assert loop.time() - started >= 0.04  # 0.045-0.05 s, less the loop's clock slack


async def test_a_signal_fired_while_an_attempt_runs_makes_the_next_wait_none() -> None:
    """The attempt ran against the cluster the signal switched away from: it is made again
    at once, not after the delay it was due (the CI run where a producer reconnecting when
    the switch came waited out its 10 s backoff)."""
    signal = RetrySignal()
    backoff = Backoff(10.0, 60.0, FixedRandom(0.0), signal)
    assert backoff.next() == 10.0  # a first failure: the wait, then an attempt
    signal.fire()  # during that attempt: no waiter to wake
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(backoff.wait(), timeout=5)
    assert loop.time() - started < 1  # at once, not after 20 s
    assert [backoff.next(), backoff.next()] == [10.0, 20.0]  # then from the initial delay


async def test_a_signal_before_a_success_asks_for_no_retry() -> None:
    signal = RetrySignal()
    backoff = Backoff(0.1, 1.0, FixedRandom(0.0), signal)
    signal.fire()
    backoff.reset()  # an attempt succeeded after it
    assert backoff.next() == pytest.approx(0.1)
