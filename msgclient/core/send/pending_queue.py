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


class PendingQueue:
    """Ops awaiting receipts, oldest first, with the send-timeout timer.

    ``oldest_unqueued`` gives the creation time of messages not yet in the queue (the open
    batch), which the timeout covers too. ``on_timeout`` is called when the oldest message
    has waited ``send_timeout`` seconds; it is expected to fail everything.
    """

    def __init__(
        self,
        send_timeout: float,
        oldest_unqueued: Callable[[], float | None],
        on_timeout: Callable[[], None],
    ) -> None:
        self._ops: deque[OpSend] = deque()
        self._send_timeout = send_timeout
        self._oldest_unqueued = oldest_unqueued
        self._on_timeout = on_timeout
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        if send_timeout > 0:
            self._timer = self._loop.call_later(send_timeout, self._check)

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
        wait = self._send_timeout
        if oldest is not None:
            remaining = oldest + self._send_timeout - self._loop.time()
            if remaining <= 0:
                self._on_timeout()
            else:
                wait = remaining
        self._timer = self._loop.call_later(wait, self._check)
