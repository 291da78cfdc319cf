"""Consume throughput on Pulsar: msgclient versus the official pulsar-client.

Both read the same backlog of ``count`` messages, each through a Shared subscription of its
own that existed before the backlog was produced, with ``receive`` + ``acknowledge`` per
message and the default receiver queue (1000). The clock runs from the first receive to
the last acknowledgment handed to the client.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import msgclient
from msgclient.perf.pulsar_produce import BATCH_OPTIONS, quiet_logger

SUBSCRIPTIONS = {"msgclient": "perf-msgclient", "pulsar-client": "perf-official"}


@dataclass(frozen=True)
class Backlog:
    service_url: str
    topic: str
    count: int


def make_backlog(service_url: str, topic: str, count: int, size: int) -> Backlog:
    """Subscribe both contenders, then produce the backlog (with the official client)."""
    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    try:
        for subscription in SUBSCRIPTIONS.values():
            client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Shared).close()
        producer = client.create_producer(topic, block_if_queue_full=True, **BATCH_OPTIONS)
        payload = b"x" * size
        for _ in range(count):
            producer.send_async(payload, None)
        producer.flush()
    finally:
        client.close()
    return Backlog(service_url, topic, count)


async def _msgclient_consume(backlog: Backlog) -> float:
    async with msgclient.Client(backlog.service_url) as client:
        consumer = await client.subscribe(
            backlog.topic,
            SUBSCRIPTIONS["msgclient"],
            consumer_type=msgclient.ConsumerType.Shared,
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
        for _ in range(backlog.count):
            acknowledge(await receive(10_000))
        elapsed = time.perf_counter() - start
        await consumer.close()
    return elapsed


def msgclient_consume(backlog: Backlog) -> float:
    """Seconds for msgclient to receive and acknowledge the backlog."""
    return asyncio.run(_msgclient_consume(backlog))


def official_consume(backlog: Backlog) -> float:
    """Seconds for pulsar-client to receive and acknowledge the backlog."""
    import pulsar

    client = pulsar.Client(backlog.service_url, logger=quiet_logger())
    try:
        consumer = client.subscribe(
            backlog.topic, SUBSCRIPTIONS["pulsar-client"], consumer_type=pulsar.ConsumerType.Shared
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
        for _ in range(backlog.count):
            acknowledge(receive(10_000))
        elapsed = time.perf_counter() - start
        consumer.close()
    finally:
        client.close()
    return elapsed
