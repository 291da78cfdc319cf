"""``is_connected()`` of producers, consumers and readers, as the official client's: True
while every partition is registered on an open connection, False while the broker is away
and after close; and ``consumer_name``, the name the broker is told."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgclient
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.helpers import SHARED_FROM_EARLIEST, WireTap, official_client, wait_until

FAST_RECONNECT = {"initial_backoff_interval_ms": 50, "max_backoff_interval_ms": 200}


async def test_is_connected_follows_the_broker_going_and_coming_back(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={f"{topic}-p": 3})
    async with msgclient.Client(broker.service_url, **FAST_RECONNECT) as client:
        producer = await client.create_producer(f"{topic}-p")  # 3 partitions
        consumer = await client.subscribe(topic, "sub", **SHARED_FROM_EARLIEST)
        reader = await client.create_reader(f"{topic}-p", msgclient.InitialPosition.Earliest)
        parts = (producer, consumer, reader)
        assert [p.is_connected() for p in parts] == [True, True, True]

        await asyncio.to_thread(broker.stop)
        await wait_until(
            lambda: not any(p.is_connected() for p in parts), "all three see the broker gone"
        )

        await asyncio.to_thread(broker.start)
        await wait_until(lambda: all(p.is_connected() for p in parts), "all three reconnected")
        await producer.send(b"after the restart")
        assert (await reader.read_next(10_000)).data() == b"after the restart"

        for part in parts:
            await part.close()
            assert not part.is_connected()


async def test_is_connected_matches_the_official_client(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    with official_client(url) as official:
        theirs_producer = official.create_producer(topic)
        theirs_consumer = official.subscribe(topic, "official")
        expected = [theirs_producer.is_connected(), theirs_consumer.is_connected()]
        theirs_producer.close()
        theirs_consumer.close()
        expected += [theirs_producer.is_connected(), theirs_consumer.is_connected()]
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "ours")
        ours = [producer.is_connected(), consumer.is_connected()]
        await producer.close()
        await consumer.close()
        ours += [producer.is_connected(), consumer.is_connected()]
    assert ours == expected == [True, True, False, False]


async def test_consumer_name_is_the_one_sent_and_generated_like_the_official_client(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    url = pulsar_broker.service_url
    with official_client(url) as official:
        official_name = official.subscribe(topic, "official").consumer_name()
    async with msgclient.Client(url) as client:
        named = await client.subscribe(topic, "named", consumer_name="worker-1")
        unnamed = await client.subscribe(topic, "unnamed")
        other = await client.subscribe(topic, "other")
    sent = {
        c.subscribe.subscription: c.subscribe.consumer_name
        for c in wire.of_type(pb.BaseCommand.SUBSCRIBE)
    }
    assert named.consumer_name == sent["named"] == "worker-1"
    assert unnamed.consumer_name == sent["unnamed"]
    # The official client's generated names: 10 lowercase hex characters, random.
    for name in (official_name, unnamed.consumer_name, other.consumer_name):
        assert len(name) == 10 and int(name, 16) >= 0 and name == name.lower(), name
    assert unnamed.consumer_name != other.consumer_name


async def test_partitioned_consumer_uses_one_name(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str, wire: WireTap
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    async with msgclient.Client(broker.service_url) as client:
        consumer = await client.subscribe(topic, "sub")
    names = {c.subscribe.consumer_name for c in wire.of_type(pb.BaseCommand.SUBSCRIBE)}
    assert names == {consumer.consumer_name}
    assert not consumer.is_connected()
