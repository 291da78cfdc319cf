"""Helpers for the consumer and reader tests on pulsar-lite: produce with msgclient, receive
with bounded waits, and say that nothing more arrives.

Every wait is bounded by ``TIMEOUT`` (or a shorter one given), so a test that would hang
fails instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgclient
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.pulsar.helpers import QUIET_MS, TIMEOUT, settle

EARLIEST = msgclient.InitialPosition.Earliest
SLACK_S = 0.02  # loop.time() vs time.monotonic(), and the wheel's tick rounding
LATE_MARGIN_S = 0.4  # how late a timer may fire on a loaded 2-core machine


def full_name(topic: str) -> str:
    return f"persistent://public/default/{topic}"


async def produce(
    client: msgclient.Client,
    topic: str,
    values: Sequence[bytes],
    *,
    keys: Sequence[str | None] | None = None,
    properties: Mapping[str, str] | None = None,
    **producer_options: Any,
) -> list[PulsarMessageId]:
    """Send ``values`` (with ``keys[i]`` as partition key) through one producer, pipelined;
    their ids in order. The producer is closed afterwards."""
    producer = await asyncio.wait_for(client.create_producer(topic, **producer_options), TIMEOUT)
    try:
        futures = [
            await producer.send_async(
                value,
                partition_key=keys[i] if keys is not None else None,
                properties=properties,
            )
            for i, value in enumerate(values)
        ]
        return await settle(futures)
    finally:
        await asyncio.wait_for(producer.close(), TIMEOUT)


async def produce_one_by_one(
    client: msgclient.Client, topic: str, values: Sequence[bytes]
) -> list[PulsarMessageId]:
    """Unbatched, each send awaited before the next: no pipelining.

    For Exclusive/Failover subscriptions, on which pulsar-lite dispatches duplicates when
    the producer pipelines (brokers.md quirk).
    """
    producer = await asyncio.wait_for(
        client.create_producer(topic, batching_enabled=False), TIMEOUT
    )
    try:
        ids = [await asyncio.wait_for(producer.send(value), TIMEOUT) for value in values]
    finally:
        await asyncio.wait_for(producer.close(), TIMEOUT)
    assert all(isinstance(i, PulsarMessageId) for i in ids)
    return ids  # type: ignore[return-value]


async def receive_n(
    consumer: msgclient.Consumer, count: int, timeout: float = TIMEOUT
) -> list[msgclient.Message]:
    """Exactly ``count`` messages (not acknowledged); fail if they take over ``timeout``."""
    messages: list[msgclient.Message] = []
    deadline = time.monotonic() + timeout
    while len(messages) < count:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        try:
            messages.append(await consumer.receive(timeout_millis=max(1, remaining_ms)))
        except msgclient.ReceiveTimeoutError:
            raise AssertionError(
                f"received {len(messages)} of {count} messages within {timeout:g} s: "
                f"{[m.data()[:20] for m in messages]}"
            ) from None
    return messages


async def receive_one(
    consumer: msgclient.Consumer, timeout: float = TIMEOUT
) -> tuple[msgclient.Message, float]:
    """The next message and ``time.monotonic()`` when receive returned it."""
    (message,) = await receive_n(consumer, 1, timeout)
    return message, time.monotonic()


async def drain(
    consumer: msgclient.Consumer,
    quiet_ms: int = QUIET_MS,
    *,
    ack: bool = False,
    at_least: int = 0,
) -> list[msgclient.Message]:
    """The ``at_least`` messages expected (each waited for, within TIMEOUT in all), then
    every message that arrives until none has for ``quiet_ms``: the quiet period only
    shows that nothing more comes, it never cuts short what is expected."""
    messages: list[msgclient.Message] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        expecting = len(messages) < at_least
        wait_ms = int((deadline - time.monotonic()) * 1000) if expecting else quiet_ms
        try:
            message = await consumer.receive(timeout_millis=max(1, wait_ms))
        except msgclient.ReceiveTimeoutError:
            if expecting:
                break
            return messages
        if ack:
            consumer.acknowledge(message)
        messages.append(message)
    if len(messages) < at_least:
        raise AssertionError(f"{len(messages)} messages within {TIMEOUT:g} s, not {at_least}")
    raise AssertionError(f"messages kept coming for {TIMEOUT:g} s ({len(messages)} so far)")


async def assert_no_message(consumer: msgclient.Consumer, quiet_ms: int = QUIET_MS) -> None:
    """Nothing arrives within ``quiet_ms``."""
    try:
        message = await consumer.receive(timeout_millis=quiet_ms)
    except msgclient.ReceiveTimeoutError:
        return
    raise AssertionError(
        f"unexpected message {message.data()[:40]!r} ({message.message_id()}, "
        f"redelivery_count={message.redelivery_count()}) on {message.topic_name()}"
    )


async def ack_confirmed(
    consumer: msgclient.Consumer, messages: Sequence[msgclient.Message]
) -> None:
    """Acknowledge ``messages`` and wait for the broker's confirmation: the consumer must
    have ``ack_receipt_enabled=True`` (without it the futures are done at once)."""
    await asyncio.wait_for(asyncio.gather(*(consumer.acknowledge(m) for m in messages)), TIMEOUT)


def payloads(messages: Sequence[msgclient.Message]) -> list[bytes]:
    return [m.data() for m in messages]
