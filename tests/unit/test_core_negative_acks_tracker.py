"""NegativeAcksTracker and MultiplierRedeliveryBackoff, on a fake clock."""

from __future__ import annotations

import pytest

from msgclient.core.receive.negative_acks_tracker import (
    DEFAULT_NEGATIVE_ACK_REDELIVERY_DELAY,
    MIN_NACK_DELAY,
    NegativeAcksTracker,
)
from msgclient.errors import InvalidConfigurationError
from msgclient.redelivery_backoff import MultiplierRedeliveryBackoff
from tests.unit.fakes import EntryId, FakeScheduler, Redeliveries


@pytest.fixture
def clock() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def redeliveries(clock: FakeScheduler) -> Redeliveries:
    return Redeliveries(clock)


def test_redelivered_after_the_delay_and_not_before(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    tracker = NegativeAcksTracker(redeliveries, 1.0, scheduler=clock)
    tracker.add(EntryId(1, 1))
    assert len(tracker) == 1
    clock.advance(0.999)
    assert redeliveries.calls == []
    clock.advance(0.2)
    [(at, message_ids)] = redeliveries.calls
    assert message_ids == [EntryId(1, 1)]
    assert 1.0 <= at < 1.0 + MIN_NACK_DELAY + 1e-9
    assert len(tracker) == 0
    assert clock.armed == 0


def test_default_delay_is_one_minute(clock: FakeScheduler, redeliveries: Redeliveries) -> None:
    assert DEFAULT_NEGATIVE_ACK_REDELIVERY_DELAY == 60.0
    tracker = NegativeAcksTracker(redeliveries, scheduler=clock)
    tracker.add(EntryId(1, 1))
    clock.advance(59.99)
    assert redeliveries.calls == []
    clock.advance(0.2)
    assert redeliveries.ids == [[EntryId(1, 1)]]


def test_ids_due_in_the_same_tick_go_in_one_call(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    tracker = NegativeAcksTracker(redeliveries, 1.0, scheduler=clock)
    for entry in reversed(range(100)):
        tracker.add(EntryId(1, entry))
    clock.advance(0.5)
    tracker.add(EntryId(2, 0))
    clock.advance(2.0)
    assert redeliveries.ids == [[EntryId(1, entry) for entry in range(100)], [EntryId(2, 0)]]


def test_nacking_an_id_again_keeps_one_entry_with_the_new_deadline(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    tracker = NegativeAcksTracker(redeliveries, 1.0, scheduler=clock)
    tracker.add(EntryId(1, 1))
    clock.advance(0.5)
    tracker.add(EntryId(1, 1))
    assert len(tracker) == 1
    clock.advance(0.8)
    assert redeliveries.calls == []
    clock.advance(0.5)
    assert redeliveries.ids == [[EntryId(1, 1)]]


def test_backoff_grows_the_delay_with_the_redelivery_count(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    backoff = MultiplierRedeliveryBackoff(min_delay=1.0, max_delay=10.0)
    tracker = NegativeAcksTracker(redeliveries, backoff=backoff, scheduler=clock)
    for count, expected_delay in [(0, 1.0), (1, 2.0), (3, 8.0), (10, 10.0)]:
        tracker.add(EntryId(1, count), redelivery_count=count)
        clock.advance(expected_delay - 0.01)
        assert redeliveries.calls == [], count
        clock.advance(0.2)
        assert redeliveries.ids == [[EntryId(1, count)]], count
        redeliveries.calls.clear()


def test_delays_below_the_minimum_are_raised_to_it(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    tracker = NegativeAcksTracker(redeliveries, 0.0, scheduler=clock)
    tracker.add(EntryId(1, 1))
    no_backoff = MultiplierRedeliveryBackoff(min_delay=0.0, max_delay=0.0)
    with_backoff = NegativeAcksTracker(redeliveries, backoff=no_backoff, scheduler=clock)
    with_backoff.add(EntryId(1, 2))
    clock.advance(MIN_NACK_DELAY - 0.01)
    assert redeliveries.calls == []
    clock.advance(0.2)
    assert redeliveries.ids == [[EntryId(1, 1)], [EntryId(1, 2)]]


def test_negative_delay_is_rejected(clock: FakeScheduler, redeliveries: Redeliveries) -> None:
    with pytest.raises(InvalidConfigurationError):
        NegativeAcksTracker(redeliveries, -1.0, scheduler=clock)


def test_close_cancels_every_redelivery(clock: FakeScheduler, redeliveries: Redeliveries) -> None:
    tracker = NegativeAcksTracker(redeliveries, 1.0, scheduler=clock)
    tracker.add(EntryId(1, 1))
    tracker.add(EntryId(1, 2))
    tracker.close()
    assert len(tracker) == 0
    assert clock.armed == 0
    clock.advance(10.0)
    assert redeliveries.calls == []


# -- MultiplierRedeliveryBackoff ---------------------------------------------------------


def test_backoff_defaults_are_the_java_builders() -> None:
    backoff = MultiplierRedeliveryBackoff()
    assert (backoff.min_delay, backoff.max_delay, backoff.multiplier) == (10.0, 600.0, 2.0)


def test_backoff_multiplies_up_to_the_maximum() -> None:
    backoff = MultiplierRedeliveryBackoff(min_delay=1.0, max_delay=600.0)
    assert [backoff.next(count) for count in (-1, 0, 1, 4, 100, 10**9)] == [
        1.0,
        1.0,
        2.0,
        16.0,
        600.0,
        600.0,  # no float overflow for absurd counts
    ]
    five = MultiplierRedeliveryBackoff(min_delay=2.0, max_delay=6000.0, multiplier=5.0)
    assert [five.next(count) for count in (0, 1, 4, 6)] == [2.0, 10.0, 1250.0, 6000.0]


@pytest.mark.parametrize(
    ("min_delay", "max_delay", "multiplier"), [(-1.0, 1.0, 2.0), (2.0, 1.0, 2.0), (1.0, 2.0, 1.0)]
)
def test_backoff_rejects_bad_configuration(
    min_delay: float, max_delay: float, multiplier: float
) -> None:
    with pytest.raises(InvalidConfigurationError):
        MultiplierRedeliveryBackoff(min_delay, max_delay, multiplier)
