"""send_many, the bulk path by columns, on a real broker (tansu), read back by kafka-python."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.partitioner.default import murmur2

import msgclient
from msgclient.embedded import KafkaBroker
from protocols.kafkawire.message_id import KafkaMessageId
from tests.kafka.helpers import TIMEOUT, create_topic, read
from tests.kafka.test_transactions import read_all

CODECS = list(msgclient.CompressionType)
CODECS.remove(msgclient.CompressionType.ZLIB)  # Pulsar's: refused on Kafka


async def within(awaitable: Any, timeout: float = TIMEOUT) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


def varied(count: int) -> list[bytes | None]:
    """Values of many sizes, an empty one and null ones among them."""
    values: list[bytes | None] = [b"v%d-" % i + b"x" * (i % 300) for i in range(count)]
    values[7] = b""
    values[11] = None
    values[count - 1] = None
    return values


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
async def test_kafka_python_reads_exactly_what_send_many_wrote(
    kafka_broker: KafkaBroker, topic: str, codec: msgclient.CompressionType
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 3)
    values = varied(3000)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, compression_type=codec)
        ids = await within(producer.send_many(values))
    assert len(ids) == len(values)
    records = await read(kafka_broker.bootstrap_servers, topic, len(values))
    stored = {(r.partition, r.offset): r for r in records}
    for value, message_id in zip(values, ids, strict=True):
        assert isinstance(message_id, KafkaMessageId)
        record = stored.pop((message_id.partition, message_id.offset))
        assert record.value == value and record.key is None
    assert not stored
    # unkeyed values stick to a partition per batch: each partition holds runs in order
    for partition in range(3):
        offsets = sorted(i.offset for i in ids if i.partition == partition)  # type: ignore[attr-defined]
        assert offsets == list(range(len(offsets)))


async def test_keys_route_as_kafkas_partitioner_and_keep_their_order(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 4)
    count = 2000
    keys: list[str | bytes | None] = [f"user-{i % 37}" for i in range(count)]
    keys[5] = b"\x00\xff bytes"
    keys[9] = None  # no key: the sticky partition
    values: list[bytes | None] = [b"%d" % i for i in range(count)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=50)
        ids = await within(producer.send_many(values, keys=keys))
    records = await read(kafka_broker.bootstrap_servers, topic, count)
    by_value = {r.value: r for r in records}
    for i, (key, message_id) in enumerate(zip(keys, ids, strict=True)):
        record = by_value[b"%d" % i]
        assert (record.partition, record.offset) == (message_id.partition, message_id.offset)  # type: ignore[attr-defined]
        if key is not None:
            raw = key.encode() if isinstance(key, str) else key
            assert record.key == raw
            assert record.partition == (murmur2(raw) & 0x7FFFFFFF) % 4
    for user in range(37):  # each key's records in the order given
        offsets = [by_value[b"%d" % i].offset for i in range(count) if keys[i] == f"user-{user}"]
        assert offsets == sorted(offsets)


async def test_batches_are_cut_by_count_and_size_and_a_large_value_goes_alone(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    values: list[bytes | None] = [b"a" * 100] * 250 + [b"L" * 50_000] + [b"b" * 100] * 10
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, batching_max_messages=100, batching_max_allowed_size_in_bytes=4096
        )
        ids = await within(producer.send_many(values))
    assert [i.offset for i in ids] == list(range(len(values)))  # type: ignore[attr-defined]
    records = await read(kafka_broker.bootstrap_servers, topic, len(values))
    assert [r.value for r in sorted(records, key=lambda r: r.offset)] == values


async def test_the_memory_limit_bounds_a_bulk_call(kafka_broker: KafkaBroker, topic: str) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    limit = 64 * 1024
    async with msgclient.Client(kafka_broker.service_url, memory_limit=limit) as client:
        producer = await client.create_producer(topic)
        highest = 0
        stop = asyncio.Event()

        async def sample() -> None:
            nonlocal highest
            while not stop.is_set():
                highest = max(highest, client.memory_used)
                await asyncio.sleep(0)

        sampler = asyncio.ensure_future(sample())
        ids = await within(producer.send_many([b"m" * 1000] * 2000))  # 2 MB
        stop.set()
        await sampler
    assert len(ids) == 2000
    assert 0 < highest <= limit
    assert client.memory_used == 0


async def test_bad_input_raises_before_anything_is_sent(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, max_request_size=10_000)
        with pytest.raises(msgclient.MessageTooBigError, match="10000"):
            await producer.send_many([b"ok", b"x" * 20_000])
        with pytest.raises(TypeError, match="str"):
            await producer.send_many([b"ok", "text"])  # type: ignore[list-item]
        with pytest.raises(msgclient.InvalidConfigurationError, match="2 keys for 3 values"):
            await producer.send_many([b"a", b"b", b"c"], keys=["k", "k"])
        with pytest.raises(TypeError, match="key"):
            await producer.send_many([b"a"], keys=[42])  # type: ignore[list-item]
        assert len(await producer.send_many([])) == 0
        await producer.send(b"only this")
    assert await within(read_all(kafka_broker.service_url, topic, 1)) == [b"only this"]


async def test_a_failed_batch_fails_the_call_with_its_error(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, send_timeout_millis=300)
        await producer.send(b"connected")
        for partition in producer._partitions:  # type: ignore[attr-defined]
            partition._connected = False  # written nowhere: the send timeout fails them
        with pytest.raises(msgclient.SendTimeoutError):
            await within(producer.send_many([b"lost"] * 500))
        for partition in producer._partitions:  # type: ignore[attr-defined]
            partition._connected = True
        assert producer.pending_count == 0
        assert client.memory_used == 0


async def test_send_many_in_a_transaction(kafka_broker: KafkaBroker, topic: str) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, transactional_id=f"tx-{topic}")
        with pytest.raises(msgclient.TransactionStateError):
            await producer.send_many([b"outside"])
        async with producer.transaction():
            await producer.send_many([b"c%d" % i for i in range(300)])
        txn = producer.begin_transaction()
        await producer.send_many([b"aborted"] * 300)
        await txn.abort()
    committed = await within(read_all(kafka_broker.service_url, topic, 300))
    assert committed == [b"c%d" % i for i in range(300)]


async def test_headers_and_event_timestamps_as_columns(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    count = 500
    values: list[bytes | None] = [b"%d" % i for i in range(count)]
    headers = [{"n": str(i), "kind": "bulk"} if i % 2 else None for i in range(count)]
    stamps = [1_700_000_000_000 + i if i % 3 else None for i in range(count)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic)
        with pytest.raises(msgclient.InvalidConfigurationError, match="1 properties for 2"):
            await producer.send_many([b"a", b"b"], properties=[None])
        with pytest.raises(msgclient.InvalidConfigurationError, match="event_timestamp"):
            await producer.send_many([b"a"], event_timestamps=[-5])
        with pytest.raises(msgclient.InvalidConfigurationError, match="properties"):
            await producer.send_many([b"a"], properties=[{"k": 1}])  # type: ignore[dict-item]
        await within(producer.send_many(values, properties=headers, event_timestamps=stamps))
    records = sorted(
        await read(kafka_broker.bootstrap_servers, topic, count), key=lambda r: r.offset
    )
    for i, record in enumerate(records):
        assert record.value == values[i]
        expected = sorted((k, v.encode()) for k, v in (headers[i] or {}).items())
        assert sorted(record.headers) == expected
        if stamps[i] is not None:
            assert record.timestamp == stamps[i]


async def test_a_copy_pipeline_by_columns(kafka_broker: KafkaBroker, topic: str) -> None:
    """receive_many's columns go straight into send_many: no Message made either way."""
    source, sink = f"{topic}-in", f"{topic}-out"
    await create_topic(kafka_broker.bootstrap_servers, source, 1)
    await create_topic(kafka_broker.bootstrap_servers, sink, 1)
    count = 3000
    values: list[bytes | None] = [b"%d" % i for i in range(count)]
    keys: list[str | bytes | None] = [b"k%d" % (i % 10) for i in range(count)]
    headers = [{"i": str(i)} for i in range(count)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        feeder = await client.create_producer(source)
        await within(feeder.send_many(values, keys=keys, properties=headers))
        consumer = await client.subscribe(
            source,
            f"copy-{topic}",
            consumer_type=msgclient.ConsumerType.Failover,
            initial_position=msgclient.InitialPosition.Earliest,
            session_timeout_ms=4000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )
        copier = await client.create_producer(sink)
        copied = 0
        while copied < count:
            batch = await within(consumer.receive_many(timeout_millis=10_000))
            await within(
                copier.send_many(
                    batch.values(), keys=batch.key_bytes(), properties=batch.properties()
                )
            )
            consumer.acknowledge(batch)
            copied += len(batch)
        assert copied == count
    records = await read(kafka_broker.bootstrap_servers, sink, count)
    records.sort(key=lambda r: int(r.value))
    assert [r.value for r in records] == values
    assert [r.key for r in records] == keys
    assert [dict((k, v.decode()) for k, v in r.headers) for r in records] == headers
