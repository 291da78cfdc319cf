"""send_many on Pulsar (pulsar-lite), read back by the official client: values, keys (str
as they are, bytes base64-encoded and flagged), null values, ids, partitions by key as
send_async routes them, and every codec."""

from __future__ import annotations

from collections.abc import Callable

import pulsar
import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.message_id import ChunkMessageId
from tests.pulsar.helpers import (
    assert_nothing_more,
    assert_same_id,
    chunking,
    official_client,
    receive,
    subscribe,
    within,
)

CODECS = [
    c for c in msgclient.CompressionType if c is not msgclient.CompressionType.GZIP
]  # Kafka's


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
async def test_the_official_client_reads_exactly_what_send_many_wrote(
    pulsar_broker: PulsarBroker, topic: str, codec: msgclient.CompressionType
) -> None:
    url = pulsar_broker.service_url
    values: list[bytes | None] = [b"v%d-" % i + b"x" * (i % 200) for i in range(2500)]
    values[3] = b""
    values[4] = None
    keys: list[str | bytes | None] = [None] * len(values)
    keys[10] = "str-key"
    keys[11] = b"\x00\xff bytes key"
    uniform: list[bytes | None] = [b"u%05d" % i for i in range(2500)]  # one size: cut by arithmetic
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, compression_type=codec)
            ids = await within(producer.send_many(values, keys=keys))
            ids = [*ids, *await within(producer.send_many(uniform))]
        values += uniform
        keys += [None] * len(uniform)
        received = await receive(consumer, len(values))
        await assert_nothing_more(consumer)
    assert len(ids) == len(values)
    for value, key, ours, theirs in zip(values, keys, ids, received, strict=True):
        assert theirs.data() == (value or b"")
        assert_same_id(ours, theirs.message_id())
        if key is None:
            assert not theirs.partition_key()
        elif isinstance(key, str):
            assert theirs.partition_key() == key
        else:  # Java's keyBytes: the official client hands back the base64 text
            assert theirs.partition_key() == "AP8gYnl0ZXMga2V5"
    # a null value arrives empty; the official Python client has no accessor for the flag


async def test_keys_go_to_the_partition_send_async_picks(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 5})
    keys: list[str | bytes | None] = [f"user-{i % 23}" for i in range(300)]
    values: list[bytes | None] = [b"%d" % i for i in range(300)]
    async with msgclient.Client(broker.service_url) as client:
        producer = await client.create_producer(topic)
        bulk = await within(producer.send_many(values, keys=keys))
        single = [await within(producer.send(b"s", partition_key=key)) for key in keys[:23]]
    partition_of = {key: i.partition for key, i in zip(keys, single, strict=False)}  # type: ignore[attr-defined]
    assert [i.partition for i in bulk] == [partition_of[k] for k in keys]  # type: ignore[attr-defined]
    assert len(set(partition_of.values())) > 1


async def test_custom_routing_is_refused(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 2})
    async with msgclient.Client(broker.service_url) as client:
        producer = await client.create_producer(
            topic,
            message_routing_mode=msgclient.PartitionsRoutingMode.CustomPartition,
            message_router=lambda message, partitions: 0,
        )
        with pytest.raises(msgclient.NotSupportedError, match="CustomPartition"):
            await producer.send_many([b"x"])


async def test_official_consumer_of_a_batch_sees_its_first_key(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """A batch carries its first message's key in the entry metadata, as the Java
    client's do: Key_Shared dispatches by it."""
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = official.subscribe(
            topic,
            "ks",
            consumer_type=pulsar.ConsumerType.KeyShared,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic)
            await within(producer.send_many([b"a", b"b"], keys=["k", "k"]))
        received = await receive(consumer, 2)
    assert [m.data() for m in received] == [b"a", b"b"]
    assert [m.partition_key() for m in received] == ["k", "k"]


async def test_properties_and_event_timestamps_as_columns(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    values: list[bytes | None] = [b"%d" % i for i in range(300)]
    props = [{"n": str(i)} if i % 2 else None for i in range(300)]
    stamps = [1_700_000_000_000 + i if i % 3 else None for i in range(300)]
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic)
            await within(producer.send_many(values, properties=props, event_timestamps=stamps))
        received = await receive(consumer, len(values))
    for i, message in enumerate(received):
        assert message.data() == values[i]
        assert message.properties() == (props[i] or {})
        assert message.event_timestamp() == (stamps[i] or 0)


async def test_an_explicit_partition_takes_every_value(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    keys: list[str | bytes | None] = [f"user-{i % 23}" for i in range(200)]
    async with msgclient.Client(broker.service_url) as client:
        producer = await client.create_producer(topic)
        ids = await within(
            producer.send_many([b"%d" % i for i in range(200)], keys=keys, partition=1)
        )
        with pytest.raises(msgclient.InvalidConfigurationError, match="partition=3"):
            await producer.send_many([b"x"], partition=3)
    assert {i.partition for i in ids} == {1}  # type: ignore[attr-defined]


async def test_a_chunking_producer_sends_each_value_and_chunks_the_big_ones(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """Chunking and batching are exclusive: send_many on a chunking producer sends value
    by value, a value over the chunk size in chunks, reassembled by the official
    consumer."""
    chunk = 64 * 1024
    big = bytes(range(256)) * (3 * chunk // 256) + b"end"  # 4 chunks
    values: list[bytes | None] = [b"small", big, None, b"last"]
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **chunking(chunk))
            ids = await within(
                producer.send_many(
                    values,
                    keys=["k0", "k1", None, None],
                    properties=[None, {"p": "big"}, None, None],
                )
            )
        received = await receive(consumer, len(values))
        await assert_nothing_more(consumer)
    assert [m.data() for m in received] == [b"small", big, b"", b"last"]
    assert [m.partition_key() for m in received][:2] == ["k0", "k1"]
    assert received[1].properties() == {"p": "big"}
    assert isinstance(ids[1], ChunkMessageId)
    for ours, theirs in zip(ids, received, strict=True):
        assert_same_id(ours, theirs.message_id())
