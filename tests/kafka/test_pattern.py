"""Pattern subscriptions on Kafka (tansu): the topics of a full Metadata answer matched
client-side, listed again every ``pattern_auto_discovery_period`` seconds; a topic that
starts to match makes the group rejoin with it."""

from __future__ import annotations

import asyncio
import re

import pytest

import msgclient
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic
from tests.kafka.test_consume import GROUP, within


async def send_all(client: msgclient.Client, topic: str, values: list[bytes]) -> None:
    producer = await client.create_producer(topic)
    for value in values:
        await producer.send(value)
    await producer.close()


def discovery_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("topic discovery")]


async def test_a_pattern_reads_matching_topics_joins_a_new_one_and_commits(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    first, later, other = f"{topic}-m-a", f"{topic}-m-b", f"{topic}-other"
    await within(create_topic(bootstrap, first, 2))
    await within(create_topic(bootstrap, other, 1))
    group = f"g-{topic}"
    async with msgclient.Client(kafka_broker.service_url) as client:
        await within(send_all(client, first, [b"a0", b"a1", b"a2", b"a3"]))
        await within(send_all(client, other, [b"o0"]))
        consumer = await within(
            client.subscribe(
                re.compile(re.escape(topic) + r"-m-.*"),
                group,
                pattern_auto_discovery_period=0.3,
                ack_receipt_enabled=True,
                **GROUP,
            )
        )
        assert consumer.topics == [first]
        assert consumer.topic == re.escape(topic) + r"-m-.*"
        received = [await consumer.receive(timeout_millis=10_000) for _ in range(4)]
        assert sorted(m.data() for m in received) == [b"a0", b"a1", b"a2", b"a3"]
        assert {m.topic_name().rpartition("-")[0] for m in received} == {first}
        for message in received:  # committed before the rejoin: not read again after it
            await within(consumer.acknowledge(message))

        # tansu creates the topic on produce; the next listing joins it.
        await within(send_all(client, later, [b"b0", b"b1"]))
        newer = [await consumer.receive(timeout_millis=15_000) for _ in range(2)]
        assert sorted(m.data() for m in newer) == [b"b0", b"b1"]
        assert consumer.topics == [first, later]
        for message in newer:
            await within(consumer.acknowledge(message))
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await consumer.receive(timeout_millis=300)  # nothing of the other topic
        assert discovery_tasks()
        await within(consumer.close())
        assert discovery_tasks() == []
        committed = await within(client.admin().list_consumer_group_offsets(group))
        by_topic: dict[str, int] = {}
        for (name, _), offset in committed.items():
            by_topic[name] = by_topic.get(name, 0) + offset
        assert by_topic == {first: 4, later: 2}


async def test_a_pattern_that_matches_nothing_yet_waits_for_a_topic(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await within(
            client.subscribe(
                re.compile(re.escape(topic) + ".*"),
                f"g-{topic}",
                pattern_auto_discovery_period=0.3,
                **GROUP,
            )
        )
        assert consumer.topics == []
        await within(send_all(client, f"{topic}-x", [b"x"]))
        message = await consumer.receive(timeout_millis=15_000)
        assert message.data() == b"x"
        await within(consumer.close())


async def test_a_deleted_topic_is_dropped_and_the_others_still_read(
    kafka_broker: KafkaBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kept, deleted = f"{topic}-kept", f"{topic}-gone"
    await within(create_topic(bootstrap, kept, 1))
    await within(create_topic(bootstrap, deleted, 1))
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await within(
            client.subscribe(
                re.compile(re.escape(topic) + ".*"),
                f"g-{topic}",
                pattern_auto_discovery_period=0.3,
                **GROUP,
            )
        )
        assert consumer.topics == [deleted, kept]
        dropped = asyncio.Event()
        remove_topics = consumer.remove_topics

        async def removing(topics: list[str]) -> None:
            await remove_topics(topics)
            dropped.set()

        monkeypatch.setattr(consumer, "remove_topics", removing)
        assert (await within(client.admin().delete_topics([deleted]))).failed == {}
        await within(dropped.wait(), 15)  # a later listing drops it
        assert consumer.topics == [kept]
        await within(send_all(client, kept, [b"k"]))
        message = await consumer.receive(timeout_millis=15_000)
        assert message.data() == b"k"
        await within(consumer.close())
