"""Messages of one or more receivers (readers, a consumer) in one queue, taken in batches.

A task per receiver moves its messages into the queue, in the receiver's order; a batch
is what is queued, so output is written and flushed once per batch. A receiver's error
comes out of ``next_batch`` after the messages before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from msgclient.message import Message

QUEUED = 1000


class Pump:
    def __init__(self, receivers: Sequence[Callable[[], Awaitable[Message]]]) -> None:
        self._queue: asyncio.Queue[Message | BaseException] = asyncio.Queue(QUEUED)
        self._error: BaseException | None = None
        self._tasks = [asyncio.create_task(self._pump(receive)) for receive in receivers]

    async def _pump(self, receive: Callable[[], Awaitable[Message]]) -> None:
        while True:
            try:
                message = await receive()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                await self._queue.put(error)
                return
            await self._queue.put(message)

    async def next_batch(self, limit: int) -> list[Message]:
        """At least one message and at most ``limit``: those queued now."""
        if self._error is not None:
            raise self._error
        batch: list[Message] = []
        item = await self._queue.get()
        while True:
            if isinstance(item, BaseException):
                if not batch:
                    raise item
                self._error = item
                break
            batch.append(item)
            if len(batch) >= limit:
                break
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
        return batch

    async def close(self) -> None:
        """Stop taking messages (those queued and not taken are dropped: a reader's are
        read again next time, a consumer's are not acknowledged, so redelivered)."""
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
