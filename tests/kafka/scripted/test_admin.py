"""The admin requests tansu cannot show (brokers.md: no CreatePartitions, no OffsetDelete,
DeleteRecords panics), against the scripted Kafka server: the request on the wire, and
each partition's or topic's own result, as Kafka 3.x answers them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kafka.protocol.api_key import ApiKey

import msgclient
from msgclient.admin import TopicPartition
from tests.kafka.scripted.admin_answers import AdminAnswers
from tests.kafka.scripted.server import WAIT, ScriptedKafkaServer


@pytest.fixture
async def server() -> AsyncIterator[ScriptedKafkaServer]:
    server = await ScriptedKafkaServer(topics={"grown": 2, "logs": 2}).start()
    yield server
    await server.stop()
    assert server.errors == []


@pytest.fixture
async def client(server: ScriptedKafkaServer) -> AsyncIterator[msgclient.Client]:
    async with msgclient.Client(server.url, operation_timeout_seconds=WAIT) as client:
        yield client


async def test_partitions_are_added_and_each_topic_fails_on_its_own(
    server: ScriptedKafkaServer, client: msgclient.Client
) -> None:
    AdminAnswers(server)
    server.topics["shrunk"] = 3
    async with asyncio.timeout(WAIT):
        results = await client.admin().create_partitions({"grown": 5, "shrunk": 2, "absent": 2})
    (request,) = server.requests(ApiKey.CreatePartitions)
    assert {(t.name, t.count) for t in request.request.topics} == {
        ("grown", 5),
        ("shrunk", 2),
        ("absent", 2),
    }
    assert list(results.succeeded) == ["grown"] and server.topics["grown"] == 5
    with pytest.raises(
        msgclient.BrokerError, match=r"INVALID_PARTITIONS.*higher than the requested"
    ):
        results.result("shrunk")
    with pytest.raises(msgclient.TopicNotFoundError, match="absent"):
        results.result("absent")
    # The client's metadata of the grown topic is fresh: a producer sees 5 partitions.
    assert len(await client.get_topic_partitions("grown")) == 5


async def test_records_are_deleted_before_an_offset_per_partition(
    server: ScriptedKafkaServer, client: msgclient.Client
) -> None:
    answers = AdminAnswers(server)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer("logs")
        await producer.send_many([b"%d" % i for i in range(5)], partition=0)
        await producer.send_many([b"x"], partition=1)
        results = await client.admin().delete_records(
            {("logs", 0): 3, ("logs", 1): -1, ("logs", 2): 0}
        )
    assert results.succeeded == {("logs", 0): 3, ("logs", 1): 1}
    assert answers.log_start == {("logs", 0): 3, ("logs", 1): 1}
    with pytest.raises(msgclient.TopicNotFoundError, match="no partition 2"):
        results.result(TopicPartition("logs", 2))  # known from metadata: never sent

    async with asyncio.timeout(WAIT):
        beyond = await client.admin().delete_records({("logs", 0): 99})
    with pytest.raises(msgclient.BrokerError, match="OFFSET_OUT_OF_RANGE"):
        beyond.all()


async def test_group_offsets_are_deleted_unless_the_group_reads_the_topic(
    server: ScriptedKafkaServer, client: msgclient.Client
) -> None:
    answers = AdminAnswers(server)
    answers.group_offsets["g"] = {("logs", 0): 4, ("logs", 1): 2, ("grown", 0): 9}
    answers.subscribed["g"] = {"grown"}
    async with asyncio.timeout(WAIT):
        results = await client.admin().delete_consumer_group_offsets(
            "g", [("logs", 0), ("grown", 0)]
        )
    (request,) = server.requests(ApiKey.OffsetDelete)
    assert request.request.group_id == "g"
    assert list(results.succeeded) == [("logs", 0)]
    with pytest.raises(msgclient.BrokerError, match="GROUP_SUBSCRIBED_TO_TOPIC"):
        results.result(TopicPartition("grown", 0))
    assert answers.group_offsets["g"] == {("logs", 1): 2, ("grown", 0): 9}

    async with asyncio.timeout(WAIT):
        unknown = await client.admin().delete_consumer_group_offsets("nobody", [("logs", 0)])
    with pytest.raises(msgclient.BrokerError, match="GROUP_ID_NOT_FOUND"):
        unknown.all()
