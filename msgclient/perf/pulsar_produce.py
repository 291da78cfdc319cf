"""Produce throughput on Pulsar: msgclient versus the official pulsar-client.

Both pipeline ``count`` messages as fast as their API allows (send_async, blocking when
the queue is full) with the same batching settings, and stop the clock when the broker
has confirmed the last one.
"""

from __future__ import annotations

import asyncio
import time

import msgclient

MAX_PENDING = 10_000  # the same queue bound for both clients
BATCH_OPTIONS = {
    "batching_enabled": True,
    "batching_max_messages": 1000,
    "batching_max_allowed_size_in_bytes": 128 * 1024,
    "batching_max_publish_delay_ms": 1,
}


async def msgclient_produce(service_url: str, topic: str, count: int, size: int) -> float:
    """Seconds to produce ``count`` messages of ``size`` bytes with msgclient."""
    payload = b"x" * size
    async with msgclient.Client(service_url) as client:
        producer = await client.create_producer(topic, block_if_queue_full=True, **BATCH_OPTIONS)
        await producer.send(payload)  # connection and topic warm
        send = producer.send_async
        start = time.perf_counter()
        futures = [await send(payload) for _ in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - start
        failed = sum(1 for f in futures if f.exception() is not None)
        if failed:
            raise RuntimeError(f"msgclient: {failed} of {count} sends failed")
        await producer.close()
    return elapsed


def official_produce(service_url: str, topic: str, count: int, size: int) -> float:
    """Seconds to produce ``count`` messages of ``size`` bytes with pulsar-client.

    Its fastest way: no per-message callback (a Python callback per message costs it
    about 3x, measured here), and ``flush()``, which returns once all are confirmed.
    """
    import pulsar

    payload = b"x" * size
    client = pulsar.Client(service_url, logger=quiet_logger())
    try:
        producer = client.create_producer(
            topic, block_if_queue_full=True, max_pending_messages=MAX_PENDING, **BATCH_OPTIONS
        )
        producer.send(payload)
        start = time.perf_counter()
        for _ in range(count):
            producer.send_async(payload, None)
        producer.flush()
        elapsed = time.perf_counter() - start
        producer.close()
    finally:
        client.close()
    return elapsed


def quiet_logger() -> object:
    import logging

    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


def run_msgclient(service_url: str, topic: str, count: int, size: int) -> float:
    return asyncio.run(msgclient_produce(service_url, topic, count, size))
