"""FlowWindow permits and the ReceiveQueue, driven without a broker."""

from __future__ import annotations

import asyncio

import pytest

from msgclient.core.receive.receive_queue import FlowWindow, ReceiveQueue


class Broker:
    """Stands in for the broker: honours grants, counts what it was asked for."""

    def __init__(self) -> None:
        self.grants: list[int] = []
        self.delivered = 0

    @property
    def permits(self) -> int:
        return sum(self.grants)

    def send_permits(self, permits: int) -> None:
        self.grants.append(permits)

    def deliver(self, queue: ReceiveQueue[int], window: FlowWindow, backlog: list[int]) -> None:
        """Send as many backlog messages as there are permits for."""
        while backlog and self.permits > self.delivered:
            queue.put_all([backlog.pop(0)], window)
            self.delivered += 1


async def test_window_grants_the_whole_queue_on_connect_and_refills_at_half() -> None:
    broker = Broker()
    window = FlowWindow(10, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    window.connection_opened()
    assert broker.grants == [10]
    for i in range(10):
        queue.put_all([i], window)
    for _ in range(4):
        await queue.get(timeout=1)
    assert broker.grants == [10]  # 4 free: below half the window
    await queue.get(timeout=1)
    assert broker.grants == [10, 5]  # 5 free: one grant of all of them


async def test_queue_never_holds_more_than_the_window() -> None:
    broker = Broker()
    window = FlowWindow(100, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    window.connection_opened()
    backlog = list(range(100 * 100))
    taken = []
    broker.deliver(queue, window, backlog)
    while backlog or len(queue):
        assert len(queue) <= 100
        taken.append(await queue.get(timeout=1))
        broker.deliver(queue, window, backlog)
    assert taken == list(range(100 * 100))
    # refills only after half the window was taken, never per message
    assert all(grant >= 50 for grant in broker.grants)


async def test_new_connection_voids_earned_permits() -> None:
    broker = Broker()
    window = FlowWindow(10, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    window.connection_opened()
    for i in range(4):
        queue.put_all([i], window)
    for _ in range(4):
        await queue.get(timeout=1)  # 4 earned, not yet granted
    window.connection_opened()
    assert broker.grants == [10, 10]
    for i in range(5):
        queue.put_all([i], window)
    for _ in range(4):
        await queue.get(timeout=1)
    assert broker.grants == [10, 10]  # the 4 from the old connection did not count


async def test_pause_withholds_grants_and_resume_sends_them() -> None:
    broker = Broker()
    window = FlowWindow(4, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    window.connection_opened()
    window.pause()
    for i in range(4):
        queue.put_all([i], window)
    for _ in range(4):
        await queue.get(timeout=1)
    assert broker.grants == [4]
    window.resume()
    assert broker.grants == [4, 4]


async def test_zero_queue_grants_nothing_up_front() -> None:
    broker = Broker()
    window = FlowWindow(0, broker.send_permits)
    window.connection_opened()
    assert broker.grants == []
    window.request_one()
    assert broker.grants == [1]


async def test_get_waits_and_times_out() -> None:
    queue: ReceiveQueue[int] = ReceiveQueue()
    window = FlowWindow(1, Broker().send_permits)
    with pytest.raises(TimeoutError):
        await queue.get(timeout=0.05)
    getter = asyncio.ensure_future(queue.get(timeout=1))
    await asyncio.sleep(0)
    queue.put_all([7], window)
    assert await getter == 7


async def test_each_message_goes_to_one_waiter_and_a_cancelled_waiter_passes_it_on() -> None:
    queue: ReceiveQueue[int] = ReceiveQueue()
    window = FlowWindow(10, Broker().send_permits)
    first = asyncio.ensure_future(queue.get(timeout=1))
    second = asyncio.ensure_future(queue.get(timeout=1))
    await asyncio.sleep(0)
    queue.put_all([1], window)
    first.cancel()  # woken, then cancelled before it ran: the message must reach `second`
    assert await second == 1
    assert first.cancelled()


async def test_remove_window_drops_only_its_messages() -> None:
    queue: ReceiveQueue[str] = ReceiveQueue()
    broker = Broker()
    a, b = FlowWindow(10, broker.send_permits), FlowWindow(10, broker.send_permits)
    for item, window in [("a1", a), ("b1", b), ("a2", a), ("b2", b)]:
        queue.put_all([item], window)
    assert queue.remove_window(a) == 2
    assert [queue.get_nowait(), queue.get_nowait(), queue.get_nowait()] == ["b1", "b2", None]


async def test_a_window_reopened_with_messages_still_queued_grants_only_the_rest() -> None:
    broker = Broker()
    window = FlowWindow(10, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    window.connection_opened()
    queue.put_all([1, 2, 3, 4], window)
    assert queue.get_nowait() == 1
    assert queue.count(window) == 3
    window.connection_opened(queue.count(window))
    assert broker.grants == [10, 7]


async def test_take_slices_dispatches_in_order_and_returns_their_permits() -> None:
    broker = Broker()
    first, second = FlowWindow(8, broker.send_permits), FlowWindow(8, broker.send_permits)
    queue: ReceiveQueue[int] = ReceiveQueue()
    first.connection_opened()
    second.connection_opened()
    queue.put_all([0, 1, 2], first)  # a batch entry: one dispatch
    queue.put_all([3, 4, 5, 6], second)
    queue.put_all([7], first)
    assert queue.take(2) == [0, 1]
    assert queue.get_nowait() == 2
    assert queue.take(3) == [3, 4, 5]
    assert broker.grants == [8, 8]  # 3 free in each window: below half
    assert queue.take(100) == [6, 7]
    assert broker.grants == [8, 8, 4, 4]  # half of each window: one grant each
    assert len(queue) == 0 and queue.take(5) == [] and queue.get_nowait() is None
    queue.put_all([8, 9], first)
    assert queue.take(0) == [] and len(queue) == 2
    assert queue.take(2) == [8, 9] and len(queue) == 0


class Untouchable(list[int]):
    """A dispatch that fails if a message is looked at (take_slices must not)."""

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        raise AssertionError("a message was touched")


async def test_take_slices_touches_no_message_and_cuts_inside_a_dispatch() -> None:
    broker = Broker()
    window = FlowWindow(8, broker.send_permits)
    window.connection_opened()
    queue: ReceiveQueue[int] = ReceiveQueue()
    first, second = Untouchable([0, 1, 2]), Untouchable([3, 4, 5, 6])
    queue.put_all(first, window)
    queue.put_all(second, window)
    assert queue.take_slices(5) == [(first, 0, 3), (second, 0, 2)]
    assert queue.take_slices(5) == [(second, 2, 4)]
    assert len(queue) == 0 and broker.grants == [8, 5]  # half the window freed: one grant


async def test_take_with_a_byte_limit_stops_at_the_message_that_reaches_it() -> None:
    window = FlowWindow(100, lambda _: None)
    queue: ReceiveQueue[bytes] = ReceiveQueue()
    queue.put_all([b"aa", b"bb"], window)
    queue.put_all([b"cccc", b"d"], window)
    assert queue.take(10, (5, len)) == [b"aa", b"bb", b"cccc"]  # 8 bytes: the third reached 5
    assert queue.take(10, (1, len)) == [b"d"]
    queue.put_all([b"e"], window)
    assert queue.take(10, (0, len)) == []  # nothing fits a spent budget


async def test_wait_returns_once_a_message_is_queued_and_reports_close() -> None:
    window = FlowWindow(10, lambda _: None)
    queue: ReceiveQueue[int] = ReceiveQueue()
    with pytest.raises(TimeoutError):
        await queue.wait(0.01)
    waiting = asyncio.ensure_future(queue.wait(5))
    await asyncio.sleep(0)
    queue.put_all([1], window)
    await asyncio.wait_for(waiting, 5)
    assert len(queue) == 1  # wait takes nothing
    assert queue.take(1) == [1]
    queue.close(ConnectionError("gone"))
    with pytest.raises(ConnectionError, match="gone"):
        await queue.wait(5)
