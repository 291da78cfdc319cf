"""Null-value messages (tombstones): ``send(None)`` sets the metadata's null_value flag, on
its own and inside batches, and each client reads the other's.

The official client (3.13) reads a null-value message with ``data() == b""`` and
``has_null_value()``; msgclient's ``data()`` is the same, and its ``value()`` is None.
"""

from __future__ import annotations

import asyncio

import pytest

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker
from tests.pulsar.consume_helpers import receive_n
from tests.pulsar.helpers import (
    SHARED_FROM_EARLIEST,
    Publish,
    official_client,
    official_produce,
    receive,
    settle,
    subscribe,
    within,
)

# (value, partition key): a null value, an empty value that is NOT null, a plain one.
SENT: list[tuple[bytes | None, str | None]] = [
    (None, "deleted-key"),
    (b"", "empty-key"),
    (b"payload", None),
    (None, None),
]


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_official_consumer_reads_msgclient_null_values(
    pulsar_broker: PulsarBroker, topic: str, batching: bool
) -> None:
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, batching_enabled=batching)
            ids = await settle([await producer.send_async(v, partition_key=k) for v, k in SENT])
        received = await receive(consumer, len(SENT))

    assert [m.has_null_value() for m in received] == [v is None for v, _ in SENT]
    assert [m.data() for m in received] == [v or b"" for v, _ in SENT]
    assert [m.partition_key() for m in received] == [k or "" for _, k in SENT]
    if batching:  # all four in one entry: the flag is per message (SingleMessageMetadata)
        assert len({(i.ledger_id, i.entry_id) for i in ids}) == 1


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_msgclient_reads_official_null_values(
    pulsar_broker: PulsarBroker, topic: str, batching: bool
) -> None:
    url = pulsar_broker.service_url
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(topic, "sub", **SHARED_FROM_EARLIEST)
        await official_produce(
            url,
            topic,
            [Publish(v, partition_key=k) for v, k in SENT],  # type: ignore[arg-type]
            batching_enabled=batching,
        )
        received = await receive_n(consumer, len(SENT))

    assert [m.has_null_value() for m in received] == [v is None for v, _ in SENT]
    assert [m.value() for m in received] == [v for v, _ in SENT]
    assert [m.data() for m in received] == [v or b"" for v, _ in SENT]
    assert [m.partition_key() for m in received] == [k for _, k in SENT]


async def test_msgclient_round_trip_and_dead_letter_keeps_null(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """A null value survives msgclient to msgclient, and a dead-lettered tombstone stays one."""
    url = pulsar_broker.service_url
    dlq = f"{topic}-dlq"
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic,
            "sub",
            **SHARED_FROM_EARLIEST,
            negative_ack_redelivery_delay_ms=0,
            dead_letter_policy=msgclient.DeadLetterPolicy(
                max_redeliver_count=1, dead_letter_topic=dlq
            ),
        )
        dead = await client.subscribe(dlq, "dlq-sub", **SHARED_FROM_EARLIEST)
        producer = await client.create_producer(topic)
        await within(producer.send(None, partition_key="k"))
        first = await within(consumer.receive())
        assert first.value() is None and first.has_null_value() and first.data() == b""
        consumer.negative_acknowledge(first)
        again = await within(consumer.receive())
        assert again.has_null_value() and again.redelivery_count() == 1
        consumer.negative_acknowledge(again)
        buried = await within(dead.receive())
    assert buried.has_null_value() and buried.value() is None
    assert buried.partition_key() == "k"


async def test_blocking_facade_passes_none_through(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url

    def run() -> msgclient.Message:
        with msgclient.blocking.Client(url) as client:
            consumer = client.subscribe(topic, "sub", **SHARED_FROM_EARLIEST)
            producer = client.create_producer(topic)
            producer.send(None)  # type: ignore[arg-type]
            return consumer.receive(timeout_millis=10_000)

    message = await within(asyncio.to_thread(run))
    assert message.has_null_value() and message.value() is None


@pytest.mark.parametrize(("value", "type_name"), [("text", "str"), (42, "int"), ([b"x"], "list")])
async def test_other_values_are_still_refused(
    pulsar_broker: PulsarBroker, topic: str, value: object, type_name: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(topic)
        with pytest.raises(TypeError, match=f"message value must be .*None.*not {type_name}"):
            await producer.send(value)  # type: ignore[arg-type]
        assert producer.pending_count == 0
