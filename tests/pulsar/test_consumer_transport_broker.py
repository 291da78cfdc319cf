"""PulsarConsumerTransport on pulsar-lite, driven directly (no core consumer): the official
client produces, the transport subscribes, receives and acks.

Shared subscriptions only: pulsar-lite dispatches duplicates on Exclusive/Failover fed by a
pipelining producer (brokers.md quirk), and these tests count messages exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

import pytest

from msgclient.contract import AckBatch, ConsumerEvents, ConsumerTransport
from msgclient.embedded import PulsarBroker
from msgclient.errors import ConnectionClosedError
from msgclient.message import Message, MessageId
from msgclient.options import ClientOptions, ConsumerOptions, ConsumerType, InitialPosition
from msgclient.url import parse_service_url
from protocols.pulsarwire.adapter import PulsarBackend
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.pulsar.helpers import QUIET_MS, TIMEOUT, official_client

COUNT = 200
SUBSCRIPTION = "transport"


class Events(ConsumerEvents):
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.disconnects: list[Exception] = []
        self._arrived = asyncio.Event()

    def on_messages(self, messages: list[Message]) -> None:
        self.messages.extend(messages)
        self._arrived.set()

    def on_disconnected(self, error: Exception) -> None:
        self.disconnects.append(error)

    def on_active_consumer_change(self, is_active: bool) -> None:
        pass

    def on_reached_end_of_topic(self) -> None:
        pass

    def on_partition_revoked(self) -> None:
        raise AssertionError("Pulsar never revokes a partition")

    async def wait_for(self, count: int) -> list[Message]:
        async with asyncio.timeout(TIMEOUT):
            while len(self.messages) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return self.messages


class Subscribe(Protocol):
    async def __call__(self, **options: Any) -> tuple[ConsumerTransport, Events]:
        """A transport subscribed to the test's topic (Shared from the earliest, unless
        the options say otherwise); all share one client, so one connection."""


@pytest.fixture
async def subscribe(pulsar_broker: PulsarBroker, topic: str) -> AsyncIterator[Subscribe]:
    backend = PulsarBackend(
        parse_service_url(pulsar_broker.service_url), ClientOptions(operation_timeout_seconds=5)
    )
    full_topic = backend.normalize_topic(topic)

    async def make(**options: Any) -> tuple[ConsumerTransport, Events]:
        events = Events()
        consumer_options = ConsumerOptions(
            **{
                "consumer_type": ConsumerType.Shared,
                "initial_position": InitialPosition.Earliest,
                **options,
            }
        )
        transport = backend.consumer_transport(
            full_topic, -1, SUBSCRIPTION, consumer_options, events, None
        )
        async with asyncio.timeout(TIMEOUT):
            await transport.connect()
        return transport, events

    yield make
    async with asyncio.timeout(TIMEOUT):
        await backend.close()


def payload(i: int) -> bytes:
    return b"%d:" % i + bytes(range(256))[i % 256 :]  # every byte value, varying lengths


async def produce(service_url: str, topic: str, count: int) -> None:
    """``count`` messages from the official client, in batches."""

    def run() -> None:
        with official_client(service_url) as client:
            producer = client.create_producer(
                topic, batching_enabled=True, batching_max_publish_delay_ms=5
            )
            for i in range(count):
                producer.send_async(payload(i), None)
            producer.flush()

    await asyncio.wait_for(asyncio.to_thread(run), TIMEOUT)


def ids(messages: list[Message]) -> tuple[MessageId, ...]:
    return tuple(sorted(m.message_id() for m in messages))


async def assert_nothing_dispatched(transport: ConsumerTransport, events: Events) -> None:
    transport.flow(COUNT)
    await asyncio.sleep(QUIET_MS / 1000)
    assert events.messages == []


async def test_receive_ack_and_nothing_comes_back(
    pulsar_broker: PulsarBroker, topic: str, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe()
    await produce(pulsar_broker.service_url, topic, COUNT)
    consumer.flow(COUNT)
    messages = await events.wait_for(COUNT)
    assert [m.data() for m in messages] == [payload(i) for i in range(COUNT)]
    batched = [m.message_id() for m in messages]
    assert all(isinstance(i, PulsarMessageId) and i.batch_index >= 0 for i in batched)
    assert len({_entry(m) for m in messages}) < COUNT  # batched entries
    assert consumer.acknowledge(AckBatch(ids(messages), None)) is None
    async with asyncio.timeout(TIMEOUT):
        await consumer.close()  # answered after the acks, on the same connection

    again, again_events = await subscribe()
    await assert_nothing_dispatched(again, again_events)
    assert events.disconnects == again_events.disconnects == []


async def test_a_partly_acked_batch_comes_back_whole(
    pulsar_broker: PulsarBroker, topic: str, subscribe: Subscribe
) -> None:
    # pulsar-lite acks a whole entry on any ack of it (brokers.md): the transport must not
    # ack an entry until all its messages are.
    consumer, events = await subscribe()
    await produce(pulsar_broker.service_url, topic, 10)
    consumer.flow(10)
    messages = await events.wait_for(10)
    entry = [m for m in messages if _entry(m) == _entry(messages[0])]
    assert len(entry) > 1, "the official producer was expected to batch"
    consumer.acknowledge(AckBatch(ids(entry[:-1]), None))  # all but the last of the entry
    consumer.acknowledge(AckBatch(ids(messages[len(entry) :]), None))  # the other entries
    async with asyncio.timeout(TIMEOUT):
        await consumer.close()

    again, again_events = await subscribe()
    again.flow(COUNT)
    redelivered = await again_events.wait_for(len(entry))
    assert [m.data() for m in redelivered] == [m.data() for m in entry]
    again.acknowledge(AckBatch((redelivered[-1].message_id(),), None))
    assert again.acknowledge(AckBatch(ids(redelivered[:-1]), None)) is None
    async with asyncio.timeout(TIMEOUT):
        await again.close()
    last, last_events = await subscribe()
    await assert_nothing_dispatched(last, last_events)


async def test_ack_receipts_and_last_message_id(
    pulsar_broker: PulsarBroker, topic: str, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe(ack_receipt_enabled=True)
    # pulsar-lite answers GET_LAST_MESSAGE_ID on an empty topic with an error, a real
    # broker with entry -1: the transport answers None for both; the connection stays.
    async with asyncio.timeout(TIMEOUT):
        assert await consumer.get_last_message_id() is None
    await produce(pulsar_broker.service_url, topic, 5)
    consumer.flow(5)
    messages = await events.wait_for(5)
    async with asyncio.timeout(TIMEOUT):
        last = await consumer.get_last_message_id()
        assert isinstance(last, PulsarMessageId)
        assert _entry(messages[-1]) == (last.ledger_id, last.entry_id)
        receipt = consumer.acknowledge(AckBatch(ids(messages), None))
        assert receipt is not None
        await receipt
        await consumer.close()
    assert events.disconnects == []
    again, again_events = await subscribe()
    await assert_nothing_dispatched(again, again_events)


async def test_a_refused_subscription_is_a_clear_error(subscribe: Subscribe) -> None:
    # pulsar-lite drops the whole connection instead of answering ConsumerBusy (brokers.md
    # quirk), and with it the first consumer, which shares the connection.
    _, first_events = await subscribe(consumer_type=ConsumerType.Exclusive)
    with pytest.raises(ConnectionClosedError, match="may close it to refuse the subscription"):
        await subscribe(consumer_type=ConsumerType.Exclusive)
    assert len(first_events.disconnects) == 1


def _entry(message: Message) -> tuple[int, int]:
    message_id = message.message_id()
    assert isinstance(message_id, PulsarMessageId)
    return message_id.ledger_id, message_id.entry_id
