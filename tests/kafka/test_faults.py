"""Kafka producer and consumer when connections drop or the broker restarts.

tansu keeps everything in memory: a restart loses every topic, message and committed
offset (brokers.md). The restart tests therefore check what the client guarantees itself,
that every send ends (confirmed or a typed error, never pending) and that the consumer
carries on with what is written after the restart; nothing-lost checks across a restart
belong to a broker with storage. Dropped connections keep the broker's data, and there
nothing acknowledged may be lost and nothing read twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import msgclient
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic, produce, read

GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "initial_position": msgclient.InitialPosition.Earliest,
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 4000,
    "fetch_max_wait_ms": 100,
}


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker() as broker:
        yield broker


def cut_connections(client: msgclient.Client) -> int:
    """Abort every pooled connection of ``client``, as a network failure would."""
    cut = 0
    for task in list(client._backend.pool._connections.values()):  # type: ignore[attr-defined]
        if task.done() and not task.cancelled() and task.exception() is None:
            task.result().abort(ConnectionResetError("cut by the test"))
            cut += 1
    return cut


async def test_consumer_survives_cut_connections_without_loss_or_duplicates(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    count = 3000
    # 4 KiB values: 12 MB in all, more than one fetch answer holds (tansu caps them at
    # 5 MiB), so the consumer fetches again after each cut.
    await produce(
        kafka_broker.bootstrap_servers,
        topic,
        [{"value": b"%d:" % i + b"x" * 4096} for i in range(count)],
        max_request_size=4 << 20,
    )
    tasks_before = len(asyncio.all_tasks())
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, receiver_queue_size=100, **GROUP)
        seen: list[int] = []
        while len(seen) < count:
            message = await consumer.receive(timeout_millis=15_000)
            seen.append(int(message.data().split(b":")[0]))
            consumer.acknowledge(message)
            if len(seen) in (500, 1700):
                assert cut_connections(client) >= 1
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await consumer.receive(timeout_millis=500)
    assert sorted(seen) == list(range(count))  # nothing lost, nothing twice
    deadline = asyncio.get_running_loop().time() + 5
    while len(asyncio.all_tasks()) > tasks_before:  # the client's tasks end after its close
        assert asyncio.get_running_loop().time() < deadline, asyncio.all_tasks()
        await asyncio.sleep(0.01)


async def test_every_send_ends_when_the_broker_restarts_mid_produce(
    own_broker: KafkaBroker, topic: str
) -> None:
    count = 20_000
    restart_at = count // 3
    async with msgclient.Client(own_broker.service_url, operation_timeout_seconds=5) as client:
        producer = await client.create_producer(
            topic, send_timeout_millis=15_000, block_if_queue_full=True
        )
        futures = []
        for i in range(count):
            futures.append(await producer.send_async(b"%d" % i))
            if i == restart_at:
                await asyncio.to_thread(own_broker.restart)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 60)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(f, msgclient.MsgClientError) for f in failures), failures[:3]
    stored = [int(r.value) for r in await read(own_broker.bootstrap_servers, topic, None)]
    assert len(set(stored)) == len(stored)  # the producer's resends were stored once
    confirmed = {i for i, r in enumerate(results) if not isinstance(r, BaseException)}
    assert set(stored) <= confirmed
    # Everything sent once the broker was back is stored: the producer carried on with a
    # new producer id (the restarted broker forgot the old one).
    assert set(range(restart_at + 1, count)) <= set(stored)


async def test_consumer_carries_on_after_a_broker_restart(
    own_broker: KafkaBroker, topic: str
) -> None:
    async with msgclient.Client(own_broker.service_url, operation_timeout_seconds=5) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        await producer.send(b"before")
        assert (await consumer.receive(timeout_millis=15_000)).data() == b"before"
        await asyncio.to_thread(own_broker.restart)
        await asyncio.wait_for(producer.send(b"after"), 30)
        message = await consumer.receive(timeout_millis=30_000)
        assert message.data() == b"after"
        consumer.acknowledge(message)
