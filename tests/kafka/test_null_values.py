"""Null values on Kafka: ``send(None)`` writes a record with value length -1 (a tombstone, what
compacted topics delete a key by), read back as a null value; an empty value stays an empty
value. Checked against kafka-python in both directions on a real broker (tansu)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import msgclient
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic, produce, read

CODECS = [msgclient.CompressionType.NONE, msgclient.CompressionType.LZ4]


async def within(awaitable: Any, timeout: float = 20.0) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


def null_flags(messages: list[msgclient.Message]) -> list[tuple[bool, bytes | None, bytes]]:
    return [(m.has_null_value(), m.value(), m.data()) for m in messages]


# Runs of unkeyed records of one shape, then a change of shape: the decoder's plain-record
# fast path must tell a null value from an empty one by the bytes it compares.
MIXED: list[tuple[str | None, bytes | None]] = [
    (None, None),
    (None, None),
    (None, None),
    (None, b""),
    (None, b""),
    (None, None),
    ("k1", None),
    ("k1", b""),
    (None, b"x"),
    ("k2", b"value"),
    (None, None),
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
async def test_kafka_python_reads_a_tombstone_for_none_and_an_empty_value_for_b(
    kafka_broker: KafkaBroker, topic: str, codec: msgclient.CompressionType
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, compression_type=codec)
        futures = [await producer.send_async(v, partition_key=k) for k, v in MIXED]  # one batch
        await within(asyncio.gather(*futures))
        # alone, with headers, and delayed (the delay travels as a header)
        await within(producer.send(None, partition_key="k3", properties={"h": "1"}))
        await within(producer.send(None, deliver_after=1))
    records = await read(kafka_broker.bootstrap_servers, topic, len(MIXED) + 2)
    assert [(r.key, r.value) for r in records[: len(MIXED)]] == [
        (None if k is None else k.encode(), v) for k, v in MIXED
    ]
    assert (records[-2].key, records[-2].value, records[-2].headers) == (b"k3", None, [("h", b"1")])
    assert records[-1].value is None


@pytest.mark.parametrize("codec", ["lz4", None])
async def test_msgclient_reads_kafka_pythons_tombstones_as_null_values(
    kafka_broker: KafkaBroker, topic: str, codec: str | None
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    # kafka-python needs a key with a null value
    records: list[dict[str, Any]] = [
        {"key": b"a", "value": None},
        {"key": b"a", "value": b""},
        {"key": b"b", "value": b"v"},
        {"key": b"b", "value": None},
        {"value": b""},
        {"value": b""},
    ]
    await produce(kafka_broker.bootstrap_servers, topic, records, compression_type=codec)
    async with msgclient.Client(kafka_broker.service_url) as client:
        reader = await client.create_reader(topic, msgclient.InitialPosition.Earliest)
        received = [await within(reader.read_next(timeout_millis=10_000)) for _ in records]
    assert null_flags(received) == [
        (True, None, b""),
        (False, b"", b""),
        (False, b"v", b"v"),
        (True, None, b""),
        (False, b"", b""),
        (False, b"", b""),
    ]
    assert [m.key_bytes() for m in received] == [r.get("key") for r in records]


async def test_null_values_round_trip_through_msgclient(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """msgclient to msgclient, through receive_many's columns too."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    consumer_options: dict[str, Any] = {
        "consumer_type": msgclient.ConsumerType.Failover,
        "initial_position": msgclient.InitialPosition.Earliest,
        "session_timeout_ms": 4000,  # tansu holds a JoinGroup for half of it (brokers.md)
        "heartbeat_interval_ms": 300,
        "rebalance_timeout_ms": 4000,
        "fetch_max_wait_ms": 100,
    }
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic)
        futures = [await producer.send_async(v, partition_key=k) for k, v in MIXED]
        await within(asyncio.gather(*futures))
        consumer = await client.subscribe(topic, "g-" + topic, **consumer_options)
        values: list[bytes | None] = []
        while len(values) < len(MIXED):
            batch = await within(consumer.receive_many(timeout_millis=10_000))
            values += batch.values()
            assert [m.value() for m in batch] == batch.values()
            consumer.acknowledge(batch)
    assert values == [v for _, v in MIXED]
