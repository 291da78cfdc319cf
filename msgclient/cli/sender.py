"""Sending records on the bulk path, and keeping count of their confirmations.

Each list of records goes out by ``Producer.send_many_async`` (by columns: values, keys,
headers, event timestamps), one call per run of records for one partition; the call
returns once the records are queued, and the confirmation is awaited only at the end,
so sends pipeline. Counts move as confirmations come.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import TypeVar

from msgclient.cli.records import Record
from msgclient.producer import Producer
from msgclient.sent_messages import SentMessages

T = TypeVar("T")


class Sender:
    def __init__(
        self, producer: Producer, on_confirmed: Callable[[int], None], by_partition: bool
    ) -> None:
        """``by_partition``: send records with a partition to it (Kafka); else let the
        producer route every record (Pulsar names a partition by its own topic)."""
        self._producer = producer
        self._by_partition = by_partition
        self._on_confirmed = on_confirmed
        self._pending: set[asyncio.Future[SentMessages]] = set()
        self.queued = 0  # handed to the producer
        self.confirmed = 0  # stored by the broker
        self.failed = 0
        self.error: BaseException | None = None  # the first failure

    async def send(self, records: Sequence[Record]) -> None:
        """Queue ``records``, in order (a run per partition)."""
        if not self._by_partition:
            await self._send_run(None, records)
            return
        for partition, run in itertools.groupby(records, key=lambda r: r.partition):
            await self._send_run(partition, list(run))

    async def _send_run(self, partition: int | None, batch: Sequence[Record]) -> None:
        confirmed = await self._producer.send_many_async(
            [r.value for r in batch],
            keys=_column([r.key for r in batch]),
            properties=_column([r.headers for r in batch]),
            event_timestamps=_column([r.event_timestamp for r in batch]),
            partition=partition,
        )
        self.queued += len(batch)
        self._pending.add(confirmed)
        confirmed.add_done_callback(functools.partial(self._settled, len(batch)))

    def _settled(self, count: int, future: asyncio.Future[SentMessages]) -> None:
        self._pending.discard(future)
        error = future.exception() if not future.cancelled() else asyncio.CancelledError()
        if error is None:
            self.confirmed += count
            self._on_confirmed(count)
            return
        self.failed += count
        if self.error is None:
            self.error = error

    async def finish(self) -> None:
        """Send what is batched and wait until every record queued is confirmed or failed."""
        await self._producer.flush()
        if self._pending:
            await asyncio.wait(set(self._pending))


def _column(values: list[T]) -> list[T] | None:
    """``values``, or None when every one is None (the bulk path's plainest case)."""
    return values if any(v is not None for v in values) else None
