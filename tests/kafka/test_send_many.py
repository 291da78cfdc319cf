"""send_many, the bulk path by columns, on a real broker (tansu), read back by kafka-python
and confluent-kafka; across a dropped connection and a broker restart."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kafka.partitioner.default import murmur2

import msgclient
import msgclient.blocking
from msgclient.core.network.connection import Connection
from msgclient.embedded import KafkaBroker
from protocols.kafkawire.message_id import KafkaMessageId
from tests.kafka.helpers import TIMEOUT, create_topic, read
from tests.kafka.test_produce import produced_batches
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
    # varied sizes, then values of one size (the path that lays records out without a
    # step per value), each over several batches
    values = varied(3000) + [b"u%05d" % i for i in range(3000)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, compression_type=codec)
        ids = await within(producer.send_many(values[:3000]))
        ids = [*ids, *await within(producer.send_many(values[3000:]))]
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


def confluent_read(bootstrap: str, topic: str, count: int) -> list[Any]:
    """``count`` records of partition 0 as confluent-kafka (librdkafka) reads them, in
    offset order; then nothing more."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(records) < count:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(records)} of {count}"
            for record in consumer.consume(1000, 0.2):
                assert record.error() is None, record.error()
                records.append(record)
        assert not consumer.consume(1000, 0.3)
        return records
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
async def test_confluent_reads_values_keys_headers_and_timestamps(
    kafka_broker: KafkaBroker, topic: str, codec: msgclient.CompressionType
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    values = varied(2000)
    keys: list[str | bytes | None] = [None if i % 5 == 0 else f"k{i % 7}" for i in range(2000)]
    headers = [{"i": str(i)} if i % 2 else None for i in range(2000)]
    stamps = [1_700_000_000_000 + i for i in range(2000)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, compression_type=codec, batching_max_messages=300
        )
        sent = values, keys, headers, stamps
        await within(
            producer.send_many(values, keys=keys, properties=headers, event_timestamps=stamps)
        )
    records = await asyncio.to_thread(confluent_read, kafka_broker.bootstrap_servers, topic, 2000)
    assert [r.value() for r in records] == sent[0]
    assert [r.key() for r in records] == [k.encode() if isinstance(k, str) else k for k in keys]
    assert [dict((k, v.decode()) for k, v in r.headers() or []) or None for r in records] == headers
    assert [r.timestamp()[1] for r in records] == stamps


async def test_a_bulk_call_over_several_produce_requests(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """3 MB in one call, batches of up to 600 KB under a 1 MiB max_request_size: no request
    holds them all, and every value is stored once, in order."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    values: list[bytes | None] = [b"%05d" % i + b"v" * (1000 + i % 900) for i in range(2000)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic,
            batching_max_allowed_size_in_bytes=600_000,
            batching_max_messages=10_000,
            max_request_size=1 << 20,
        )
        ids = await within(producer.send_many(values))
    assert [i.offset for i in ids] == list(range(len(values)))  # type: ignore[attr-defined]
    records = await read(kafka_broker.bootstrap_servers, topic, len(values))
    assert [r.value for r in sorted(records, key=lambda r: r.offset)] == values


async def test_a_bulk_call_across_a_dropped_connection_stores_each_value_once(
    kafka_broker: KafkaBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection is cut right after a Produce request of the call was written (its
    answer lost): the idempotent producer writes the unconfirmed batches again with the
    same producer id, epoch and sequences; the call returns every id, and each value is
    stored once."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    batches: list[tuple[int, int, int, int]] = []  # producer id, epoch, base sequence, count
    cut_after = -1  # batches written before the cut
    write = Connection.write
    count = 20_000
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=100)
        await producer.send(b"connected")

        def cut() -> None:
            for task in list(client._backend.pool._connections.values()):  # type: ignore[attr-defined]
                if task.done():
                    task.result().abort(ConnectionResetError("cut by the test"))

        def tapped(self: Connection[Any], data: bytes | list[bytes]) -> None:
            nonlocal cut_after
            frame = b"".join(data) if isinstance(data, list) else data
            batches.extend(produced_batches(frame))
            write(self, data)
            if cut_after < 0 and len(batches) >= 60:  # a third of the call's batches
                cut_after = len(batches)
                asyncio.get_running_loop().call_soon(cut)  # after this write returns

        monkeypatch.setattr(Connection, "write", tapped)
        values: list[bytes | None] = [b"%d" % i for i in range(count)]
        ids = await within(producer.send_many(values), 60)
        monkeypatch.undo()
    assert len(ids) == count
    assert cut_after >= 0
    before, after = batches[:cut_after], batches[cut_after:]
    assert set(before) & set(after), "no batch written before the cut was written again"
    assert len({(pid, epoch) for pid, epoch, _, _ in batches}) == 1
    records = await read(kafka_broker.bootstrap_servers, topic, count + 1)
    stored = sorted(r.value for r in records if r.value != b"connected")
    assert stored == sorted(values)  # type: ignore[type-var]


async def test_every_bulk_call_ends_when_the_broker_restarts(
    topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tansu keeps everything in memory (brokers.md): a restart loses what was stored, so
    what the client guarantees is checked: calls go on while the broker goes down and comes
    back; every call returns its ids or raises a typed error, nothing is stored twice,
    nothing unconfirmed is reported stored, and every call begun after the broker was back
    is stored."""
    per_call, restart_at, after_restart = 200, 3, 5
    results: list[BaseException | list[msgclient.MessageId]] = []
    begun_after_restart: list[int] = []
    writers: list[Connection[Any]] = []  # the connections Produce requests went out on
    write = Connection.write

    def tapped(self: Connection[Any], data: bytes | list[bytes]) -> None:
        frame = b"".join(data) if isinstance(data, list) else data
        if produced_batches(frame) and not any(w is self for w in writers):
            writers.append(self)
        write(self, data)

    monkeypatch.setattr(Connection, "write", tapped)
    with KafkaBroker() as broker:
        async with msgclient.Client(broker.service_url, operation_timeout_seconds=5) as client:
            producer = await client.create_producer(
                topic, send_timeout_millis=15_000, batching_max_messages=50
            )
            restarting: asyncio.Future[None] | None = None
            call = 0
            while len(begun_after_restart) < after_restart:
                assert call < 2000, "the broker did not come back"
                if call == restart_at:  # the broker goes down under the next calls
                    restarting = asyncio.ensure_future(asyncio.to_thread(broker.restart))
                if restarting is not None and restarting.done():
                    begun_after_restart.append(call)
                values: list[bytes | None] = [
                    b"%d" % (call * per_call + i) for i in range(per_call)
                ]
                try:
                    results.append(list(await within(producer.send_many(values), 60)))
                except msgclient.MsgClientError as error:
                    results.append(error)
                call += 1
                await asyncio.sleep(0.02)
            await within(restarting)
        stored = [int(r.value) for r in await read(broker.bootstrap_servers, topic, None)]
    assert len(set(stored)) == len(stored)  # resent batches were stored once
    confirmed = {
        call * per_call + i
        for call, result in enumerate(results)
        if not isinstance(result, BaseException)
        for i in range(per_call)
    }
    assert set(stored) <= confirmed
    for call in begun_after_restart:
        assert set(range(call * per_call, (call + 1) * per_call)) <= set(stored)
    assert len(writers) >= 2  # the restart happened under the calls: a new connection


async def test_an_explicit_partition_takes_every_value(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 3)
    values: list[bytes | None] = [b"%d" % i for i in range(500)]
    keys: list[str | bytes | None] = [f"k{i % 7}" for i in range(500)]  # they would spread
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic)
        ids = await within(producer.send_many(values, keys=keys, partition=2))
        with pytest.raises(msgclient.InvalidConfigurationError, match=r"partition=3.*3 partition"):
            await producer.send_many([b"x"], partition=3)
        with pytest.raises(msgclient.InvalidConfigurationError, match="partition=-1"):
            await producer.send_many([b"x"], partition=-1)
    assert {i.partition for i in ids} == {2}  # type: ignore[attr-defined]
    records = await read(kafka_broker.bootstrap_servers, topic, 500)
    assert [(r.partition, r.value, r.key) for r in sorted(records, key=lambda r: r.offset)] == [
        (2, v, k.encode())
        for v, k in zip(values, keys, strict=True)  # type: ignore[union-attr]
    ]


async def test_calls_queued_one_after_another_keep_their_order(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """send_many_async returns once its batches are queued: the next call's values come
    after them in every partition (the Spark sink converts its next batch while the
    previous one is confirmed); the blocking facade's likewise."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    calls = [[b"%d-%d" % (call, i) for i in range(3000)] for call in range(4)]
    keys: list[str | bytes | None] = [f"k{i % 5}" for i in range(3000)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=500)
        # the second call is queued before the first is confirmed
        queued = [await within(producer.send_many_async(values, keys=keys)) for values in calls[:2]]
        sent = [await within(future) for future in queued]
    assert [len(ids) for ids in sent] == [3000, 3000]
    with msgclient.blocking.Client(kafka_broker.service_url) as blocking_client:
        producer = blocking_client.create_producer(topic, batching_max_messages=500)
        pending = [producer.send_many_async(values, keys=keys) for values in calls[2:]]
        assert [len(future.result(timeout=TIMEOUT)) for future in pending] == [3000, 3000]
    records = await read(kafka_broker.bootstrap_servers, topic, 12_000)
    for partition in (0, 1):
        stored = [
            r.value for r in sorted(records, key=lambda r: r.offset) if r.partition == partition
        ]
        # in the order they were given: call by call, value by value
        assert stored == sorted(stored, key=lambda v: tuple(map(int, v.split(b"-"))))
