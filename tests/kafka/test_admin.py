"""The admin API on Kafka (tansu): topics, configs, consumer groups, offsets; each request
naming several items reports each one's result. What tansu lacks (CreatePartitions,
OffsetDelete) or panics on (DeleteRecords) is in scripted/test_admin.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest
from kafka import KafkaConsumer

import msgclient
import msgclient.blocking
from msgclient.admin import (
    ConfigResource,
    NewTopic,
    OffsetSpec,
    TopicPartition,
)
from msgclient.embedded import KafkaBroker

T = TypeVar("T")
TIMEOUT = 10.0


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, TIMEOUT)


@pytest.fixture
async def client(kafka_broker: KafkaBroker) -> AsyncIterator[msgclient.Client]:
    async with msgclient.Client(kafka_broker.service_url, operation_timeout_seconds=5) as client:
        yield client


async def test_topics_are_created_listed_described_and_deleted_each_on_its_own(
    client: msgclient.Client, topic: str
) -> None:
    admin = client.admin()
    created = await within(admin.create_topics([NewTopic(topic, 3), NewTopic(f"{topic}-b", 1)]))
    assert created.failed == {} and set(created.succeeded) == {topic, f"{topic}-b"}

    again = await within(admin.create_topics([NewTopic(topic, 3), NewTopic(f"{topic}-c", 2)]))
    assert set(again.succeeded) == {f"{topic}-c"}
    assert isinstance(again.failed[topic], msgclient.TopicAlreadyExistsError)
    with pytest.raises(msgclient.TopicAlreadyExistsError, match=topic):
        again.all()

    listed = await within(admin.list_topics())
    assert {topic, f"{topic}-b", f"{topic}-c"} <= set(listed) and listed == sorted(listed)

    described = await within(admin.describe_topics([topic, f"{topic}-missing"]))
    description = described.result(topic)
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    address = client.service_url.hosts[0]
    assert {p.leader for p in description.partitions} == {f"{address[0]}:{address[1]}"}
    with pytest.raises(msgclient.TopicNotFoundError, match="missing"):
        described.result(f"{topic}-missing")

    deleted = await within(admin.delete_topics([topic, f"{topic}-b", f"{topic}-never"]))
    assert set(deleted.succeeded) == {topic, f"{topic}-b"}
    assert isinstance(deleted.failed[f"{topic}-never"], msgclient.TopicNotFoundError)
    assert topic not in await within(admin.list_topics())


async def test_topic_configs_are_described_set_and_deleted(
    client: msgclient.Client, topic: str
) -> None:
    admin = client.admin()
    resource = ConfigResource.topic(topic)
    configs = {"retention.ms": "60000", "cleanup.policy": "delete"}
    (await within(admin.create_topics([NewTopic(topic, 1, configs=configs)]))).all()
    found = (await within(admin.describe_configs([resource]))).result(resource)
    assert {name: entry.value for name, entry in found.items()} == configs

    changes = {resource: {"retention.ms": "120000", "cleanup.policy": None}}
    assert (await within(admin.incremental_alter_configs(changes))).failed == {}
    found = (await within(admin.describe_configs([resource]))).result(resource)
    assert found["retention.ms"].value == "120000" and "cleanup.policy" not in found


async def test_offsets_are_listed_by_position_and_time_with_errors_per_partition(
    client: msgclient.Client, topic: str
) -> None:
    admin = client.admin()
    (await within(admin.create_topics([NewTopic(topic, 2)]))).all()
    producer = await client.create_producer(topic)
    # One record a batch: tansu's latest offset is the newest batch's base offset + 1.
    for i in range(2):
        await within(producer.send(b"%d" % i, partition_key="k"))
    await asyncio.sleep(0.02)
    between = int(time.time() * 1000)  # tansu looks up its own write times (brokers.md)
    await asyncio.sleep(0.02)
    for i in range(2, 4):
        partition = (await within(producer.send(b"%d" % i, partition_key="k"))).partition
    tp = TopicPartition(topic, partition)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "at a time": OffsetSpec.for_timestamp(between),
    }
    found = {
        name: (await within(admin.list_offsets({tp: spec}))).result(tp).offset
        for name, spec in specs.items()
    }
    # (A time after the newest record: Kafka answers -1, tansu 0; not tested.)
    assert found == {"earliest": 0, "latest": 4, "at a time": 2}

    last = await within(admin.last_message_ids(topic))
    assert {name: i.offset if i else None for name, i in last.items()} == {  # type: ignore[attr-defined]
        f"{topic}-{partition}": 3,
        f"{topic}-{1 - partition}": None,
    }

    results = await within(admin.list_offsets({tp: specs["latest"], (topic, 7): specs["latest"]}))
    assert results.succeeded[tp].offset == 4
    with pytest.raises(msgclient.TopicNotFoundError, match="no partition 7"):
        results.result(TopicPartition(topic, 7))


async def test_group_offsets_are_reset_and_a_consumer_starts_there(
    client: msgclient.Client, kafka_broker: KafkaBroker, topic: str
) -> None:
    admin = client.admin()
    group = f"group-{topic}"
    (await within(admin.create_topics([NewTopic(topic, 2)]))).all()
    producer = await client.create_producer(topic)
    await within(producer.send_many([b"%d" % i for i in range(6)], partition=1))

    assert (await within(admin.alter_consumer_group_offsets(group, {(topic, 1): 4}))).failed == {}
    assert await within(admin.list_consumer_group_offsets(group, [(topic, 0), (topic, 1)])) == {
        (topic, 0): -1,
        (topic, 1): 4,
    }
    assert await within(admin.list_consumer_group_offsets(group)) == {(topic, 1): 4}

    # kafka-python joins the group and starts where the reset put it.
    bootstrap = kafka_broker.bootstrap_servers
    values = await within(asyncio.to_thread(_read_group, bootstrap, topic, group, 2))
    assert values == [b"4", b"5"]

    assert (await within(admin.delete_consumer_groups([group]))).failed == {}
    assert await within(admin.list_consumer_group_offsets(group)) == {}


async def test_groups_are_listed_and_described_with_their_members(
    client: msgclient.Client, topic: str
) -> None:
    admin = client.admin()
    group = f"group-{topic}"
    (await within(admin.create_topics([NewTopic(topic, 1)]))).all()
    # tansu lists only groups with committed offsets, live members or not.
    (await within(admin.alter_consumer_group_offsets(group, {(topic, 0): 0}))).all()
    listed = {g.group_id: g for g in await within(admin.list_consumer_groups())}
    assert listed[group].protocol_type == "consumer"

    consumer = await within(
        client.subscribe(
            topic,
            group,
            consumer_type=msgclient.ConsumerType.Failover,
            session_timeout_ms=2000,  # tansu holds a join for half of it (brokers.md)
        )
    )
    try:
        described = await within(admin.describe_consumer_groups([group]))
    finally:
        await within(consumer.close())
    description = described.result(group)
    assert (description.state, description.protocol_type) == ("Stable", "consumer")
    # tansu leaves a member's client id, host and assignment empty: not checked here.
    assert len(description.members) == 1


async def test_bad_arguments_are_refused_before_anything_is_sent(
    client: msgclient.Client,
) -> None:
    admin = client.admin()
    bad = [
        (admin.create_topics([NewTopic("t", 0)]), "partitions of topic 't' is 0"),
        (admin.create_topics([NewTopic("bad name")]), "invalid Kafka topic name"),
        (admin.describe_topics("t"), "expected a list of topics"),
        (admin.create_partitions({"t": 0}), "partition count of topic 't' is 0"),
        (admin.alter_consumer_group_offsets("g", {("t", 0): -5}), "offset of t/0 is -5"),
        (admin.list_offsets({("t", -1): OffsetSpec.latest()}), "partition of topic 't' is -1"),
        (admin.list_offsets({("t", 0): -1}), "expected an OffsetSpec"),  # type: ignore[dict-item]
        (admin.delete_records({("t", 0): -2}), "offset of t/0 is -2"),
        (admin.list_consumer_group_offsets(""), "invalid group id ''"),
        (admin.list_topics("public/default"), "Kafka topics have no namespaces"),
    ]
    for call, message in bad:
        with pytest.raises(msgclient.InvalidConfigurationError, match=message):
            await within(call)
    with pytest.raises(ValueError, match="negative"):
        OffsetSpec.for_timestamp(-3)


def test_the_blocking_facade_has_the_same_admin(kafka_broker: KafkaBroker, topic: str) -> None:
    with msgclient.blocking.Client(kafka_broker.service_url) as client:
        admin = client.admin()
        assert admin.create_topics([NewTopic(topic, 2)]).failed == {}
        assert topic in admin.list_topics()
        assert len(admin.describe_topics([topic]).result(topic).partitions) == 2
        assert admin.delete_topics([topic]).failed == {}
    with pytest.raises(msgclient.AlreadyClosedError):
        admin.list_topics()


def _read_group(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,  # tansu: a 0 ms wait returns nothing (brokers.md)
        session_timeout_ms=2000,  # tansu holds a join for half of it
        heartbeat_interval_ms=500,
    )
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(values) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in batch)
    finally:
        consumer.close(autocommit=False)
    return values
