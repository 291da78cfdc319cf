"""Helpers for the Spark source tests: produce with msgclient, run streaming queries.

Every wait is bounded: ``TIMEOUT`` for a Spark job or a streaming run, the client's
operation timeout for a produce.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgclient
from msgclient.message import MessageId
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId

TIMEOUT = 90.0  # seconds


@dataclass(frozen=True)
class Sent:
    key: bytes
    value: bytes
    message_id: MessageId

    @property
    def partition(self) -> int:
        return max(0, getattr(self.message_id, "partition", 0))


def produce(
    url: str, topic: str, count: int, first: int = 0, **producer_options: Any
) -> list[Sent]:
    """``count`` messages ``v<i>`` with keys ``k<i>`` (one per batch: tansu's latest offset
    is right only for single-record batches, brokers.md), in order; what was sent."""
    numbers = range(first, first + count)

    async def send() -> list[MessageId]:
        async with msgclient.Client(url, operation_timeout_seconds=10) as client:
            options = {"batching_enabled": False, **producer_options}
            producer = await client.create_producer(topic, **options)
            futures = [
                await producer.send_async(
                    b"v%d" % i, partition_key=f"k{i}", properties={"n": str(i)}
                )
                for i in numbers
            ]
            await producer.flush()
            ids = await asyncio.gather(*futures)
            await producer.close()
            return ids

    ids = asyncio.run(asyncio.wait_for(send(), TIMEOUT))
    return [Sent(b"k%d" % i, b"v%d" % i, m) for i, m in zip(numbers, ids, strict=True)]


def pulsar_json(message_id: MessageId) -> str:
    """A Pulsar message id as the source's offset JSON holds it."""
    return base64.b64encode(message_id.serialize()).decode()


def row_id(row: Any) -> MessageId:
    """The message id a row of the source stands for."""
    if "messageId" in row.asDict():
        return PulsarMessageId.deserialize(bytes(row.messageId))
    return KafkaMessageId(row.topic, row.partition, row.offset)


@dataclass
class Batches:
    """What a streaming query wrote, micro-batch by micro-batch (foreachBatch)."""

    rows: dict[int, list[Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = frame.collect()
        with self.lock:
            self.rows[batch_id] = rows

    def sizes(self) -> list[int]:
        return [len(self.rows[i]) for i in sorted(self.rows)]

    def values(self) -> list[bytes]:
        return [bytes(r.value) for i in sorted(self.rows) for r in self.rows[i]]


def run_available_now(
    spark: Any, options: dict[str, str], checkpoint: str, sink: Batches | None = None
) -> Batches:
    """Run a query with Trigger.AvailableNow to its end (bounded)."""
    sink = sink if sink is not None else Batches()
    reader = spark.readStream.format("msgclient")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(TIMEOUT)
        assert finished, f"the query did not finish within {TIMEOUT} s"
    finally:
        query.stop()
    return sink


def write_available_now(frame: Any, options: dict[str, str], checkpoint: str) -> None:
    """Write a streaming DataFrame through the sink with Trigger.AvailableNow, to its end
    (bounded); the query must not fail."""
    writer = frame.writeStream.format("msgclient").option("checkpointLocation", checkpoint)
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(TIMEOUT), f"not finished within {TIMEOUT} s"
        assert query.exception() is None
    finally:
        query.stop()


def read_batch(spark: Any, options: dict[str, str]) -> list[Any]:
    reader = spark.read.format("msgclient")
    for key, value in options.items():
        reader = reader.option(key, value)
    return list(reader.load().collect())


def keys_values(rows: Sequence[Any]) -> set[tuple[bytes, bytes]]:
    return {(bytes(r.key), bytes(r.value)) for r in rows}
