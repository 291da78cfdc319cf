"""Permit-based flow control and the consumer's receive queue.

The broker sends a consumer only as many messages as it was granted permits. Each
subscription (one per partition) has a ``FlowWindow``: it grants ``size`` permits on a new
connection, and as the application takes messages it returns their permits in one grant
once at least half the window is free (the Java client's refill threshold). Permits earned
on an old connection are void on a new one: the broker starts counting from zero.

The ``ReceiveQueue`` holds the messages of every window of a consumer in arrival order, so
that a multi-partition consumer has one queue; it never holds more than the sum of the
windows (batched entries aside: a broker dispatches whole entries).
``size == 0`` is the zero queue: each receive call asks for exactly one message.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

M = TypeVar("M")
ByteLimit = tuple[int, Callable[[M], int]]  # (max bytes, the size of a message)


class FlowWindow:
    """The permits of one subscription. ``send_permits(n)`` writes a grant to the broker."""

    __slots__ = (
        "_earned",
        "_paused",
        "_requested",
        "_send_permits",
        "_threshold",
        "granted",
        "size",
    )

    def __init__(self, size: int, send_permits: Callable[[int], None]) -> None:
        if size < 0:
            raise ValueError(f"receiver queue size must be >= 0, got {size}")
        self.size = size
        self._send_permits = send_permits
        self._threshold = max(size // 2, 1)
        self._earned = 0  # permits the application freed since the last grant
        self._paused = False
        self._requested = False  # zero queue: a receive call is waiting for its message
        self.granted = 0  # permits granted on the current connection (for stats)

    def connection_opened(self, still_queued: int = 0) -> None:
        """A new connection: forget earned permits, grant the window less what is still
        queued from the old connection (kept only where the broker will not redeliver it)."""
        self._earned = 0
        self.granted = 0
        if self.size > still_queued:
            if self._paused:
                self._earned = self.size - still_queued  # granted on resume
            else:
                self._grant(self.size - still_queued)
        elif self._requested:  # the old connection took the zero queue's request with it
            self._grant(1)

    def message_taken(self) -> None:
        """The application took a message of this window: its permit is free again."""
        if not self.size:
            self._requested = False
            return
        self._earned += 1
        if self._earned >= self._threshold and not self._paused:
            self._grant(self._earned)

    def messages_taken(self, count: int) -> None:
        """The application took ``count`` messages of this window at once."""
        if not self.size:
            self._requested = False
            return
        self._earned += count
        if self._earned >= self._threshold and not self._paused:
            self._grant(self._earned)

    def release(self, count: int) -> None:
        """``count`` queued messages were dropped unseen: their permits are free again."""
        if not self.size or not count:
            return
        self._earned += count
        if self._earned >= self._threshold and not self._paused:
            self._grant(self._earned)

    def request_one(self) -> None:
        """Zero queue: ask the broker for one message, unless a request is outstanding."""
        if not self._requested:
            self._requested = True
            self._grant(1)

    def pause(self) -> None:
        """Stop granting permits; messages in flight still arrive."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        if self._earned:
            self._grant(self._earned)

    def _grant(self, permits: int) -> None:
        self._earned = 0
        self.granted += permits
        self._send_permits(permits)


class ReceiveQueue(Generic[M]):
    """Messages waiting for the application, each with the window it came through.

    Stored as the dispatches they arrived in (a batch entry is one chunk), so that taking
    a message costs no per-message bookkeeping beyond an index.
    """

    def __init__(self) -> None:
        self._chunks: deque[tuple[Sequence[M], FlowWindow]] = deque()
        self._offset = 0  # messages of the first chunk already taken
        self._size = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._error: BaseException | None = None

    def __len__(self) -> int:
        return self._size

    def put_all(self, messages: Sequence[M], window: FlowWindow) -> None:
        """Queue the messages of one dispatch, in order (the queue keeps the list)."""
        if not messages:
            return
        self._chunks.append((messages, window))
        self._size += len(messages)
        for _ in range(len(messages)):  # not the messages: a lazy dispatch makes them
            if not self._waiters:
                break
            self._wake_next()

    def get_nowait(self) -> M | None:
        """The oldest message, or None; its permit goes back to its window."""
        if not self._size:
            return None
        messages, window = self._chunks[0]
        if type(messages) is not list:  # a lazy dispatch: its messages made once, here
            messages = list(messages)
            self._chunks[0] = (messages, window)
        message = messages[self._offset]
        self._offset += 1
        if self._offset == len(messages):
            self._chunks.popleft()
            self._offset = 0
        self._size -= 1
        window.message_taken()
        return message

    def take(self, limit: int, byte_limit: ByteLimit[M] | None = None) -> list[M]:
        """Up to ``limit`` of the oldest messages, by slices of their dispatches; their
        permits go back to their windows. ``byte_limit`` (max bytes, size of a message):
        stop at the message that makes the total reach it (that one included)."""
        taken: list[M] = []
        for messages, start, end in self.take_slices(limit, byte_limit):
            taken += messages if start == 0 and end == len(messages) else messages[start:end]
        return taken

    def take_slices(
        self, limit: int, byte_limit: ByteLimit[M] | None = None
    ) -> list[tuple[Sequence[M], int, int]]:
        """As ``take``, as (dispatch, start, end) slices: without a byte limit, no message
        is touched."""
        slices: list[tuple[Sequence[M], int, int]] = []
        taken = total_bytes = 0
        chunks = self._chunks
        max_bytes, size = byte_limit if byte_limit is not None else (None, None)
        while chunks and taken < limit and (max_bytes is None or total_bytes < max_bytes):
            messages, window = chunks[0]
            start = self._offset
            end = min(len(messages), start + limit - taken)
            if max_bytes is not None and size is not None:
                for index in range(start, end):
                    total_bytes += size(messages[index])
                    if total_bytes >= max_bytes:
                        end = index + 1
                        break
            slices.append((messages, start, end))
            if end == len(messages):
                chunks.popleft()
                self._offset = 0
            else:
                self._offset = end
            window.messages_taken(end - start)
            taken += end - start
        self._size -= taken
        return slices

    async def wait(self, timeout: float | None) -> None:
        """Until a message is queued; TimeoutError after ``timeout`` seconds, or the error
        the queue was closed with."""
        if self._size:
            return
        if self._error is not None:
            raise self._error
        async with asyncio.timeout(timeout):
            while not self._size:
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter.done() and not waiter.cancelled() and self._size:
                        self._wake_next()  # we were woken but leave: pass the wake on
                    raise
                if not self._size and self._error is not None:
                    raise self._error

    async def get(self, timeout: float | None = None) -> M:
        """Wait for a message; TimeoutError after ``timeout`` seconds, or the error the queue
        was closed with."""
        message = self.get_nowait()
        if message is not None:
            return message
        async with asyncio.timeout(timeout):
            while True:
                await self.wait(None)
                message = self.get_nowait()
                if message is not None:
                    return message

    def close(self, error: BaseException) -> None:
        """No more messages will come: waiting and later ``get`` calls raise ``error``
        (once the queued messages are taken)."""
        self._error = error
        while self._waiters:
            self._wake_next()

    def count(self, window: FlowWindow) -> int:
        """Messages of ``window`` still queued."""
        taken = self._offset if self._chunks and self._chunks[0][1] is window else 0
        return sum(len(messages) for messages, w in self._chunks if w is window) - taken

    def remove_window(self, window: FlowWindow) -> int:
        """Drop the messages of ``window`` (its connection is gone and the broker will
        redeliver them); returns how many were dropped. Rare: it may take its time."""
        before = self._size
        chunks = list(self._chunks)
        if chunks:  # cut off what was taken of the first chunk
            chunks[0] = (chunks[0][0][self._offset :], chunks[0][1])
        self._chunks = deque(c for c in chunks if c[1] is not window and c[0])
        self._offset = 0
        self._size = sum(len(c[0]) for c in self._chunks)
        return before - self._size

    def _wake_next(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
