"""receive_many against pulsar-lite: a MessageBatch's columns are what the per-message
accessors give, acknowledge(batch) acks every message (a whole batch entry by its entry
id), and the batch mixes with receive.

Backlogs come from the official client, batched (entries of up to 100 messages) with keys,
properties and event times on some messages, so the columns meet both the plain records
and those decoded through protobuf.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from msgclient.message_batch import MessageBatch, MessageBlock
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.pulsar.consume_helpers import assert_no_message, receive_n
from tests.pulsar.helpers import (
    SHARED_FROM_EARLIEST,
    Publish,
    WireTap,
    official_produce,
    wait_until,
    within,
)

BATCHED: dict[str, Any] = {
    "batching_enabled": True,
    "batching_max_messages": 100,
    "batching_max_publish_delay_ms": 50,
}


def publishes(count: int) -> list[Publish]:
    """Every fifth message with a key and properties, every seventh with an event time."""
    return [
        Publish(
            b"many-%05d" % i,
            partition_key=f"key-{i}" if i % 5 == 0 else None,
            properties={"n": str(i)} if i % 5 == 0 else None,
            event_timestamp=1_700_000_000_000 + i if i % 7 == 0 else None,
        )
        for i in range(count)
    ]


async def receive_all(consumer: msgclient.Consumer, count: int) -> list[MessageBatch]:
    batches: list[MessageBatch] = []
    while sum(map(len, batches)) < count:
        batches.append(await within(consumer.receive_many(timeout_millis=10_000)))
    assert sum(map(len, batches)) == count
    return batches


async def test_columns_match_the_messages_and_the_official_producer(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    sent = publishes(500)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "columns", **SHARED_FROM_EARLIEST))
        await official_produce(url, topic, sent, **BATCHED)
        batches = await receive_all(consumer, len(sent))
        assert any(isinstance(m, MessageBlock) for b in batches for m, _, _ in b.slices)
        values = [v for b in batches for v in b.values()]
        keys = [k for b in batches for k in b.key_bytes()]
        properties = [p for b in batches for p in b.properties()]
        events = [t for b in batches for t in b.event_timestamps()]
        assert values == [p.value for p in sent]
        assert keys == [p.partition_key.encode() if p.partition_key else None for p in sent]
        assert properties == [p.properties for p in sent]
        assert events == [p.event_timestamp or 0 for p in sent]
        for batch in batches:  # the columns are the per-message accessors, in order
            messages = list(batch)
            assert len(messages) == len(batch)
            assert batch.message_ids() == [m.message_id() for m in messages]
            assert batch.publish_timestamps() == [m.publish_timestamp() for m in messages]
            assert batch.topic_names() == [m.topic_name() for m in messages]
            assert batch.values() == [m.value() for m in messages]
            assert batch[-1] is messages[-1]  # made once, kept
        ids = [i for b in batches for i in b.message_ids()]
        assert len(set(ids)) == len(sent)
        await consumer.close()


async def test_acknowledging_a_batch_acks_every_message_by_entry(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    url = pulsar_broker.service_url
    sent = publishes(300)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "acked", **SHARED_FROM_EARLIEST))
        await official_produce(url, topic, sent, **BATCHED)
        batches = await receive_all(consumer, len(sent))
        for batch in batches:
            await within(consumer.acknowledge(batch))
        assert consumer.stats().acknowledged == len(sent)  # messages, not the entry ids
        await consumer.close()
    acks = wire.acks()
    acked = [(i.ledgerId, i.entryId) for ack in acks for i in ack.message_id]
    entries = {
        (i.ledger_id, i.entry_id)
        for b in batches
        for i in b.message_ids()
        if isinstance(i, PulsarMessageId)
    }
    assert sorted(set(acked)) == sorted(entries)  # each entry once, no batch index
    assert len(acked) == len(entries)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        again = await within(client.subscribe(topic, "acked", **SHARED_FROM_EARLIEST))
        await assert_no_message(again)


async def test_a_batch_cut_inside_an_entry_acks_by_index_and_mixes_with_receive(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    sent = publishes(200)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "cut", **SHARED_FROM_EARLIEST))
        await official_produce(url, topic, sent, **BATCHED)
        await wait_until(lambda: consumer.stats().queue_depth >= 150, "the backlog queued")
        first = await within(consumer.receive_many(max_messages=30, timeout_millis=5_000))
        one = await within(consumer.receive(5_000))
        rest = await receive_all(consumer, len(sent) - 31)
        assert len(first) == 30
        got = first.values() + [one.value()] + [v for b in rest for v in b.values()]
        assert got == [p.value for p in sent]  # in order, nothing lost or repeated
        consumer.acknowledge(first)
        consumer.acknowledge(one)
        for batch in rest:
            consumer.acknowledge(batch)
        await consumer.close()
        again = await within(client.subscribe(topic, "cut", **SHARED_FROM_EARLIEST))
        await assert_no_message(again)


async def test_an_unacknowledged_batch_comes_again(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    sent = publishes(120)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "again", **SHARED_FROM_EARLIEST))
        await official_produce(url, topic, sent, **BATCHED)
        batches = await receive_all(consumer, len(sent))
        consumer.acknowledge(batches[0])
        await consumer.close()
        again = await within(client.subscribe(topic, "again", **SHARED_FROM_EARLIEST))
        redelivered = await receive_n(again, len(sent) - len(batches[0]))
        assert [m.value() for m in redelivered] == [p.value for p in sent[len(batches[0]) :]]


async def test_receive_many_waits_for_the_first_message_only(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "wait", **SHARED_FROM_EARLIEST))
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await within(consumer.receive_many(timeout_millis=200))
        waiting = asyncio.ensure_future(consumer.receive_many(timeout_millis=10_000))
        producer = await within(client.create_producer(topic, batching_enabled=False))
        await within(producer.send(b"late"))
        batch = await within(waiting)
        assert batch.values() == [b"late"]
        with pytest.raises(msgclient.InvalidConfigurationError, match="max_messages"):
            await consumer.receive_many(max_messages=-1)
        with pytest.raises(TypeError, match="timeout_millis"):
            await consumer.receive_many(timeout_millis="5")  # type: ignore[arg-type]
        await consumer.close()
