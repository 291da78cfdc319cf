"""PendingQueue: ops in send order, and the single send-timeout timer over them.

Real loop time with a 50 ms send timeout: each test waits a few timeouts at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from msgclient.core.send.pending_queue import OpSend, PendingQueue
from msgclient.message import OutgoingMessage

SEND_TIMEOUT = 0.05
# asyncio may run a timer up to its clock resolution early; allow that and float error.
EARLY = 0.002
WAIT = 1.0


class TimeoutRecorder:
    """The ``on_timeout`` callback: records when it fired, optionally drains the queue."""

    def __init__(self, drain: bool = True) -> None:
        self.fired_at: list[float] = []
        self.fired = asyncio.Event()
        self.queue: PendingQueue | None = None
        self._drain = drain

    def __call__(self) -> None:
        self.fired_at.append(asyncio.get_running_loop().time())
        self.fired.set()
        if self._drain and self.queue is not None:
            self.queue.drain()

    async def wait(self, calls: int = 1) -> float:
        """Wait until ``on_timeout`` was called ``calls`` times; the time of the last."""
        async with asyncio.timeout(WAIT):
            while len(self.fired_at) < calls:
                self.fired.clear()
                await self.fired.wait()
        return self.fired_at[calls - 1]


def make_queue(
    recorder: TimeoutRecorder,
    send_timeout: float = SEND_TIMEOUT,
    oldest_unqueued: Callable[[], float | None] = lambda: None,
) -> PendingQueue:
    queue = PendingQueue(send_timeout, oldest_unqueued, recorder)
    recorder.queue = queue
    return queue


def op(sequence_id: int, created_at: float, count: int = 1) -> OpSend:
    loop = asyncio.get_running_loop()
    messages = [
        OutgoingMessage(b"x", loop.create_future(), sequence_id=sequence_id + i)
        for i in range(count)
    ]
    return OpSend(messages, count > 1, count, created_at)


@contextmanager
def timers_of(loop: asyncio.AbstractEventLoop) -> Iterator[list[Any]]:
    """Record every PendingQueue._check timer the loop schedules while in the block."""
    scheduled: list[Any] = []
    original = loop.call_later

    def call_later(delay: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__func__", None) is PendingQueue._check:
            scheduled.append(delay)
        return original(delay, callback, *args, **kwargs)

    setattr(loop, "call_later", call_later)  # noqa: B010 -- shadow the method on this instance
    try:
        yield scheduled
    finally:
        delattr(loop, "call_later")


async def test_ops_keep_send_order() -> None:
    queue = make_queue(TimeoutRecorder(), send_timeout=0)
    now = asyncio.get_running_loop().time()
    ops = [op(i, now) for i in range(3)]
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


async def test_timeout_fires_when_the_oldest_op_is_send_timeout_old_not_before() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    created = loop.time()
    queue.append(op(0, created))
    fired = await recorder.wait()
    assert fired >= created + SEND_TIMEOUT - EARLY
    assert len(queue) == 0
    queue.stop()


async def test_timeout_fires_on_time_for_an_op_created_after_the_queue() -> None:
    # Not one send_timeout after the first check, which would be up to twice too late.
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder, send_timeout=0.1)
    await asyncio.sleep(0.05)
    created = loop.time()
    queue.append(op(0, created))
    fired = await recorder.wait()
    assert created + 0.1 - EARLY <= fired < created + 0.1 + 0.035
    queue.stop()


async def test_only_the_oldest_op_counts() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    oldest = loop.time()
    queue.append(op(0, oldest))
    await asyncio.sleep(SEND_TIMEOUT * 0.5)
    queue.append(op(1, loop.time()))  # younger: does not push the deadline back
    fired = await recorder.wait()
    assert oldest + SEND_TIMEOUT - EARLY <= fired < oldest + 2 * SEND_TIMEOUT
    assert recorder.fired_at == [fired]  # one call fails everything, not one per op
    queue.stop()


async def test_confirmed_ops_stop_counting() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    queue.append(op(0, loop.time()))
    await asyncio.sleep(SEND_TIMEOUT * 0.5)
    second = loop.time()
    queue.append(op(1, second))
    queue.popleft()  # the first was confirmed: the second is now the oldest
    fired = await recorder.wait()
    assert fired >= second + SEND_TIMEOUT - EARLY
    queue.stop()


async def test_oldest_unqueued_message_counts_when_the_queue_is_empty() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    batch_started = loop.time() + SEND_TIMEOUT * 0.4
    queue = make_queue(recorder, oldest_unqueued=lambda: batch_started)
    fired = await recorder.wait()
    assert fired >= batch_started + SEND_TIMEOUT - EARLY
    queue.stop()


async def test_nothing_pending_never_times_out() -> None:
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    await asyncio.sleep(SEND_TIMEOUT * 3)
    assert recorder.fired_at == []
    queue.stop()


async def test_send_timeout_zero_never_fires_and_sets_no_timer() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    with timers_of(loop) as timers:
        queue = make_queue(recorder, send_timeout=0, oldest_unqueued=lambda: loop.time() - 100)
        queue.append(op(0, loop.time() - 100))
        await asyncio.sleep(SEND_TIMEOUT * 2)
    assert recorder.fired_at == []
    assert timers == []


async def test_one_timer_however_many_ops() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    with timers_of(loop) as timers:
        queue = make_queue(recorder)
        now = loop.time()
        for i in range(500):
            queue.append(op(i, now))
        assert len(timers) == 1  # the one armed at creation; appends add none
        await recorder.wait()
    assert len(timers) <= 3  # creation, perhaps one early re-check, the re-arm after firing
    assert recorder.fired_at and len(recorder.fired_at) == 1
    queue.stop()


async def test_timer_keeps_checking_after_a_timeout() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    queue.append(op(0, loop.time()))
    await recorder.wait()
    created = loop.time()
    queue.append(op(1, created))
    assert await recorder.wait(calls=2) >= created + SEND_TIMEOUT - EARLY
    queue.stop()


async def test_stop_cancels_the_timer() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder()
    queue = make_queue(recorder)
    queue.append(op(0, loop.time()))
    queue.stop()
    await asyncio.sleep(SEND_TIMEOUT * 2)
    assert recorder.fired_at == []


async def test_a_callback_that_fails_nothing_is_called_again_later() -> None:
    loop = asyncio.get_running_loop()
    recorder = TimeoutRecorder(drain=False)
    queue = make_queue(recorder)
    queue.append(op(0, loop.time()))
    await recorder.wait(calls=2)
    queue.stop()
    assert recorder.fired_at[1] - recorder.fired_at[0] >= SEND_TIMEOUT - EARLY
