"""Kafka transactions on a real broker (tansu): what commits is read, what aborts is not,
acknowledgments commit with the transaction, fencing, and every misuse's error.

tansu quirks (../shared/brokers.md): its Fetch responses list no aborted transactions, so
confluent-kafka's and kafka-python's read_committed consumers (which rely on that list)
read aborted records too; msgclient's decides by the abort markers as well
(records/reader.py). tansu enforces no transaction timeout: the client does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import TIMEOUT, create_topic, read

GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "initial_position": msgclient.InitialPosition.Earliest,
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 4000,
    "fetch_max_wait_ms": 100,
}
QUIET_MS = 500


async def within(awaitable: Any, timeout: float = TIMEOUT) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


async def read_all(url: str, topic: str, count: int, **options: Any) -> list[bytes]:
    """Exactly ``count`` values read by a msgclient consumer of a new group from offset 0,
    then nothing more within QUIET_MS. Offset 0 committed for the group, not "earliest":
    tansu's ListOffsets earliest answers the batch stored first, which after concurrent
    writes to a partition need not be offset 0 (brokers.md)."""
    async with msgclient.Client(url) as client:
        group = f"reader-{time.monotonic_ns()}"
        partitions = await client.get_topic_partitions(topic)
        start = {(topic, index): 0 for index in range(len(partitions))}
        (await client.admin().alter_consumer_group_offsets(group, start)).all()
        consumer = await client.subscribe(topic, group, **{**GROUP, **options})
        values = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(count)]
        with pytest.raises(msgclient.ReceiveTimeoutError):
            extra = await consumer.receive(timeout_millis=QUIET_MS)
            values.append(extra.data())
        return values


def confluent_read_blocking(bootstrap: str, topic: str, wanted: set[bytes]) -> set[bytes]:
    """What confluent-kafka (librdkafka) reads read_committed until it has read ``wanted``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"confluent-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: set[bytes] = set()
        deadline = time.monotonic() + TIMEOUT
        while not wanted <= values:
            assert time.monotonic() < deadline, f"confluent-kafka read only {sorted(values)}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.add(message.value())
        return values
    finally:
        consumer.close()


async def test_committed_records_are_read_and_aborted_ones_are_not(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, transactional_id=f"tx-{topic}")
        async with producer.transaction():
            committed = [await producer.send_async(b"committed-%d" % i) for i in range(5)]
        aborted = producer.begin_transaction()
        stored = [await producer.send_async(b"aborted-%d" % i) for i in range(5)]
        await producer.flush()  # written to the log, then aborted: a marker must hide them
        await aborted.abort()
        txn = await client.new_transaction()
        await producer.send(b"committed-5", transaction=txn)
        await txn.commit()
    assert all(f.done() and f.exception() is None for f in committed + stored)
    expected = [b"committed-%d" % i for i in range(6)]
    url = kafka_broker.service_url
    assert await within(read_all(url, topic, 6)) == expected  # read_committed, the default
    everything = await within(read_all(url, topic, 11, isolation_level="read_uncommitted"))
    assert sorted(everything) == sorted(expected + [b"aborted-%d" % i for i in range(5)])
    # The peers see every committed record (and, on tansu, the aborted ones too: above).
    python_read = await read(kafka_broker.bootstrap_servers, topic, None, "read_committed")
    assert set(expected) <= {r.value for r in python_read}
    await asyncio.to_thread(
        confluent_read_blocking, kafka_broker.bootstrap_servers, topic, set(expected)
    )


async def test_acknowledgments_commit_with_the_transaction(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """Consume-transform-produce: the inputs' offsets commit with the outputs; an aborted
    transaction's inputs come again, and its acks are not committed on their own."""
    source, sink = f"{topic}-in", f"{topic}-out"
    await create_topic(kafka_broker.bootstrap_servers, source, 1)
    await create_topic(kafka_broker.bootstrap_servers, sink, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        feeder = await client.create_producer(source)
        for i in range(6):
            await feeder.send(b"%d" % i)
        consumer = await client.subscribe(
            source, f"g-{topic}", acknowledgment_group_time_ms=0, **GROUP
        )
        producer = await client.create_producer(sink, transactional_id=f"tx-{topic}")
        first = [await within(consumer.receive(timeout_millis=10_000)) for _ in range(3)]
        async with producer.transaction() as txn:
            for message in first:
                await producer.send(message.data() + b"!")
                consumer.acknowledge(message, transaction=txn)
        second = [await within(consumer.receive(timeout_millis=10_000)) for _ in range(3)]
        txn = producer.begin_transaction()
        for message in second:
            await producer.send(message.data() + b"?")
        await producer.send_offsets_to_transaction(consumer, second)
        await asyncio.sleep(0.2)  # room for a wrong, non-transactional commit of them
        await txn.abort()
        again = [await within(consumer.receive(timeout_millis=10_000)) for _ in range(3)]
        assert [m.data() for m in again] == [b"3", b"4", b"5"]
        assert all(m.redelivery_count() == 1 for m in again)
        await consumer.close()
        # A new member of the group starts after what the first transaction committed.
        restarted = await client.subscribe(source, f"g-{topic}", **GROUP)
        resumed = await within(restarted.receive(timeout_millis=10_000))
        assert resumed.data() == b"3"
    assert await within(read_all(kafka_broker.service_url, sink, 3)) == [b"0!", b"1!", b"2!"]


async def test_a_second_producer_with_the_same_id_fences_the_first(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    url, tid = kafka_broker.service_url, f"tx-{topic}"
    async with msgclient.Client(url) as old_client, msgclient.Client(url) as new_client:
        old = await old_client.create_producer(topic, transactional_id=tid)
        old.begin_transaction()
        await old.send(b"zombie")
        new = await new_client.create_producer(topic, transactional_id=tid)
        with pytest.raises(msgclient.TransactionFatalError, match="fatal"):
            await within(old.send(b"after the fence"))
        with pytest.raises(msgclient.TransactionFatalError):
            await old.commit_transaction()
        with pytest.raises(msgclient.TransactionFatalError):
            await old.abort_transaction()
        async with new.transaction():
            await new.send(b"live")
    # msgclient reads the zombie's never-ended transaction as aborted (a newer epoch of its
    # producer id wrote after it); tansu wrote no abort marker for it.
    assert await within(read_all(url, topic, 1)) == [b"live"]


async def test_misuse_raises_typed_errors_and_loses_nothing(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match="acks"):
            await client.create_producer(topic, transactional_id="x", acks=1)
        with pytest.raises(msgclient.InvalidConfigurationError, match="enable_idempotence"):
            await client.create_producer(topic, transactional_id="x", enable_idempotence=False)
        plain = await client.create_producer(topic)
        producer = await client.create_producer(
            topic, transactional_id=f"tx-{topic}", transaction_timeout_ms=400
        )
        with pytest.raises(msgclient.TransactionStateError, match="no transaction is open"):
            await producer.commit_transaction()
        with pytest.raises(msgclient.TransactionStateError, match="sends only in a transaction"):
            await producer.send(b"outside")
        txn = producer.begin_transaction()
        with pytest.raises(msgclient.TransactionStateError, match="commit or abort it"):
            producer.begin_transaction()
        with pytest.raises(msgclient.TransactionStateError, match="no transactional_id"):
            await plain.send(b"x", transaction=txn)
        with pytest.raises(msgclient.TransactionStateError, match="no transactional_id"):
            plain.begin_transaction()
        sent = await producer.send(b"in time")
        assert sent is not None
        await asyncio.sleep(0.5)  # past transaction_timeout_ms
        with pytest.raises(msgclient.TransactionTimeoutError, match="transaction_timeout_ms"):
            await producer.send(b"too late")
        with pytest.raises(msgclient.TransactionTimeoutError):
            await txn.commit()
        await txn.abort()
        with pytest.raises(msgclient.TransactionStateError, match="aborted"):
            await txn.commit()
        with pytest.raises(msgclient.TransactionStateError, match="not the open transaction"):
            await producer.send(b"x", transaction=txn)
        async with producer.transaction():
            await producer.send(b"next")
        assert producer.pending_count == 0
    assert await within(read_all(kafka_broker.service_url, topic, 1)) == [b"next"]


async def test_a_failed_send_makes_the_transaction_abortable_then_usable_again(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """A message the broker refuses fails its future; the commit refuses, the abort
    works and bumps the epoch (the failed batch's sequence numbers leave no gap)."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, transactional_id=f"tx-{topic}", send_timeout_millis=300
        )
        manager = client._backend._transactions[f"tx-{topic}"]  # type: ignore[attr-defined]
        epoch = manager.producer_epoch
        txn = producer.begin_transaction()
        await producer.send(b"stored")
        # Cut the partition off its connection so that the next send times out.
        for partition in producer._partitions:  # type: ignore[attr-defined]
            partition._connected = False
        lost = await producer.send_async(b"timed out")
        with pytest.raises(msgclient.SendTimeoutError):
            await within(lost)
        for partition in producer._partitions:  # type: ignore[attr-defined]
            partition._connected = True
        with pytest.raises(msgclient.TransactionAbortableError, match="1 messages"):
            await txn.commit()
        await txn.abort()
        assert manager.producer_epoch > epoch
        async with producer.transaction():
            await producer.send(b"after")
    assert await within(read_all(kafka_broker.service_url, topic, 1)) == [b"after"]


async def test_transactions_are_not_supported_on_pulsar_yet(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.NotSupportedError, match="Pulsar transactions"):
            await client.new_transaction()
        with pytest.raises(msgclient.NotSupportedError, match="Pulsar transactions"):
            await client.create_producer(topic, transactional_id="x")


async def test_partitions_join_a_transaction_once_not_per_batch(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """AddPartitionsToTxn goes out once per loop turn for the partitions new to the
    transaction, never once per message or batch."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 4)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, transactional_id=f"tx-{topic}", batching_max_messages=10
        )
        manager = client._backend._transactions[f"tx-{topic}"]  # type: ignore[attr-defined]
        joined: list[list[tuple[str, int]]] = []
        request = manager._request

        async def counting(link: Any, body: Any, what: str, *rest: Any) -> Any:
            if what == "AddPartitionsToTxn":
                joined.append([(t.name, p) for t in body.v3_and_below_topics for p in t.partitions])
            return await request(link, body, what, *rest)

        manager._request = counting
        for round_number in range(2):
            async with producer.transaction():
                for i in range(1000):
                    await producer.send_async(b"%d" % i, partition_key=str(i))
            partitions = [tp for request_partitions in joined for tp in request_partitions]
            assert sorted(partitions) == [(topic, p) for p in range(4)], round_number
            assert len(joined) <= 4  # 100 batches per partition, one join each
            joined.clear()
