"""NodeSender: ready batches bound for one broker, drained into requests.

The Kafka client's Sender drains the ready batches of every partition led by one broker
into ONE Produce request (RecordAccumulator.drain), at most one batch per partition per
request, and keeps at most ``max_in_flight`` requests unanswered on the connection.
(Pulsar needs none of this: a SEND frame carries one partition's batch and has no
request-level answer, so its frames go straight to the connection.)
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

B = TypeVar("B", bound="ReadyBatch")


class ReadyBatch:
    """One closed batch waiting for a request: its partition and its encoded size."""

    __slots__ = ("partition", "size")

    def __init__(self, partition: Hashable, size: int) -> None:
        self.partition = partition
        self.size = size


# Sends one request carrying ``batches``; a future of the broker's answer (done callbacks
# run in the order the answers resolve, which is the order the broker sent them), or None
# when the protocol expects no answer.
SendRequest = Callable[[list[B]], "asyncio.Future[Any] | None"]
# Told of batches whose request could not even be built or written.
RequestFailed = Callable[[list[B], Exception], None]


class NodeSender(Generic[B]):
    """Per connection: ``ready(batch)`` queues, a drain on the next loop turn sends.

    Ready batches wait per partition, so taking one of each partition costs one step per
    partition, not per batch queued; the partitions served go to the back of the line
    (the Java client's rotating drain index), so none starves under the size limit.
    """

    def __init__(
        self,
        send_request: SendRequest[B],
        *,
        on_failure: RequestFailed[B],
        max_in_flight: int | None,
        max_request_bytes: int | None,
        writable: Callable[[], bool] | None = None,
    ) -> None:
        self._send_request = send_request
        self._writable = writable
        self._on_failure = on_failure
        self._max_in_flight = max_in_flight
        self._max_request_bytes = max_request_bytes
        self._by_partition: dict[Hashable, deque[B]] = {}  # in the order to serve them
        self._count = 0
        self._in_flight = 0
        self._drain_scheduled = False
        self._loop = asyncio.get_running_loop()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def __len__(self) -> int:
        return self._count

    def ready(self, batch: B) -> None:
        waiting = self._by_partition.get(batch.partition)
        if waiting is None:
            self._by_partition[batch.partition] = deque((batch,))
        else:
            waiting.append(batch)
        self._count += 1
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def wake(self) -> None:
        """Drain on the next loop turn (the connection takes writes again)."""
        if self._count and not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if self._writable is not None and not self._writable():
            return  # the peer is not reading: batches wait here; wake() resumes
        while self._count and (
            self._max_in_flight is None or self._in_flight < self._max_in_flight
        ):
            self._send(self._take_request())

    def _take_request(self) -> list[B]:
        """One batch per partition, oldest first within each, up to the request size (at
        least one batch)."""
        taken: list[B] = []
        size = 0
        limit = self._max_request_bytes
        by_partition = self._by_partition
        for partition in list(by_partition):
            waiting = by_partition[partition]
            batch = waiting[0]
            if taken and limit is not None and size + batch.size > limit:
                break
            waiting.popleft()
            del by_partition[partition]  # served: to the back of the line, if it has more
            if waiting:
                by_partition[partition] = waiting
            taken.append(batch)
            size += batch.size
        self._count -= len(taken)
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
        answer.add_done_callback(self._answered)

    def _answered(self, _: object) -> None:
        self._in_flight -= 1
        self.wake()
