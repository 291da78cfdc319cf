"""The producer's pending-message queue and its send-timeout check.

Every batch (or single message) written to the broker waits here, in send order, until
its receipt arrives. One timer per producer watches the oldest entry, not one per
message: when the oldest has waited ``send_timeout``, everything pending fails with
SendTimeoutError (the Java client's semantics: order is kept, so nothing after it can be
confirmed first).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator

from msgclient.contract import OpSend
from msgclient.core.timing_wheel import Cancellable, Scheduler


class PendingQueue:
    """Ops awaiting receipts, oldest first, with the send-timeout timer.

    ``oldest_unqueued`` gives the creation time of messages not yet in the queue (the open
    batch), which the timeout covers too. ``on_timeout`` is called when the oldest message
    has waited ``send_timeout`` seconds; it is expected to fail everything. Times are the
    ``scheduler``'s (the running loop's by default; a test passes a fake clock).
    """

    def __init__(
        self,
        send_timeout: float,
        oldest_unqueued: Callable[[], float | None],
        on_timeout: Callable[[], None],
        *,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._ops: deque[OpSend] = deque()
        self._send_timeout = send_timeout
        self._oldest_unqueued = oldest_unqueued
        self._on_timeout = on_timeout
        self._scheduler: Scheduler = scheduler or asyncio.get_running_loop()
        self._timer: Cancellable | None = None
        if send_timeout > 0:
            when = self._scheduler.time() + send_timeout
            self._timer = self._scheduler.call_at(when, self._check)

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[OpSend]:
        return iter(self._ops)

    def append(self, op: OpSend) -> None:
        self._ops.append(op)

    def peek(self) -> OpSend | None:
        return self._ops[0] if self._ops else None

    def peek_last(self) -> OpSend | None:
        return self._ops[-1] if self._ops else None

    def popleft(self) -> OpSend:
        return self._ops.popleft()

    def drain(self) -> list[OpSend]:
        ops = list(self._ops)
        self._ops.clear()
        return ops

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        oldest = self._ops[0].created_at if self._ops else self._oldest_unqueued()
        now = self._scheduler.time()
        wait = self._send_timeout
        if oldest is not None:
            remaining = oldest + self._send_timeout - now
            if remaining <= 0:
                self._on_timeout()
            else:
                wait = remaining
        self._timer = self._scheduler.call_at(now + wait, self._check)
