"""stats() and the OpenTelemetry metrics after a known workload, on both brokers: the
same counts read two ways (the metrics read the stats snapshots when collected)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import msgclient
from tests.metrics.helpers import (
    BROKERS,
    TIMEOUT,
    broker_url,
    collect,
    consumer_options,
    meter_provider,
    total,
)

N, SIZE, NACKED = 30, 10, 5
RECEIVE_MS = int(TIMEOUT * 1000)


async def within(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, TIMEOUT)


@pytest.mark.parametrize("broker", BROKERS)
async def test_stats_and_metrics_count_what_was_sent_and_received(
    request: pytest.FixtureRequest, broker: str, topic: str
) -> None:
    url = await broker_url(request, broker, topic, partitions=2)
    provider, reader = meter_provider()
    async with msgclient.Client(url, meter_provider=provider) as client:
        consumer = await within(
            client.subscribe(
                topic, "metrics", negative_ack_redelivery_delay_ms=100, **consumer_options(broker)
            )
        )
        # Batches of NACKED: on Pulsar a negative ack redelivers the whole entry.
        producer = await within(client.create_producer(topic, batching_max_messages=NACKED))
        futures = [
            await producer.send_async(b"%010d" % i, partition_key=f"key-{i}") for i in range(N)
        ]
        await within(asyncio.gather(*futures))

        sent = producer.stats()
        assert (sent.messages_sent, sent.bytes_sent, sent.send_errors) == (N, N * SIZE, 0)
        assert (sent.pending_messages, sent.pending_bytes, sent.reconnects) == (0, 0, 0)
        assert 1 <= sent.batches_sent <= N
        assert sent.mean_batch_size == N / sent.batches_sent
        assert 0 < sent.send_latency_max <= sent.send_latency_sum
        assert sum(p.messages_sent for p in sent.partitions) == N
        indexes = [p.partition for p in sent.partitions]
        assert indexes == ([0, 1] if broker == "kafka" else [-1])

        received = [await consumer.receive(RECEIVE_MS) for _ in range(N)]
        for message in received[NACKED:]:
            consumer.acknowledge(message)
        for message in received[:NACKED]:
            consumer.negative_acknowledge(message)
        again = [await consumer.receive(RECEIVE_MS) for _ in range(NACKED)]
        for message in again:
            consumer.acknowledge(message)
        assert sorted(m.data() for m in again) == sorted(m.data() for m in received[:NACKED])

        stats = consumer.stats()
        assert stats.subscription == "metrics"
        assert (stats.received, stats.bytes_received) == (N + NACKED, (N + NACKED) * SIZE)
        assert (stats.acknowledged, stats.negatively_acknowledged) == (N, NACKED)
        assert (stats.redeliveries_requested, stats.dead_lettered) == (NACKED, 0)
        assert (stats.reconnects, stats.queue_depth) == (0, 0)
        assert stats.rebalances == (1 if broker == "kafka" else 0)
        assert [p.partition for p in stats.partitions] == indexes
        by_partition = {p.partition: p.received for p in stats.partitions}
        assert sum(by_partition.values()) == N + NACKED

        client_stats = client.stats()
        assert (client_stats.producers, client_stats.consumers) == (1, 1)
        assert (client_stats.memory_used, client_stats.reconnects) == (0, 0)
        assert 1 <= client_stats.connections_open <= client_stats.connections_opened

        points = collect(reader)
        system = {"messaging.system": broker}
        destination = {**system, "messaging.destination.name": producer.topic}
        send = {**destination, "messaging.operation.name": "send"}
        assert total(points, "messaging.client.sent.messages", send) == N
        assert not any("error.type" in dict(k) for k in points["messaging.client.sent.messages"])
        assert total(points, "msgclient.producer.sent.bytes", destination) == N * SIZE
        assert total(points, "msgclient.producer.batches", destination) == sent.batches_sent
        assert total(points, "msgclient.producer.pending.messages", destination) == 0
        count, seconds = total(points, "messaging.client.operation.duration", send)
        assert count == sent.batches_sent
        assert seconds == pytest.approx(sent.send_latency_sum)
        assert total(points, "msgclient.producer.batch.size", send) == (sent.batches_sent, N)
        for partition in sent.partitions:
            if partition.partition >= 0:
                one = {**send, "messaging.destination.partition.id": str(partition.partition)}
                assert total(points, "messaging.client.sent.messages", one) == (
                    partition.messages_sent
                )

        group = (
            "messaging.consumer.group.name"
            if broker == "kafka"
            else "messaging.destination.subscription.name"
        )
        subscribed = {**destination, group: "metrics"}
        receive = {**subscribed, "messaging.operation.name": "receive"}
        assert total(points, "messaging.client.consumed.messages", receive) == N + NACKED
        assert total(points, "msgclient.consumer.received.bytes", subscribed) == (
            (N + NACKED) * SIZE
        )
        assert total(points, "msgclient.consumer.acks", subscribed) == N
        assert total(points, "msgclient.consumer.nacks", subscribed) == NACKED
        assert total(points, "msgclient.consumer.redeliveries", subscribed) == NACKED
        assert total(points, "msgclient.consumer.dead_letters", subscribed) == 0
        assert total(points, "msgclient.consumer.rebalances", {**system, group: "metrics"}) == (
            stats.rebalances
        )
        for partition in stats.partitions:
            if partition.partition >= 0:
                one = {**receive, "messaging.destination.partition.id": str(partition.partition)}
                assert total(points, "messaging.client.consumed.messages", one) == (
                    partition.received
                )

        assert total(points, "msgclient.client.producers", system) == 1
        assert total(points, "msgclient.client.consumers", system) == 1
        assert total(points, "msgclient.client.connections", system) == (
            client_stats.connections_open
        )
        assert total(points, "msgclient.client.memory.used", system) == 0
    # A closed client's series end.
    assert "msgclient.client.producers" not in {
        name for name, by_attributes in collect(reader).items() if by_attributes
    }


async def test_two_clients_on_one_meter_provider_are_both_observed(
    pulsar_broker: Any, topic: str
) -> None:
    """A meter keeps the first instrument of a name: the clients share its instruments."""
    provider, reader = meter_provider()
    async with (
        msgclient.Client(pulsar_broker.service_url, meter_provider=provider) as first,
        msgclient.Client(pulsar_broker.service_url, meter_provider=provider) as second,
    ):
        for client, count in ((first, 2), (second, 3)):
            producer = await within(client.create_producer(topic))
            for _ in range(count):
                await within(producer.send(b"x"))
        points = collect(reader)
        assert total(points, "messaging.client.sent.messages") == 5
        assert total(points, "msgclient.client.producers", {"messaging.system": "pulsar"}) == 2
