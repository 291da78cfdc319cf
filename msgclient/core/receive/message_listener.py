"""MessageListenerRunner: hands a consumer's messages to a ``message_listener`` on the loop.

The official client calls the listener on a listener thread, one message at a time, instead
of ``receive()``. Here a task on the event loop takes each message from the receive queue
and calls ``listener(consumer, message)``; a coroutine function (or anything returning an
awaitable) is awaited before the next message, so a consumer's messages reach its listener
in order, one at a time. A listener that raises has its error logged and the message stays
unacknowledged: the ack timeout or a negative ack brings it back, as in the official client.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from msgclient.core.receive.receive_queue import ReceiveQueue
from msgclient.options import MessageListener

log = logging.getLogger(__name__)

M = TypeVar("M")


class MessageListenerRunner(Generic[M]):
    """Runs from ``start()`` until ``close()`` or until the queue is closed."""

    def __init__(
        self,
        listener: MessageListener,
        consumer: object,
        queue: ReceiveQueue[M],
        delivered: Callable[[M], None],
        request_one: Callable[[], None] | None,
    ) -> None:
        self._listener = listener
        self._consumer = consumer
        self._queue = queue
        self._delivered = delivered  # the application has the message: ack timeout starts
        self._request_one = request_one  # zero queue: ask the broker for one message
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def pause(self) -> None:
        """No message reaches the listener until ``resume`` (the one it is in finishes)."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    async def close(self) -> None:
        """Stop: a listener call in progress is cancelled, unless close() is called from
        the listener itself (it then ends once the listener returns)."""
        task, self._task = self._task, None
        if task is None or task is asyncio.current_task() or task.done():
            return
        task.cancel()
        await asyncio.wait([task])

    async def _run(self) -> None:
        queue = self._queue
        while True:
            message = queue.get_nowait()
            if message is None:
                if self._request_one is not None:
                    self._request_one()
                try:
                    message = await queue.get()
                except Exception:  # the queue was closed: the consumer is done
                    return
            await self._resumed.wait()
            self._delivered(message)
            try:
                result = self._listener(self._consumer, message)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                # A listener error must not end the loop or the consumer: the message stays
                # unacknowledged and comes back by the ack timeout or a negative ack.
                log.exception("message_listener failed on %r; it stays unacknowledged", message)
