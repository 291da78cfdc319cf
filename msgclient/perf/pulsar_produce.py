"""Produce throughput on Pulsar: msgclient versus the official pulsar-client.

Both pipeline ``count`` messages as fast as their API allows (send_async, blocking when
the queue is full) and stop the clock when the broker has confirmed the last one; each run
measures msg/s and the CPU time of the client's process a message. Each row of ``ROWS``
gives both clients their settings and way to send: the same batching for both, each at its
own defaults, each message's confirmation seen (the official client with a callback per
message), and bulk.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.perf import event_loop
from msgclient.perf.stopwatch import Measured, Stopwatch

# The official client's batching defaults (its C++ core's), which "the same" means.
OFFICIAL_BATCHING: dict[str, Any] = {
    "batching_enabled": True,
    "batching_max_messages": 1000,
    "batching_max_allowed_size_in_bytes": 128 * 1024,
    "batching_max_publish_delay_ms": 10,
}
SAME: dict[str, Any] = {
    **OFFICIAL_BATCHING,
    "max_pending_messages": 10_000,
    "block_if_queue_full": True,
}
# A pipelining loop must wait when the queue is full: at the official client's default
# (block_if_queue_full=False) a send_async beyond 1000 pending fails its message. So both
# block; everything else is the client's default.
MSGCLIENT_DEFAULTS: dict[str, Any] = {"block_if_queue_full": True}
OFFICIAL_DEFAULTS: dict[str, Any] = {"batching_enabled": True, "block_if_queue_full": True}


@dataclass(frozen=True)
class Row:
    """One configuration, both clients: their producer options and a line describing them."""

    label: str
    settings: str
    msgclient: dict[str, Any]
    official: dict[str, Any]
    bulk: bool = False  # msgclient sends with send_many_async, BULK values a call
    callbacks: bool = False  # each client gets a callback per message


ROWS = (
    Row(
        "same",
        "both: batches of 10 ms / 1000 messages / 128 KiB, 10 000 pending, block when full",
        SAME,
        SAME,
    ),
    Row(
        "callbacks",
        "as 'same'; each client with a callback per message (msgclient's send_async then "
        "makes no future)",
        SAME,
        SAME,
        callbacks=True,
    ),
    Row(
        "defaults",
        "each its defaults, blocking when full: msgclient 1 ms / 1000 / 128 KiB, no pending "
        "bound (64 MiB memory limit); pulsar-client batching on, 10 ms / 1000 / 128 KiB, "
        "1000 pending",
        MSGCLIENT_DEFAULTS,
        OFFICIAL_DEFAULTS,
    ),
    Row(
        "bulk",
        "msgclient send_many_async of 10 000 values a call, pulsar-client send_async; both at the "
        "same batching as 'same'",
        SAME,
        SAME,
        bulk=True,
    ),
)
BULK = 10_000


async def _msgclient_produce(
    service_url: str,
    topic: str,
    count: int,
    size: int,
    options: dict[str, Any],
    bulk: bool,
    callbacks: bool,
) -> Measured:
    payload = b"x" * size
    async with msgclient.Client(service_url) as client:
        producer = await client.create_producer(topic, **options)
        await producer.send(payload)  # connection and topic warm
        if bulk:  # each call queued while the earlier are in flight, as the Kafka row
            clock = Stopwatch()
            confirmations = [
                await producer.send_many_async([payload] * min(BULK, count - done))
                for done in range(0, count, BULK)
            ]
            await asyncio.gather(*confirmations)  # raises if a batch failed
            measured = clock.stop(count)
            await producer.close()
            return measured
        send = producer.send_async
        failed = 0

        def delivered(error: BaseException | None, _: msgclient.MessageId | None) -> None:
            nonlocal failed
            if error is not None:
                failed += 1

        clock = Stopwatch()
        if callbacks:
            for _ in range(count):
                await send(payload, delivered)
            await producer.flush()
        else:
            futures = [await send(payload) for _ in range(count)]
            await producer.flush()
            failed = sum(1 for f in futures if f.exception() is not None)
        measured = clock.stop(count)
        if failed:
            raise RuntimeError(f"msgclient: {failed} of {count} sends failed")
        await producer.close()
    return measured


def msgclient_produce(
    service_url: str,
    topic: str,
    count: int,
    size: int,
    options: dict[str, Any],
    bulk: bool = False,
    callbacks: bool = False,
) -> Measured:
    """``count`` messages of ``size`` bytes with msgclient (with ``send_many_async`` when
    ``bulk``; ``send_async`` with a callback each when ``callbacks``)."""
    return event_loop.run(
        _msgclient_produce(service_url, topic, count, size, options, bulk, callbacks)
    )


def official_produce(
    service_url: str,
    topic: str,
    count: int,
    size: int,
    options: dict[str, Any],
    callbacks: bool = False,
) -> Measured:
    """``count`` messages of ``size`` bytes with pulsar-client.

    Without ``callbacks`` its fastest way: no per-message callback, and ``flush()``, which
    returns once all are confirmed. With them, a callback per message that counts the
    failed ones, as a user who wants each message's outcome writes it.
    """
    import pulsar

    payload = b"x" * size
    failed = 0

    def delivered(result: Any, _: Any) -> None:
        nonlocal failed
        if result != pulsar.Result.Ok:
            failed += 1

    callback = delivered if callbacks else None
    client = pulsar.Client(service_url, logger=quiet_logger())
    try:
        producer = client.create_producer(topic, **options)
        producer.send(payload)
        clock = Stopwatch()
        for _ in range(count):
            producer.send_async(payload, callback)
        producer.flush()
        measured = clock.stop(count)
        producer.close()
    finally:
        client.close()
    if failed:
        raise RuntimeError(f"pulsar-client: {failed} of {count} sends failed")
    return measured


def quiet_logger() -> object:
    import logging

    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger
