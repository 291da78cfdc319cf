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

from msgclient.message import MessageId, OutgoingMessage, call_back, fail_future


class OpSend:
    """One write to the broker: a batch of messages, or a single unbatched message.

    ``messages`` serve the encoding only: once the frame holds them the producer calls
    ``encoded`` and they go. What waits for the receipt is each message's future (and
    callback): one object per message fewer for the garbage collector to scan while
    thousands of messages are in flight (its full collections cost a third of a busy
    producer's time, measured).
    """

    __slots__ = (
        "callbacks",
        "count",
        "created_at",
        "frame",
        "futures",
        "highest_sequence_id",
        "is_batch",
        "messages",
        "payload_bytes",
        "sequence_id",
    )

    def __init__(
        self, messages: list[OutgoingMessage], is_batch: bool, payload_bytes: int, created_at: float
    ) -> None:
        self.messages = messages
        self.count = len(messages)
        self.futures = [message.future for message in messages]
        callbacks = [message.callback for message in messages]
        self.callbacks = callbacks if any(callbacks) else None
        self.is_batch = is_batch
        self.payload_bytes = payload_bytes
        self.created_at = created_at
        self.sequence_id: int = messages[0].sequence_id  # type: ignore[assignment]
        self.highest_sequence_id: int = messages[-1].sequence_id  # type: ignore[assignment]
        self.frame = b""  # the encoded frame, kept to resend after a reconnect

    def encoded(self, frame: bytes) -> None:
        """The frame holds the messages now: keep it, drop them (and their payloads)."""
        self.frame = frame
        self.messages = []

    def complete(self, message_ids: list[MessageId]) -> None:
        """Each message was stored under its id, in order."""
        for future, message_id in zip(self.futures, message_ids, strict=True):
            if not future.done():
                future.set_result(message_id)
        if self.callbacks is not None:
            for callback, message_id in zip(self.callbacks, message_ids, strict=True):
                if callback is not None:
                    call_back(callback, None, message_id)

    def fail(self, error: BaseException) -> None:
        for future in self.futures:
            fail_future(future, error)
        if self.callbacks is not None:
            for callback in self.callbacks:
                if callback is not None:
                    call_back(callback, error, None)


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
