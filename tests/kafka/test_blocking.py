"""The blocking facade on Kafka (tansu): a client made outside any event loop produces,
consumes in a group, reads from the earliest message, and closes its loop thread.

The group uses a short session timeout: tansu holds a JoinGroup for about half of it
(brokers.md).
"""

from __future__ import annotations

import threading

import msgclient
import msgclient.blocking
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import TIMEOUT, create_topic_blocking, read_blocking

RECEIVE_MS = 10_000


def loop_threads() -> int:
    return sum(thread.name == "msgclient-loop" for thread in threading.enumerate())


def test_blocking_client_produces_consumes_and_reads(kafka_broker: KafkaBroker, topic: str) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 1)  # one partition: one order
    sent = [b"send-%d" % i for i in range(3)]
    queued = [b"send-async-%d" % i for i in range(3)]
    threads_before = loop_threads()
    with msgclient.blocking.Client(kafka_broker.service_url, operation_timeout_seconds=5) as client:
        assert loop_threads() == threads_before + 1
        producer = client.create_producer(topic)
        ids = [producer.send(value, partition_key="k") for value in sent]
        futures = [producer.send_async(value) for value in queued]
        producer.flush()
        ids += [future.result(timeout=TIMEOUT) for future in futures]
        producer.close()

        consumer = client.subscribe(
            topic,
            "g-" + topic,
            consumer_type=msgclient.ConsumerType.Failover,
            initial_position=msgclient.InitialPosition.Earliest,
            session_timeout_ms=4000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )
        received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(len(ids))]
        for message in received:
            consumer.acknowledge(message)
        consumer.close()

        reader = client.create_reader(topic, msgclient.InitialPosition.Earliest)
        read = [reader.read_next(timeout_millis=RECEIVE_MS) for _ in range(len(ids))]
        reader.close()
    assert loop_threads() == threads_before

    assert [message.data() for message in received] == sent + queued
    assert [message.message_id() for message in received] == ids
    assert [message.partition_key() for message in received] == ["k"] * 3 + [None] * 3
    assert [message.data() for message in read] == sent + queued
    # What the broker holds, read by kafka-python: exactly these, once each.
    records = read_blocking(kafka_broker.bootstrap_servers, topic, len(ids))
    assert [record.value for record in records] == sent + queued


def test_blocking_transactions_commit_abort_and_acknowledge(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic_blocking(kafka_broker.bootstrap_servers, source, 1)
    create_topic_blocking(kafka_broker.bootstrap_servers, sink, 1)
    with msgclient.blocking.Client(kafka_broker.service_url) as client:
        client.create_producer(source).send(b"input")
        consumer = client.subscribe(
            source,
            "g-" + topic,
            consumer_type=msgclient.ConsumerType.Failover,
            initial_position=msgclient.InitialPosition.Earliest,
            session_timeout_ms=4000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )
        producer = client.create_producer(sink, transactional_id=f"tx-{topic}")
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        with producer.transaction() as txn:
            producer.send(b"committed")
            consumer.acknowledge(message, transaction=txn)
        assert txn.state is msgclient.TransactionState.COMMITTED
        txn = client.new_transaction()
        producer.send(b"aborted", transaction=txn)
        txn.abort()
        producer.begin_transaction()
        producer.send_async(b"committed too").result(timeout=TIMEOUT)
        producer.commit_transaction()
        with producer.transaction():
            assert len(producer.send_many([b"bulk-1", b"bulk-2"], keys=["k", None])) == 2
    values = [r.value for r in read_blocking(kafka_broker.bootstrap_servers, sink, None)]
    # kafka-python reads aborted records on tansu (brokers.md): only the order is checked.
    assert values[0] == b"committed" and values[-3:] == [b"committed too", b"bulk-1", b"bulk-2"]
