"""PendingQueue: ops in send order, and the single send-timeout timer over them.

A fake clock drives the timer (``tests.unit.fakes.FakeScheduler``): time moves only when a
test says so and each timer runs at its own time, so the send timeout is checked to the
tick, never against how busy the machine is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from msgclient.core.send.pending_queue import OpSend, PendingQueue
from msgclient.message import OutgoingMessage
from tests.unit.fakes import FakeScheduler

SEND_TIMEOUT = 0.05
EPSILON = 1e-9  # float error of sums of times


class TimeoutRecorder:
    """The ``on_timeout`` callback: records when it fired, optionally drains the queue."""

    def __init__(self, clock: FakeScheduler, drain: bool = True) -> None:
        self.clock = clock
        self.fired_at: list[float] = []
        self.queue: PendingQueue | None = None
        self._drain = drain

    def __call__(self) -> None:
        self.fired_at.append(self.clock.time())
        if self._drain and self.queue is not None:
            self.queue.drain()


@pytest.fixture
def clock() -> FakeScheduler:
    return FakeScheduler(start=100.0)


def make_queue(
    recorder: TimeoutRecorder,
    send_timeout: float = SEND_TIMEOUT,
    oldest_unqueued: Callable[[], float | None] = lambda: None,
) -> PendingQueue:
    queue = PendingQueue(send_timeout, oldest_unqueued, recorder, scheduler=recorder.clock)
    recorder.queue = queue
    return queue


def op(sequence_id: int, created_at: float, count: int = 1) -> OpSend:
    loop = asyncio.get_running_loop()
    messages = [
        OutgoingMessage(b"x", loop.create_future(), sequence_id=sequence_id + i)
        for i in range(count)
    ]
    return OpSend(messages, count > 1, count, created_at)


def at(expected: float) -> object:
    return pytest.approx(expected, abs=EPSILON)


async def test_ops_keep_send_order(clock: FakeScheduler) -> None:
    queue = make_queue(TimeoutRecorder(clock), send_timeout=0)
    ops = [op(i, clock.time()) for i in range(3)]
    for o in ops:
        queue.append(o)
    assert len(queue) == 3
    assert list(queue) == ops
    assert queue.peek() is ops[0] and queue.peek_last() is ops[2]
    assert queue.popleft() is ops[0]
    assert queue.drain() == ops[1:]
    assert len(queue) == 0 and queue.peek() is None and queue.peek_last() is None


async def test_op_spans_the_sequence_ids_of_its_messages() -> None:
    batch = op(10, 0.0, count=4)
    assert (batch.sequence_id, batch.highest_sequence_id) == (10, 13)
    assert batch.is_batch and batch.payload_bytes == 4


async def test_timeout_fires_when_the_oldest_op_is_send_timeout_old_not_before(
    clock: FakeScheduler,
) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    clock.advance(0.0005)  # the queue's first check comes half a millisecond too early
    created = clock.time()
    queue.append(op(0, created))
    clock.advance(SEND_TIMEOUT - 0.0001)
    assert recorder.fired_at == []
    clock.advance(0.0001)
    assert recorder.fired_at == [at(created + SEND_TIMEOUT)]
    assert len(queue) == 0
    queue.stop()


async def test_timeout_fires_on_time_for_an_op_created_after_the_queue(
    clock: FakeScheduler,
) -> None:
    # Not one send_timeout after the first check, which would be up to twice too late.
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder, send_timeout=0.1)
    clock.advance(0.05)
    created = clock.time()
    queue.append(op(0, created))
    clock.advance(0.2)
    assert recorder.fired_at == [at(created + 0.1)]
    queue.stop()


async def test_only_the_oldest_op_counts(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    oldest = clock.time()
    queue.append(op(0, oldest))
    clock.advance(SEND_TIMEOUT * 0.5)
    queue.append(op(1, clock.time()))  # younger: does not push the deadline back
    clock.advance(SEND_TIMEOUT)
    # One call fails everything, not one per op.
    assert recorder.fired_at == [at(oldest + SEND_TIMEOUT)]
    queue.stop()


async def test_confirmed_ops_stop_counting(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    queue.append(op(0, clock.time()))
    clock.advance(SEND_TIMEOUT * 0.5)
    second = clock.time()
    queue.append(op(1, second))
    queue.popleft()  # the first was confirmed: the second is now the oldest
    clock.advance(SEND_TIMEOUT * 0.5)
    assert recorder.fired_at == []  # the first op's deadline passed: nothing fires
    clock.advance(SEND_TIMEOUT)
    assert recorder.fired_at == [at(second + SEND_TIMEOUT)]
    queue.stop()


async def test_oldest_unqueued_message_counts_when_the_queue_is_empty(
    clock: FakeScheduler,
) -> None:
    recorder = TimeoutRecorder(clock)
    batch_started = clock.time() + SEND_TIMEOUT * 0.4
    queue = make_queue(recorder, oldest_unqueued=lambda: batch_started)
    clock.advance(SEND_TIMEOUT * 3)
    assert recorder.fired_at[:1] == [at(batch_started + SEND_TIMEOUT)]
    queue.stop()


async def test_nothing_pending_never_times_out(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    clock.advance(SEND_TIMEOUT * 30)
    assert recorder.fired_at == []
    assert clock.armed == 1  # still watching, with one timer
    queue.stop()


async def test_send_timeout_zero_never_fires_and_sets_no_timer(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder, send_timeout=0, oldest_unqueued=lambda: clock.time() - 100)
    queue.append(op(0, clock.time() - 100))
    clock.advance(SEND_TIMEOUT * 100)
    assert recorder.fired_at == []
    assert clock.armed == 0 and clock.wakeups == 0


async def test_one_timer_however_many_ops(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    now = clock.time()
    for i in range(500):
        queue.append(op(i, now))
    assert clock.armed == 1  # the one armed at creation; appends add none
    clock.advance(SEND_TIMEOUT)
    assert recorder.fired_at == [at(now + SEND_TIMEOUT)]
    assert clock.wakeups == 1  # the ops were as old as the queue: its first check fired
    assert clock.armed == 1  # re-armed after firing, still one
    queue.stop()


async def test_timer_keeps_checking_after_a_timeout(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    queue.append(op(0, clock.time()))
    clock.advance(SEND_TIMEOUT)
    assert len(recorder.fired_at) == 1
    clock.advance(SEND_TIMEOUT * 0.3)
    created = clock.time()
    queue.append(op(1, created))
    clock.advance(SEND_TIMEOUT * 2)
    assert recorder.fired_at[1:] == [at(created + SEND_TIMEOUT)]
    queue.stop()


async def test_stop_cancels_the_timer(clock: FakeScheduler) -> None:
    recorder = TimeoutRecorder(clock)
    queue = make_queue(recorder)
    queue.append(op(0, clock.time()))
    queue.stop()
    assert clock.armed == 0
    clock.advance(SEND_TIMEOUT * 10)
    assert recorder.fired_at == []


async def test_a_callback_that_fails_nothing_is_called_again_later(
    clock: FakeScheduler,
) -> None:
    recorder = TimeoutRecorder(clock, drain=False)
    queue = make_queue(recorder)
    created = clock.time()
    queue.append(op(0, created))
    clock.advance(SEND_TIMEOUT * 2.5)
    queue.stop()
    # Once a send timeout apart: not a busy loop on the op that stays.
    assert recorder.fired_at == [at(created + SEND_TIMEOUT), at(created + 2 * SEND_TIMEOUT)]
