"""``message_listener``: every message handed to a function or coroutine function on the
event loop, in order and one at a time, instead of ``receive()``; a failing listener is
logged and its message redelivered; pause and resume hold the listener back.

What the official client (3.13) does, checked by hand on pulsar-lite and matched here:
``receive()`` on a consumer with a listener fails with InvalidConfiguration; an exception in
the listener is logged and the message comes back with the ack timeout;
``pause_message_listener`` stops the calls until ``resume_message_listener``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from tests.pulsar.helpers import QUIET_MS, SHARED_FROM_EARLIEST, TIMEOUT, wait_until, within

COUNT = 50


async def test_function_listener_gets_every_message_in_order(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    seen: list[tuple[msgclient.Consumer, bytes]] = []

    def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        seen.append((consumer, message.data()))
        consumer.acknowledge(message)

    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "sub", message_listener=listener, **SHARED_FROM_EARLIEST
        )
        producer = await client.create_producer(topic)
        for i in range(COUNT):
            await producer.send_async(b"m%d" % i)
        await producer.flush()
        await wait_until(lambda: len(seen) == COUNT, f"{COUNT} messages to the listener")
        await asyncio.sleep(QUIET_MS / 1000)
        assert consumer.stats().acknowledged == COUNT
    assert [v for _, v in seen] == [b"m%d" % i for i in range(COUNT)]
    assert all(c is consumer for c, _ in seen)


async def test_coroutine_listener_is_awaited_one_message_at_a_time(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    running = 0
    most_at_once = 0
    seen: list[bytes] = []

    async def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        nonlocal running, most_at_once
        running += 1
        most_at_once = max(most_at_once, running)
        await asyncio.sleep(0.001)
        seen.append(message.data())
        await consumer.acknowledge(message)
        running -= 1

    async with msgclient.Client(pulsar_broker.service_url) as client:
        await client.subscribe(topic, "sub", message_listener=listener, **SHARED_FROM_EARLIEST)
        producer = await client.create_producer(topic)
        for i in range(COUNT):
            await producer.send_async(b"m%d" % i)
        await producer.flush()
        await wait_until(lambda: len(seen) == COUNT, f"{COUNT} messages to the listener")
    assert seen == [b"m%d" % i for i in range(COUNT)]
    assert most_at_once == 1


async def test_receive_is_refused_while_a_listener_is_set(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(topic, "sub", message_listener=lambda c, m: None)
        with pytest.raises(msgclient.InvalidConfigurationError, match=r"receive\(\) .*listener"):
            await consumer.receive(100)
        with pytest.raises(msgclient.InvalidConfigurationError, match="batch_receive"):
            await consumer.batch_receive()


async def test_not_a_callable_is_refused(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match="message_listener"):
            await client.subscribe(topic, "sub", message_listener="not a function")


@pytest.mark.parametrize("kind", ["function", "coroutine"])
async def test_failing_listener_is_logged_and_its_message_redelivered(
    pulsar_broker: PulsarBroker, topic: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The message the listener failed on stays unacked: the ack timeout brings it back.
    The listener goes on with the next messages meanwhile."""
    calls: list[tuple[bytes, int]] = []

    def handle(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        calls.append((message.data(), message.redelivery_count()))
        if message.data() == b"boom" and message.redelivery_count() == 0:
            raise RuntimeError("listener failed")
        consumer.acknowledge(message)

    async def coroutine(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        handle(consumer, message)

    listener: Any = handle if kind == "function" else coroutine
    caplog.set_level(logging.ERROR, logger="msgclient.core.receive.message_listener")
    async with msgclient.Client(pulsar_broker.service_url) as client:
        await client.subscribe(
            topic,
            "sub",
            message_listener=listener,
            unacked_messages_timeout_ms=1000,
            tick_duration_ms=100,
            **SHARED_FROM_EARLIEST,
        )
        producer = await client.create_producer(topic)
        for value in (b"a", b"boom", b"c"):
            await producer.send(value)
        await wait_until(lambda: len(calls) == 4, "the failed message redelivered")
    assert calls[:3] == [(b"a", 0), (b"boom", 0), (b"c", 0)]
    assert calls[3] == (b"boom", 1)
    (record,) = caplog.records
    assert "message_listener failed" in record.getMessage()
    assert record.exc_info is not None and "listener failed" in str(record.exc_info[1])


async def test_pause_holds_the_listener_back_until_resume(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    seen: list[bytes] = []

    def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        seen.append(message.data())
        consumer.acknowledge(message)

    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "sub", message_listener=listener, **SHARED_FROM_EARLIEST
        )
        producer = await client.create_producer(topic)
        await producer.send(b"before")
        await wait_until(lambda: seen == [b"before"], "the first message")
        consumer.pause_message_listener()
        await producer.send(b"during")
        await asyncio.sleep(QUIET_MS / 1000)
        assert seen == [b"before"]
        consumer.resume_message_listener()
        await wait_until(lambda: seen == [b"before", b"during"], "the message sent while paused")


async def test_listener_can_close_its_consumer(pulsar_broker: PulsarBroker, topic: str) -> None:
    closed = asyncio.Event()
    seen: list[bytes] = []

    async def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        seen.append(message.data())
        await consumer.acknowledge(message)
        await consumer.close()
        closed.set()

    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "sub", message_listener=listener, **SHARED_FROM_EARLIEST
        )
        producer = await client.create_producer(topic)
        await producer.send(b"one")
        await producer.send(b"two")
        await within(closed.wait())
        await asyncio.sleep(QUIET_MS / 1000)
        assert not consumer.is_connected()
    assert seen == [b"one"]


async def test_zero_queue_listener_asks_for_each_message(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    seen: list[bytes] = []

    def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        seen.append(message.data())
        consumer.acknowledge(message)

    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(
            topic,
            "sub",
            message_listener=listener,
            receiver_queue_size=0,
            **SHARED_FROM_EARLIEST,
        )
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            await producer.send(b"z%d" % i)
        await wait_until(lambda: len(seen) == 5, "five messages through the zero queue")
        assert consumer.stats().queue_depth == 0
    assert seen == [b"z%d" % i for i in range(5)]


async def test_close_stops_a_listener_in_progress(pulsar_broker: PulsarBroker, topic: str) -> None:
    started = asyncio.Event()
    finished: list[bool] = []

    async def listener(consumer: msgclient.Consumer, message: msgclient.Message) -> None:
        started.set()
        await asyncio.sleep(TIMEOUT)
        finished.append(True)

    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "sub", message_listener=listener, **SHARED_FROM_EARLIEST
        )
        producer = await client.create_producer(topic)
        await producer.send(b"slow")
        await within(started.wait())
        await within(consumer.close(), timeout=2)
    assert finished == []
