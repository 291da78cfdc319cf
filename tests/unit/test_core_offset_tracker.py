"""OffsetTracker: individual acks commit only the contiguous acknowledged prefix."""

from __future__ import annotations

from protocols.kafkawire.offset_tracker import OffsetTracker


def delivered(tracker: OffsetTracker, *offsets: int) -> None:
    for offset in offsets:
        tracker.delivered(offset)


def test_starts_at_the_given_position() -> None:
    assert OffsetTracker(42).commit_position == 42


def test_out_of_order_acks_never_pass_an_unacked_offset() -> None:
    tracker = OffsetTracker(0)
    delivered(tracker, 0, 1, 2, 3, 4)
    for offset in (1, 2, 4):
        tracker.ack(offset)
    assert tracker.commit_position == 0
    tracker.ack(0)
    assert tracker.commit_position == 3  # 1 and 2 were acked already; 3 was not
    tracker.ack(3)
    assert tracker.commit_position == 5
    assert tracker.unacked == 0


def test_gaps_between_delivered_offsets_are_passed_over() -> None:
    tracker = OffsetTracker(10)
    delivered(tracker, 12, 15)  # 10, 11, 13, 14: compacted away or control records
    tracker.ack(12)
    assert tracker.commit_position == 15
    tracker.ack(15)
    assert tracker.commit_position == 16
    tracker.skip_to(20)  # a fetch ended on control records
    assert tracker.commit_position == 20


def test_a_delivered_run_counts_as_each_of_its_offsets() -> None:
    tracker = OffsetTracker(10)
    tracker.delivered_run(8, 5)  # 8 and 9: before the position, a redelivery
    assert tracker.unacked == 3
    tracker.delivered_run(11, 2)  # a redelivery too: outstanding once
    tracker.delivered_run(15, 2)  # 13 and 14: compacted away
    assert tracker.unacked == 5
    for offset in (10, 11, 12, 16):
        tracker.ack(offset)
    assert tracker.commit_position == 15
    tracker.ack(15)
    assert tracker.commit_position == 17


def test_acks_of_the_first_outstanding_offsets_in_order_pass_them_at_once() -> None:
    tracker = OffsetTracker(0)
    tracker.delivered_run(0, 10)
    tracker.ack(5)  # out of order: waits behind 0..4
    tracker.ack_all([0, 1, 2, 3, 4])
    assert tracker.commit_position == 6  # and the 5 acked before
    tracker.ack_all([7, 6, 9])  # not in delivery order: one by one, the same result
    assert tracker.commit_position == 8
    tracker.ack_all([8])
    assert (tracker.commit_position, tracker.unacked) == (10, 0)
    tracker.ack_all([])
    tracker.ack_all([3, 4])  # acked before: nothing changes
    assert (tracker.commit_position, tracker.unacked) == (10, 0)


def test_an_offset_acked_alone_then_with_its_batch_counts_once() -> None:
    tracker = OffsetTracker(0)
    tracker.delivered_run(0, 3)
    tracker.ack_all([1])  # out of order: waits behind 0
    tracker.ack_all([0, 1])  # the batch holding both, in order
    assert (tracker.commit_position, tracker.unacked) == (2, 1)  # 2 is still outstanding
    tracker.ack(2)
    assert (tracker.commit_position, tracker.unacked) == (3, 0)


def test_cumulative_ack_covers_everything_up_to_it() -> None:
    tracker = OffsetTracker(0)
    delivered(tracker, *range(10))
    tracker.ack(7)
    tracker.ack_cumulative(5)
    assert tracker.commit_position == 6
    tracker.ack(6)
    assert tracker.commit_position == 8


def test_redelivered_and_unknown_offsets_change_nothing() -> None:
    tracker = OffsetTracker(5)
    delivered(tracker, 5, 6)
    tracker.delivered(5)  # a redelivery: still outstanding once
    tracker.ack(3)  # before the position: already committed
    tracker.ack(99)  # never delivered
    assert tracker.commit_position == 5
    assert tracker.unacked == 2
    tracker.ack(5)
    tracker.ack(6)
    assert (tracker.commit_position, tracker.unacked) == (7, 0)
