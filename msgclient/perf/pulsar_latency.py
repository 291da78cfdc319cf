"""End-to-end latency on Pulsar at a fixed rate: publish to receive, per message.

Each client produces ``rate`` messages per second for ``seconds`` to a fresh topic and
consumes them itself; every payload carries its send time, and the receiver records
``now - sent``. Each row of ``ROWS`` gives both clients the same batching: the official
client's defaults (10 ms), and msgclient's default delay (1 ms).
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from typing import Any

import msgclient
from msgclient.perf import event_loop
from msgclient.perf.pulsar_produce import OFFICIAL_BATCHING, Row, quiet_logger

_STAMP = struct.Struct(">d")
ONE_MS = {**OFFICIAL_BATCHING, "batching_max_publish_delay_ms": 1}
ROWS = (
    Row("10 ms", "both: batches of 10 ms / 1000 / 128 KiB", OFFICIAL_BATCHING, OFFICIAL_BATCHING),
    Row("1 ms", "both: batches of 1 ms / 1000 / 128 KiB", ONE_MS, ONE_MS),
)


def _payload(size: int) -> bytes:
    return _STAMP.pack(time.perf_counter()) + b"x" * max(0, size - _STAMP.size)


def _latency(data: bytes) -> float:
    sent: float = _STAMP.unpack_from(data)[0]
    return time.perf_counter() - sent


async def _msgclient_latency(
    url: str, topic: str, rate: int, seconds: float, size: int, options: dict[str, Any]
) -> list[float]:
    count = int(rate * seconds)
    latencies: list[float] = []
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic, "latency", consumer_type=msgclient.ConsumerType.Shared
        )
        producer = await client.create_producer(topic, **options)

        async def consume() -> None:
            while len(latencies) < count:
                message = await consumer.receive(10_000)
                latencies.append(_latency(message.data()))
                consumer.acknowledge(message)

        receiver = asyncio.ensure_future(consume())
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(count):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await producer.send_async(_payload(size))
        await asyncio.wait_for(receiver, 30)
        await producer.close()
        await consumer.close()
    return latencies


def msgclient_latency(
    url: str, topic: str, rate: int, seconds: float, size: int, options: dict[str, Any]
) -> list[float]:
    return event_loop.run(_msgclient_latency(url, topic, rate, seconds, size, options))


def official_latency(
    url: str, topic: str, rate: int, seconds: float, size: int, options: dict[str, Any]
) -> list[float]:
    import pulsar

    count = int(rate * seconds)
    latencies: list[float] = []
    client = pulsar.Client(url, logger=quiet_logger())
    try:
        consumer = client.subscribe(topic, "latency", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, block_if_queue_full=True, **options)

        def consume() -> None:
            while len(latencies) < count:
                message = consumer.receive(10_000)
                latencies.append(_latency(message.data()))
                consumer.acknowledge(message)

        receiver = threading.Thread(target=consume, daemon=True)
        receiver.start()
        start = time.perf_counter()
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            producer.send_async(_payload(size), None)
        receiver.join(30)
        producer.close()
        consumer.close()
    finally:
        client.close()
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
