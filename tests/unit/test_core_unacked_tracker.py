"""UnAckedMessageTracker (ack timeout), on a fake clock."""

from __future__ import annotations

import pytest

from msgclient.core.receive.unacked_tracker import UnAckedMessageTracker
from msgclient.errors import InvalidConfigurationError
from msgclient.redelivery_backoff import MultiplierRedeliveryBackoff
from tests.unit.fakes import EntryId, FakeScheduler, Redeliveries

ACK_TIMEOUT = 2.0
TICK_TIME = 1.0


@pytest.fixture
def clock() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def redeliveries(clock: FakeScheduler) -> Redeliveries:
    return Redeliveries(clock)


@pytest.fixture
def tracker(clock: FakeScheduler, redeliveries: Redeliveries) -> UnAckedMessageTracker:
    return UnAckedMessageTracker(redeliveries, ACK_TIMEOUT, TICK_TIME, scheduler=clock)


def test_unacked_ids_are_redelivered_after_the_timeout_and_not_before(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    clock.advance(0.3)
    assert tracker.add(EntryId(1, 1))
    clock.advance(ACK_TIMEOUT - 0.01)
    assert redeliveries.calls == []
    clock.advance(TICK_TIME)
    [(at, message_ids)] = redeliveries.calls
    assert message_ids == [EntryId(1, 1)]
    assert 0.3 + ACK_TIMEOUT <= at < 0.3 + ACK_TIMEOUT + TICK_TIME
    assert EntryId(1, 1) not in tracker  # redelivered: tracked again when received again
    assert clock.armed == 0


def test_one_redeliver_call_per_tick(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    clock.advance(0.1)
    for entry in range(10_000):
        tracker.add(EntryId(1, entry))
        if entry % 2_500 == 0:
            clock.advance(0.2)  # added over 0.8 s, all between two ticks
    clock.advance(1.5)
    tracker.add(EntryId(2, 0))
    clock.advance(5.0)
    assert [len(message_ids) for message_ids in redeliveries.ids] == [10_000, 1]
    assert redeliveries.ids[0] == [EntryId(1, entry) for entry in range(10_000)]


def test_acked_ids_are_not_redelivered(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    tracker.add(EntryId(1, 1))
    tracker.add(EntryId(1, 2))
    assert tracker.remove(EntryId(1, 1))
    assert not tracker.remove(EntryId(1, 1))
    assert not tracker.remove(EntryId(1, 99))
    clock.advance(10.0)
    assert redeliveries.ids == [[EntryId(1, 2)]]


def test_a_cumulative_ack_removes_every_id_up_to_it(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    for entry in (5, 1, 9, 3, 7):
        tracker.add(EntryId(1, entry))
    assert tracker.remove_until(EntryId(1, 5)) == 3
    assert len(tracker) == 2
    clock.advance(10.0)
    assert redeliveries.ids == [[EntryId(1, 7), EntryId(1, 9)]]


def test_adding_a_tracked_id_keeps_its_first_deadline(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    assert tracker.add(EntryId(1, 1))
    clock.advance(1.5)
    assert not tracker.add(EntryId(1, 1))
    clock.advance(ACK_TIMEOUT - 1.5 + TICK_TIME)
    assert redeliveries.ids == [[EntryId(1, 1)]]


def test_clear_forgets_everything(
    clock: FakeScheduler, redeliveries: Redeliveries, tracker: UnAckedMessageTracker
) -> None:
    tracker.add(EntryId(1, 1))
    tracker.add(EntryId(1, 2))
    tracker.clear()  # reconnected: the broker redelivers these anyway
    assert len(tracker) == 0
    assert clock.armed == 0
    clock.advance(10.0)
    assert redeliveries.calls == []
    tracker.add(EntryId(1, 3))
    tracker.close()
    clock.advance(10.0)
    assert redeliveries.calls == []


def test_the_tick_is_at_most_the_ack_timeout(
    clock: FakeScheduler, redeliveries: Redeliveries
) -> None:
    tracker = UnAckedMessageTracker(redeliveries, 1.0, tick_time=5.0, scheduler=clock)
    tracker.add(EntryId(1, 1))
    clock.advance(0.99)
    assert redeliveries.calls == []
    clock.advance(1.0)
    assert redeliveries.ids == [[EntryId(1, 1)]]


def test_backoff_adds_to_the_ack_timeout(clock: FakeScheduler, redeliveries: Redeliveries) -> None:
    backoff = MultiplierRedeliveryBackoff(min_delay=1.0, max_delay=60.0)
    tracker = UnAckedMessageTracker(
        redeliveries, ACK_TIMEOUT, TICK_TIME, backoff=backoff, scheduler=clock
    )
    tracker.add(EntryId(1, 1), redelivery_count=2)  # 2 s + 4 s
    clock.advance(5.99)
    assert redeliveries.calls == []
    clock.advance(TICK_TIME)
    assert redeliveries.ids == [[EntryId(1, 1)]]


@pytest.mark.parametrize(("ack_timeout", "tick_time"), [(0.0, 1.0), (0.5, 1.0), (2.0, 0.05)])
def test_rejects_bad_configuration(
    clock: FakeScheduler, redeliveries: Redeliveries, ack_timeout: float, tick_time: float
) -> None:
    with pytest.raises(InvalidConfigurationError):
        UnAckedMessageTracker(redeliveries, ack_timeout, tick_time, scheduler=clock)
