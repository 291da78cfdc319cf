"""The admin API on Pulsar (pulsar-lite): describe_topics through PARTITIONED_METADATA and
LOOKUP; list_topics, which pulsar-lite never answers; the REST-only operations refused.
list_topics on the wire is in scripted/test_admin.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import msgclient
from msgclient.admin import Admin, ConfigResource, NewTopic, OffsetSpec
from msgclient.embedded import PulsarBroker

TIMEOUT = 5.0  # seconds: the longest a test waits for the broker


@pytest.fixture
async def client(pulsar_broker: PulsarBroker) -> AsyncIterator[msgclient.Client]:
    async with msgclient.Client(pulsar_broker.service_url, operation_timeout_seconds=5) as client:
        yield client


async def test_describe_a_partitioned_topic(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    name = f"persistent://public/default/{topic}"
    async with msgclient.Client(broker.service_url) as client:
        async with asyncio.timeout(TIMEOUT):
            described = await client.admin().describe_topics([topic])
            producer = await client.create_producer(f"{topic}-partition-1")
            sent = [await producer.send(b"%d" % i) for i in range(3)]
            # Partitions 0 and 2 are empty (pulsar-lite refuses to answer: None too).
            last = await client.admin().last_message_ids(topic)
    entries = {n: (i.ledger_id, i.entry_id) if i else None for n, i in last.items()}  # type: ignore[attr-defined]
    # (pulsar-lite names a batched entry's last message by its entry: batch index -1)
    assert entries == {
        f"{name}-partition-0": None,
        f"{name}-partition-1": (sent[-1].ledger_id, sent[-1].entry_id),  # type: ignore[attr-defined]
        f"{name}-partition-2": None,
    }
    description = described.result(name)
    assert description.name == name
    assert description.partitioned
    # One broker owns every partition: its address (host:port), as Kafka's leaders.
    assert [(p.partition, p.leader) for p in description.partitions] == [
        (i, f"127.0.0.1:{broker.port}") for i in range(3)
    ]


async def test_describe_a_non_partitioned_topic(
    client: msgclient.Client, pulsar_broker: PulsarBroker, topic: str
) -> None:
    async with asyncio.timeout(TIMEOUT):
        producer = await client.create_producer(topic)
        await producer.send(b"the topic exists")
        described = await client.admin().describe_topics([topic])
    description = described.result(f"persistent://public/default/{topic}")
    assert not description.partitioned
    assert [(p.partition, p.leader) for p in description.partitions] == [
        (0, f"127.0.0.1:{pulsar_broker.port}")
    ]


async def test_describe_a_missing_topic_describes_a_non_partitioned_one(
    client: msgclient.Client, pulsar_broker: PulsarBroker, topic: str
) -> None:
    # pulsar-lite quirk: PARTITIONED_METADATA answers 0 partitions and LOOKUP answers Connect
    # for any name, so a topic that was never made is described as an existing topic that
    # is not partitioned (it is not created either: only a producer or consumer records
    # it). A broker with auto-creation off refuses it: scripted/test_admin.py.
    async with asyncio.timeout(TIMEOUT):
        described = await client.admin().describe_topics([f"{topic}-never-made"])
    assert described.failed == {}
    (description,) = described.succeeded.values()
    assert not description.partitioned
    assert [p.leader for p in description.partitions] == [f"127.0.0.1:{pulsar_broker.port}"]


async def test_list_topics_fails_at_the_operation_timeout_on_pulsar_lite(
    pulsar_broker: PulsarBroker,
) -> None:
    # pulsar-lite quirk: GET_TOPICS_OF_NAMESPACE gets no answer at all (no ERROR, the
    # connection stays open and answers PING), so the request fails at the operation
    # timeout (0.3 s here), saying which command went unanswered.
    url = pulsar_broker.service_url
    async with msgclient.Client(url, operation_timeout_seconds=0.3) as client:
        admin = client.admin()
        started = time.monotonic()
        with pytest.raises(msgclient.OperationTimeoutError, match="GET_TOPICS_OF_NAMESPACE") as e:
            async with asyncio.timeout(TIMEOUT):
                await admin.list_topics()
        assert time.monotonic() - started < 2.0
        assert "'public/default'" in str(e.value)
        # The connection is still good: the silence was that request's alone.
        async with asyncio.timeout(TIMEOUT):
            described = await admin.describe_topics(["after-the-timeout"])
        assert described.failed == {}


REST_ONLY: dict[str, Callable[[Admin], Awaitable[Any]]] = {
    "create_topics": lambda admin: admin.create_topics([NewTopic("t", 1)]),
    "delete_topics": lambda admin: admin.delete_topics(["t"]),
    "create_partitions": lambda admin: admin.create_partitions({"t": 4}),
    "describe_configs": lambda admin: admin.describe_configs([ConfigResource.topic("t")]),
    "incremental_alter_configs": lambda admin: admin.incremental_alter_configs(
        {ConfigResource.topic("t"): {"retention.ms": "1000"}}
    ),
    "list_consumer_groups": lambda admin: admin.list_consumer_groups(),
    "describe_consumer_groups": lambda admin: admin.describe_consumer_groups(["g"]),
    "delete_consumer_groups": lambda admin: admin.delete_consumer_groups(["g"]),
    "list_consumer_group_offsets": lambda admin: admin.list_consumer_group_offsets("g"),
    "alter_consumer_group_offsets": lambda admin: admin.alter_consumer_group_offsets(
        "g", {("t", 0): 5}
    ),
    "delete_consumer_group_offsets": lambda admin: admin.delete_consumer_group_offsets(
        "g", [("t", 0)]
    ),
    "list_offsets": lambda admin: admin.list_offsets({("t", 0): OffsetSpec.latest()}),
    "delete_records": lambda admin: admin.delete_records({("t", 0): 3}),
}


@pytest.mark.parametrize("operation", sorted(REST_ONLY))
async def test_operations_of_the_rest_admin_api_are_not_supported(
    client: msgclient.Client, operation: str
) -> None:
    with pytest.raises(msgclient.NotSupportedError, match="REST admin API") as caught:
        async with asyncio.timeout(TIMEOUT):
            await REST_ONLY[operation](client.admin())
    assert str(caught.value).startswith(f"{operation} on Pulsar")
