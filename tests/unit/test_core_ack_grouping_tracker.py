"""AcknowledgmentsGroupingTracker: acks go out in few batches; duplicates and receipts."""

from __future__ import annotations

import asyncio
import logging

import pytest

from msgclient.core.receive.ack_grouping_tracker import AckBatch, AcknowledgmentsGroupingTracker
from msgclient.errors import AlreadyClosedError, ConnectionClosedError, InvalidConfigurationError
from msgclient.message import MessageId
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.unit.fakes import EntryId, FakeScheduler

GROUP_TIME = 0.1


def ids(*entries: int) -> tuple[MessageId, ...]:
    return tuple(EntryId(1, entry) for entry in entries)


class Sender:
    """``send_acks``: records each batch; with receipts, returns a future the test settles."""

    def __init__(self, receipts: bool = False) -> None:
        self.batches: list[AckBatch] = []
        self.receipts: list[asyncio.Future[None]] = []
        self.connected = True
        self._with_receipts = receipts

    def __call__(self, batch: AckBatch) -> asyncio.Future[None] | None:
        self.batches.append(batch)
        if not self._with_receipts:
            return None
        receipt = asyncio.get_running_loop().create_future()
        self.receipts.append(receipt)
        return receipt

    @property
    def individual(self) -> list[MessageId]:
        return [message_id for batch in self.batches for message_id in batch.individual]


@pytest.fixture
def clock() -> FakeScheduler:
    return FakeScheduler()


def make_tracker(
    sender: Sender,
    clock: FakeScheduler,
    group_time: float = GROUP_TIME,
    receipts: bool = False,
) -> AcknowledgmentsGroupingTracker:
    return AcknowledgmentsGroupingTracker(
        sender,
        group_time=group_time,
        ack_receipt_enabled=receipts,
        is_connected=lambda: sender.connected,
        scheduler=clock,
    )


async def test_acks_wait_for_the_group_time_then_go_as_one_batch(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock, receipts=True)
    futures = [tracker.ack(message_id) for message_id in ids(3, 1, 2)]
    clock.advance(GROUP_TIME - 0.001)
    assert sender.batches == []
    assert not any(future.done() for future in futures)
    clock.advance(0.002)
    assert sender.batches == [AckBatch(ids(3, 1, 2), None)]  # in the order acked
    assert all(future.done() and future.result() is None for future in futures)
    assert clock.armed == 0  # nothing pending, no timer


async def test_without_receipts_an_ack_is_done_at_once(clock: FakeScheduler) -> None:
    # As the Java client: the future does not wait for the group time (an application
    # awaiting each ack would otherwise get one ack per group time).
    sender = Sender()
    tracker = make_tracker(sender, clock)
    assert tracker.ack(EntryId(1, 1)).done()
    assert tracker.ack_cumulative(EntryId(1, 2)).done()
    assert sender.batches == []  # still grouped
    clock.advance(GROUP_TIME)
    assert sender.batches == [AckBatch((EntryId(1, 1),), EntryId(1, 2))]


async def test_10k_acks_go_out_in_10_batches(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    futures = [tracker.ack(message_id) for message_id in ids(*range(10_000))]
    assert tracker.batches_sent == 10  # one each time 1000 were pending
    assert sender.individual == list(ids(*range(10_000)))
    assert all(future.done() for future in futures)
    assert clock.armed == 0


async def test_acks_of_a_batch_are_grouped_as_single_ones(clock: FakeScheduler) -> None:
    # A receive_many batch acknowledged at once: its ids in order, one future for them,
    # a flush when the group is full (one batch, however many ids pushed it over).
    sender = Sender(receipts=True)
    tracker = make_tracker(sender, clock, receipts=True)
    few = tracker.ack_all(list(ids(1, 2)), 2)
    assert sender.batches == []
    many = tracker.ack_all(list(ids(*range(3, 1503))), 1500)
    assert sender.batches == [AckBatch(ids(*range(1, 1503)), None)]
    assert tracker.acks_made == 1502
    assert clock.armed == 0
    sender.receipts[0].set_result(None)
    await asyncio.gather(few, many)
    tracker.ack_all(list(ids(7)), 10)  # one id for ten messages (a whole batch entry)
    assert tracker.acks_made == 1512
    assert tracker.is_duplicate(EntryId(1, 7))
    tracker.close()
    with pytest.raises(AlreadyClosedError):
        await tracker.ack_all(list(ids(8)), 1)


async def test_the_remainder_goes_after_the_group_time(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    for message_id in ids(*range(2_500)):
        tracker.ack(message_id)
    assert tracker.batches_sent == 2
    clock.advance(GROUP_TIME + 0.001)
    assert tracker.batches_sent == 3
    assert len(sender.batches[-1].individual) == 500


async def test_group_time_zero_sends_each_ack_at_once(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock, group_time=0.0)
    first = tracker.ack(EntryId(1, 1))
    assert sender.batches == [AckBatch(ids(1), None)]
    assert first.done()
    tracker.ack_cumulative(EntryId(1, 5))
    assert sender.batches[-1] == AckBatch((), EntryId(1, 5))
    assert tracker.batches_sent == 2
    assert clock.armed == 0


async def test_cumulative_acks_keep_only_the_highest(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    futures = [tracker.ack_cumulative(message_id) for message_id in ids(5, 9, 7)]
    clock.advance(GROUP_TIME + 0.001)
    assert sender.batches == [AckBatch((), EntryId(1, 9))]
    assert all(future.done() for future in futures)
    covered = tracker.ack_cumulative(EntryId(1, 8))  # below what was sent: nothing to send
    assert covered.done()
    clock.advance(1.0)
    assert tracker.batches_sent == 1


async def test_individual_and_cumulative_acks_share_a_batch(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    tracker.ack(EntryId(1, 20))
    tracker.ack_cumulative(EntryId(1, 10))
    clock.advance(GROUP_TIME + 0.001)
    assert sender.batches == [AckBatch(ids(20), EntryId(1, 10))]


async def test_close_flushes_what_is_pending(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    pending = tracker.ack(EntryId(1, 1))
    tracker.ack_cumulative(EntryId(1, 0))
    tracker.close()
    assert sender.batches == [AckBatch(ids(1), EntryId(1, 0))]
    assert pending.done()
    assert clock.armed == 0
    late = tracker.ack(EntryId(1, 2))
    with pytest.raises(AlreadyClosedError):
        late.result()


async def test_duplicates_are_pending_or_cumulatively_acked(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    tracker.ack(EntryId(1, 50))
    tracker.ack_cumulative(EntryId(1, 10))
    assert tracker.is_duplicate(EntryId(1, 50))  # redelivered while its ack waits
    assert tracker.is_duplicate(EntryId(1, 10))
    assert tracker.is_duplicate(EntryId(1, 3))
    assert not tracker.is_duplicate(EntryId(1, 11))
    clock.advance(GROUP_TIME + 0.001)
    assert tracker.is_duplicate(EntryId(1, 10))  # the cumulative position is kept
    assert not tracker.is_duplicate(EntryId(1, 50))  # sent: the broker knows


async def test_an_ack_of_a_whole_batch_entry_makes_its_messages_duplicates(
    clock: FakeScheduler,
) -> None:
    # receive_many acknowledges a Pulsar batch by its entry id; a redelivery of the entry
    # while that ack waits brings its messages by their batch indexes.
    tracker = make_tracker(Sender(), clock)
    tracker.ack(PulsarMessageId(7, 3, 0))
    assert tracker.is_duplicate(PulsarMessageId(7, 3, 0, batch_index=5, batch_size=10))
    assert not tracker.is_duplicate(PulsarMessageId(7, 4, 0, batch_index=5, batch_size=10))
    assert not tracker.is_duplicate(PulsarMessageId(7, 3, 1, batch_index=5, batch_size=10))


async def test_receipts_complete_when_the_broker_confirms(clock: FakeScheduler) -> None:
    sender = Sender(receipts=True)
    tracker = make_tracker(sender, clock, receipts=True)
    futures = [tracker.ack(message_id) for message_id in ids(1, 2)]
    futures.append(tracker.ack_cumulative(EntryId(1, 0)))
    clock.advance(GROUP_TIME + 0.001)
    assert tracker.batches_sent == 1
    await asyncio.sleep(0)
    assert not any(future.done() for future in futures)  # sent, not yet confirmed
    sender.receipts[0].set_result(None)
    await asyncio.gather(*futures)


async def test_receipts_fail_with_the_brokers_error(clock: FakeScheduler) -> None:
    sender = Sender(receipts=True)
    tracker = make_tracker(sender, clock, receipts=True)
    future = tracker.ack(EntryId(1, 1))
    tracker.flush()
    sender.receipts[0].set_exception(ConnectionClosedError("connection lost"))
    with pytest.raises(ConnectionClosedError):
        await future


async def test_without_receipts_a_failed_confirmation_is_logged(
    clock: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    sender = Sender(receipts=True)  # the sender returns an awaitable anyway
    tracker = make_tracker(sender, clock, receipts=False)
    future = tracker.ack(EntryId(1, 1))
    tracker.flush()
    assert future.done()  # complete once handed to the sender
    with caplog.at_level(logging.WARNING):
        sender.receipts[0].set_exception(ConnectionClosedError("connection lost"))
        await asyncio.sleep(0)
    assert "acknowledgments failed" in caplog.text


async def test_a_sender_error_fails_the_batch(clock: FakeScheduler) -> None:
    def refuse(batch: AckBatch) -> None:
        raise ConnectionClosedError("write failed")

    tracker = AcknowledgmentsGroupingTracker(refuse, ack_receipt_enabled=True, scheduler=clock)
    future = tracker.ack(EntryId(1, 1))
    tracker.flush()
    with pytest.raises(ConnectionClosedError):
        future.result()
    assert tracker.batches_sent == 0


async def test_acks_wait_while_disconnected_and_go_after_the_reconnect(
    clock: FakeScheduler,
) -> None:
    sender = Sender()
    sender.connected = False
    tracker = make_tracker(sender, clock)
    futures = [tracker.ack(message_id) for message_id in ids(*range(1_500))]
    clock.advance(1.0)
    assert sender.batches == []
    assert clock.armed == 0  # no polling while disconnected
    assert tracker.is_duplicate(EntryId(1, 7))  # a redelivered copy is still dropped
    sender.connected = True
    tracker.flush()  # what the consumer does once reconnected
    assert tracker.batches_sent == 1
    assert len(sender.individual) == 1_500
    assert all(future.done() for future in futures)


async def test_close_while_disconnected_fails_the_unsent_acks(clock: FakeScheduler) -> None:
    sender = Sender()
    sender.connected = False
    tracker = make_tracker(sender, clock, receipts=True)
    future = tracker.ack(EntryId(1, 1))
    tracker.close()
    with pytest.raises(AlreadyClosedError):
        future.result()


async def test_flush_and_clean_forgets_the_cumulative_position(clock: FakeScheduler) -> None:
    sender = Sender()
    tracker = make_tracker(sender, clock)
    tracker.ack_cumulative(EntryId(1, 10))
    tracker.flush_and_clean()
    assert sender.batches == [AckBatch((), EntryId(1, 10))]
    assert not tracker.is_duplicate(EntryId(1, 5))  # after a seek back it is new again


@pytest.mark.parametrize(("group_time", "max_group_size"), [(-0.1, 1000), (0.1, 0)])
async def test_rejects_bad_configuration(group_time: float, max_group_size: int) -> None:
    with pytest.raises(InvalidConfigurationError):
        AcknowledgmentsGroupingTracker(
            Sender(), group_time=group_time, max_group_size=max_group_size
        )


async def test_holds_acks_while_an_individual_ack_is_pending_and_after_a_cumulative_one(
    clock: FakeScheduler,
) -> None:
    # The consumer checks dispatches for duplicates only while this is true.
    sender = Sender()
    tracker = make_tracker(sender, clock)
    assert not tracker.holds_acks()
    tracker.ack(EntryId(1, 1))
    assert tracker.holds_acks()
    clock.advance(GROUP_TIME + 0.001)  # sent: the broker knows
    assert not tracker.holds_acks()
    tracker.ack_cumulative(EntryId(1, 5))
    clock.advance(GROUP_TIME + 0.001)
    assert tracker.holds_acks()  # everything up to it stays acked
