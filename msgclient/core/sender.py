"""NodeSender: ready batches bound for one broker, drained into requests.

The Kafka client's Sender drains the ready batches of every partition led by one broker
into ONE Produce request (RecordAccumulator.drain), at most one batch per partition per
request, and keeps at most ``max_in_flight`` requests unanswered on the connection. Pulsar
has one partition per SEND frame and no request-level answer: it drains with one batch per
request and no in-flight bound, and gains the coalescing of every frame that became ready in
one turn of the event loop into one socket write.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

B = TypeVar("B", bound="ReadyBatch")


class ReadyBatch:
    """One closed batch waiting for a request: its partition and its encoded size."""

    __slots__ = ("partition", "size")

    def __init__(self, partition: Hashable, size: int) -> None:
        self.partition = partition
        self.size = size


# Sends one request carrying ``batches``; an awaitable that ends when the broker answered
# (or failed), or None when the protocol expects no answer.
SendRequest = Callable[[list[B]], Awaitable[object] | None]
# Told of batches whose request could not even be built or written.
RequestFailed = Callable[[list[B], Exception], None]


class NodeSender(Generic[B]):
    """Per connection: ``ready(batch)`` queues, a drain on the next loop turn sends."""

    def __init__(
        self,
        send_request: SendRequest[B],
        *,
        on_failure: RequestFailed[B],
        max_in_flight: int | None,
        max_request_bytes: int | None,
        one_batch_per_request: bool = False,
    ) -> None:
        self._send_request = send_request
        self._on_failure = on_failure
        self._max_in_flight = max_in_flight
        self._max_request_bytes = max_request_bytes
        self._one_per_request = one_batch_per_request
        self._ready: deque[B] = deque()
        self._in_flight = 0
        self._drain_scheduled = False
        self._loop = asyncio.get_running_loop()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def __len__(self) -> int:
        return len(self._ready)

    def ready(self, batch: B) -> None:
        self._ready.append(batch)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        ready = self._ready
        while ready and (self._max_in_flight is None or self._in_flight < self._max_in_flight):
            if self._one_per_request:
                requests = [[b] for b in ready]
                ready.clear()
                for request in requests:
                    self._send(request)
                return
            self._send(self._take_request())

    def _take_request(self) -> list[B]:
        """Oldest first, one batch per partition, up to the request size (at least one)."""
        ready = self._ready
        taken: list[B] = []
        skipped: list[B] = []
        partitions: set[Hashable] = set()
        size = 0
        limit = self._max_request_bytes
        while ready:
            batch = ready[0]
            if taken and limit is not None and size + batch.size > limit:
                break
            ready.popleft()
            if batch.partition in partitions:
                skipped.append(batch)  # the partition's next batch waits for a later request
                continue
            partitions.add(batch.partition)
            taken.append(batch)
            size += batch.size
        ready.extendleft(reversed(skipped))
        return taken

    def _send(self, batches: list[B]) -> None:
        # Runs in a loop callback: a failure must reach the batches' owners, not the loop.
        try:
            answer = self._send_request(batches)
        except Exception as error:
            self._on_failure(batches, error)
            return
        if answer is None:
            return
        self._in_flight += 1
        asyncio.ensure_future(answer).add_done_callback(self._answered)

    def _answered(self, _: object) -> None:
        self._in_flight -= 1
        if self._ready and not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)
