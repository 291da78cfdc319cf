"""Consumer.redeliver_unacknowledged_messages on pulsar-lite, the same program on the
official client and on pulsar_compat: what was delivered and not acknowledged comes again,
with its redelivery count up. pulsar-lite redelivers on Shared and Key_Shared and ignores
the request on Exclusive and Failover (brokers.md), for both clients."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.compat.conftest import RECEIVE_MS

QUIET_MS = 500  # nothing more arrives within this


def received_until_quiet(consumer: Any, pulsar: ModuleType) -> list[tuple[bytes, int]]:
    got = []
    while True:
        try:
            message = consumer.receive(QUIET_MS)
        except pulsar.Timeout:
            return got
        got.append((message.data(), message.redelivery_count()))


def subscribe_and_send(
    pulsar: ModuleType, client: Any, topic: str, kind: str, count: int
) -> tuple[Any, list[Any]]:
    """A consumer of type ``kind`` that has received ``count`` messages."""
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=getattr(pulsar.ConsumerType, kind),
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = client.create_producer(topic)
    for i in range(count):
        producer.send(b"m%d" % i, partition_key=f"k{i}")
    return consumer, [consumer.receive(RECEIVE_MS) for _ in range(count)]


@pytest.mark.parametrize("kind", ["Shared", "KeyShared"])
def test_unacknowledged_messages_come_again(
    pulsar_module: ModuleType, client: Any, topic: str, kind: str
) -> None:
    pulsar = pulsar_module
    consumer, received = subscribe_and_send(pulsar, client, topic, kind, 3)
    consumer.acknowledge(received[0])
    consumer.redeliver_unacknowledged_messages()
    again = received_until_quiet(consumer, pulsar)
    assert sorted(again) == [(b"m1", 1), (b"m2", 1)]


@pytest.mark.parametrize("kind", ["Exclusive", "Failover"])
def test_pulsar_lite_ignores_the_request_on_exclusive_and_failover(
    pulsar_module: ModuleType, client: Any, topic: str, kind: str
) -> None:
    pulsar = pulsar_module
    consumer, received = subscribe_and_send(pulsar, client, topic, kind, 3)
    consumer.acknowledge(received[0])
    consumer.redeliver_unacknowledged_messages()
    assert received_until_quiet(consumer, pulsar) == []


def test_queued_messages_come_once_more_not_twice(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    """A message in the receive queue is unacknowledged too: the broker sends it again. The
    official (C++) client keeps its queued copy as well, so the application sees it twice
    (once with redelivery count 0); pulsar_compat drops the queued copy, as the Java client
    does."""
    pulsar = pulsar_module
    consumer, received = subscribe_and_send(pulsar, client, topic, "Shared", 2)
    # "queued" shares a batch entry with the third message: when that one is received,
    # "queued" is in the receive queue (an entry is dispatched, and queued, whole). No
    # call of the official API says when a prefetched message is there.
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=2, batching_max_publish_delay_ms=60_000
    )
    producer.send_async(b"m2", None)
    producer.send_async(b"queued", None)
    producer.flush()
    received.append(consumer.receive(RECEIVE_MS))
    consumer.redeliver_unacknowledged_messages()
    again = sorted(received_until_quiet(consumer, pulsar))
    redelivered = [(b"m0", 1), (b"m1", 1), (b"m2", 1), (b"queued", 1)]
    if pulsar.__name__ == "pulsar":
        assert again == [*redelivered[:3], (b"queued", 0), (b"queued", 1)]
    else:
        assert again == redelivered
    assert [m.data() for m in received] == [b"m0", b"m1", b"m2"]
