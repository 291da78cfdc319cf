"""The same ordinary program on the official client and on pulsar_compat: produce with
keys, properties and null values, consume, acknowledge; message accessors and types."""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any

import pytest

from tests.compat.conftest import RECEIVE_MS


def test_send_receive_accessors(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    pulsar = pulsar_module
    consumer = client.subscribe(
        topic, "sub", initial_position=pulsar.InitialPosition.Earliest, consumer_name="c-1"
    )
    producer = client.create_producer(topic, producer_name="p-1")
    first = producer.send(
        b"hello",
        properties={"a": "1"},
        partition_key="k1",
        ordering_key="o1",
        event_timestamp=1234,
    )
    producer.send(b"plain")
    producer.send(None, partition_key="k1")  # a tombstone
    received = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    for message in received:
        consumer.acknowledge(message)

    assert [m.data() for m in received] == [b"hello", b"plain", b""]
    assert [m.value() for m in received][:2] == [b"hello", b"plain"]
    assert [m.has_null_value() for m in received] == [False, False, True]
    assert [m.partition_key() for m in received] == ["k1", "", "k1"]
    assert [m.ordering_key() for m in received] == ["o1", "", ""]
    assert [m.properties() for m in received] == [{"a": "1"}, {}, {}]
    assert [m.event_timestamp() for m in received] == [1234, 0, 0]
    assert all(m.publish_timestamp() > 0 for m in received)
    assert [m.producer_name() for m in received] == ["p-1"] * 3
    assert [m.redelivery_count() for m in received] == [0, 0, 0]
    assert received[0].schema_version() == ""
    assert received[0].topic_name() == f"persistent://public/default/{topic}"
    assert str(received[0].message_id()) == str(first)
    assert received[0].message_id().serialize() == first.serialize()
    assert producer.topic() == f"persistent://public/default/{topic}"
    assert producer.producer_name() == "p-1"
    assert producer.last_sequence_id() == 2
    assert producer.is_connected() and consumer.is_connected()
    assert consumer.consumer_name() == "c-1"
    assert consumer.subscription_name() == "sub"
    assert consumer.topic() == f"persistent://public/default/{topic}"
    producer.close()
    consumer.close()


def test_receive_timeout_and_closed(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    pulsar = pulsar_module
    consumer = client.subscribe(topic, "sub")
    with pytest.raises(pulsar.Timeout) as timeout:
        consumer.receive(100)
    assert isinstance(timeout.value, pulsar.PulsarException)
    producer = client.create_producer(topic)
    producer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"late")
    with pytest.raises(ValueError):
        consumer.receive("100")
    consumer.close()


def test_send_async_callback(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    pulsar = pulsar_module
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=10, block_if_queue_full=True
    )
    results: list[tuple[Any, str]] = []
    done = threading.Event()

    def callback(result: Any, message_id: Any) -> None:
        results.append((result, str(message_id)))
        if len(results) == 5:
            done.set()

    for i in range(5):
        producer.send_async(b"m%d" % i, callback)
    producer.flush()
    assert done.wait(RECEIVE_MS / 1000)
    assert [r for r, _ in results] == [pulsar.Result.Ok] * 5
    assert len({i for _, i in results}) == 5
    producer.close()


def test_cumulative_ack_refused_on_shared(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    pulsar = pulsar_module
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = client.create_producer(topic)
    producer.send(b"x")
    message = consumer.receive(RECEIVE_MS)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(message)
    consumer.acknowledge(message.message_id())
    consumer.close()


def test_batch_receive_with_positional_policy(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    pulsar = pulsar_module
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(3, -1, 5000),
    )
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(b"b%d" % i)
    first = consumer.batch_receive()
    second = consumer.batch_receive()
    assert [m.data() for m in first] == [b"b0", b"b1", b"b2"]
    assert [m.data() for m in second] == [b"b3", b"b4"]
    consumer.close()


def test_message_listener_on_listener_thread(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    pulsar = pulsar_module
    got: list[bytes] = []
    threads: set[str] = set()
    done = threading.Event()
    caller = threading.current_thread().name

    def listener(consumer: Any, message: Any) -> None:
        got.append(message.data())
        threads.add(threading.current_thread().name)
        consumer.acknowledge(message)
        if len(got) == 3:
            done.set()

    consumer = client.subscribe(
        topic,
        "sub",
        initial_position=pulsar.InitialPosition.Earliest,
        message_listener=listener,
    )
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(b"l%d" % i)
    assert done.wait(RECEIVE_MS / 1000)
    assert got == [b"l0", b"l1", b"l2"]
    assert len(threads) == 1 and caller not in threads
    consumer.close()


def test_send_async_without_a_callback(
    pulsar_module: ModuleType, client: Any, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``send_async(msg, None)``: the official client sends it and tells nobody; ours
    raised a TypeError inside its send callback (found by pulsar-client's test suite)."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    with caplog.at_level(logging.ERROR):
        producer.send_async(b"no callback", None)
        producer.flush()
    assert consumer.receive(RECEIVE_MS).data() == b"no callback"
    assert not [r for r in caplog.records if "callback" in r.getMessage()]
    producer.close()
    consumer.close()


def test_a_url_without_a_scheme_is_a_value_error(pulsar_module: ModuleType) -> None:
    with pytest.raises(ValueError):
        pulsar_module.Client("fakeServiceUrl")
