"""Reader: read a topic from a position, without a durable subscription."""

from __future__ import annotations

import asyncio

from msgclient.closing import AsyncClosing
from msgclient.consumer import Consumer
from msgclient.message import Message, MessageId
from msgclient.options import InitialPosition


class Reader(AsyncClosing):
    """Reads messages in order from where ``Client.create_reader`` started it.

    It runs on an exclusive, non-durable subscription of its own, so it needs no
    acknowledgments and leaves nothing behind on the broker when closed.
    """

    def __init__(
        self, consumer: Consumer, start: MessageId | InitialPosition, inclusive: bool
    ) -> None:
        self._consumer = consumer
        self._start = start
        self._inclusive = inclusive
        self._last_read: dict[str, MessageId] = {}  # by partition topic name

    @property
    def topic(self) -> str:
        return self._consumer.topic

    def is_connected(self) -> bool:
        """Whether the reader's subscription is registered on an open connection (on every
        partition)."""
        return self._consumer.is_connected()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; ReceiveTimeoutError if none arrives within the timeout.

        A reader moves forward through each partition: a message at or before the last
        one read of its partition is a second copy (a broker dispatching twice) and is
        skipped.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000
        while True:
            remaining = None if deadline is None else max(0, int((deadline - loop.time()) * 1000))
            message = await self._consumer.receive(remaining)
            last = self._last_read.get(message.topic_name())
            if last is None or message.message_id() > last:
                break
        self._last_read[message.topic_name()] = message.message_id()
        # As the Java reader: move the subscription's cursor, so that a broker resuming
        # the subscription after a reconnect resumes after what was read.
        self._consumer.acknowledge_cumulative(message)
        return message

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> Message:
        return await self.read_next()

    async def has_message_available(self) -> bool:
        """Whether a ``read_next`` would find a message now (asks the broker when the local
        queue is empty)."""
        if self._consumer.stats().queue_depth:
            return True
        last_ids = await self._consumer.last_message_ids()
        return any(self._after_read(topic, last) for topic, last in last_ids.items())

    def _after_read(self, topic: str, last: MessageId | None) -> bool:
        """Whether ``last``, a partition's last message, is beyond what was read of it."""
        if last is None:
            return False
        read = self._last_read.get(topic)
        if read is not None:
            return last > read
        if isinstance(self._start, MessageId):
            return last >= self._start if self._inclusive else last > self._start
        return self._start is InitialPosition.Earliest

    async def seek(self, position: MessageId | int) -> None:
        """Read on from a message id, or a publish time (ms since the epoch)."""
        await self._consumer.seek(position)
        self._last_read = {}
        # The broker's next message is the one sought (by id), or the first published at
        # or after the time: anything in the topic may be next.
        self._start = position if isinstance(position, MessageId) else InitialPosition.Earliest
        self._inclusive = True

    async def close(self) -> None:
        await self._consumer.close()
