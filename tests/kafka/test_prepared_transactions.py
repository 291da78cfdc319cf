"""Two-phase commit on Kafka (tansu): a transaction prepared by one client and ended by
another (the Spark sink's tasks prepare, its driver commits), offsets of a group named by
id committed with it, and the committed offsets read back."""

from __future__ import annotations

import pytest

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import create_topic
from tests.kafka.test_transactions import GROUP, read_all, within


async def test_a_prepared_transaction_is_committed_by_another_client(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    url, group = kafka_broker.service_url, f"marker-{topic}"
    async with msgclient.Client(url) as task, msgclient.Client(url) as driver:
        producer = await task.create_producer(topic, transactional_id=f"tx-{topic}")
        transaction = await task.new_transaction()
        await producer.send_many([b"a", b"b", b"c"])
        transaction.commit_offsets(group, {(topic, 0): 7})
        prepared = await within(transaction.prepare())
        assert prepared == msgclient.PreparedTransaction(
            f"tx-{topic}", prepared.producer_id, prepared.producer_epoch
        )
        assert transaction.state is msgclient.TransactionState.PREPARED
        # Open at the coordinator: nothing read_committed, the offsets not committed yet.
        assert await within(read_all(url, topic, 0)) == []
        offsets = driver.admin().list_consumer_group_offsets
        assert await within(offsets(group, [(topic, 0)])) == {(topic, 0): -1}

        await within(driver.commit_prepared(prepared))
        await within(driver.commit_prepared(prepared))  # again: no harm, no second marker
        assert sorted(await within(read_all(url, topic, 3))) == [b"a", b"b", b"c"]
        assert await within(offsets(group, [(topic, 0), (topic, 1)])) == {
            (topic, 0): 7,
            (topic, 1): -1,
        }

        # The id goes on: the next transaction takes a new epoch first.
        with pytest.raises(msgclient.TransactionStateError, match="new_transaction"):
            producer.begin_transaction()
        following = await task.new_transaction()
        await producer.send(b"d")
        await within(following.commit())
    assert sorted(await within(read_all(url, topic, 4))) == [b"a", b"b", b"c", b"d"]


async def test_an_aborted_or_superseded_prepared_transaction_is_never_read(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    url, group = kafka_broker.service_url, f"marker-{topic}"
    async with msgclient.Client(url) as task, msgclient.Client(url) as driver:
        producer = await task.create_producer(topic, transactional_id=f"tx-{topic}")
        aborted = await task.new_transaction()
        await producer.send_many([b"aborted"])
        aborted.commit_offsets(group, {(topic, 0): 1})
        prepared = await within(aborted.prepare())
        assert prepared is not None
        await within(driver.abort_prepared(prepared))

        # A task retried elsewhere: its new epoch aborts what the first attempt prepared.
        superseded = await task.new_transaction()
        await producer.send_many([b"superseded"])
        assert await within(superseded.prepare()) is not None
        async with msgclient.Client(url) as retry:
            again = await retry.create_producer(topic, transactional_id=f"tx-{topic}")
            async with again.transaction():
                await again.send(b"retried")
    assert await within(read_all(url, topic, 1)) == [b"retried"]
    everything = await within(read_all(url, topic, 3, isolation_level="read_uncommitted"))
    assert sorted(everything) == [b"aborted", b"retried", b"superseded"]
    async with msgclient.Client(url) as reader:
        offsets = reader.admin().list_consumer_group_offsets
        assert await within(offsets(group, [(topic, 0)])) == {(topic, 0): -1}


async def test_what_cannot_be_prepared(kafka_broker: KafkaBroker, topic: str) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, transactional_id=f"tx-{topic}")
        await producer.send(b"to acknowledge", transaction=await client.new_transaction())
        await producer.commit_transaction()
        consumer = await client.subscribe(topic, f"g-{topic}", **GROUP)
        message = await within(consumer.receive())
        transaction = await client.new_transaction()
        consumer.acknowledge(message, transaction=transaction)
        with pytest.raises(msgclient.TransactionStateError, match="commit_offsets"):
            await transaction.prepare()
        await transaction.abort()
        # Nothing written: nothing to end.
        assert await within((await client.new_transaction()).prepare()) is None


async def test_prepared_transactions_and_group_offsets_are_kafka_only(
    pulsar_broker: PulsarBroker,
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        prepared = msgclient.PreparedTransaction("x", 1, 0)
        with pytest.raises(msgclient.NotSupportedError, match="Pulsar transactions"):
            await client.commit_prepared(prepared)
        with pytest.raises(msgclient.NotSupportedError, match="REST admin API"):
            await client.admin().list_consumer_group_offsets("group", [("topic", 0)])
