"""The Kafka producer on a real broker (tansu), read back by kafka-python."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.partitioner.default import murmur2
from kafka.protocol.producer import ProduceRequest

import msgclient
from msgclient.core.network.connection import Connection
from msgclient.embedded import KafkaBroker
from protocols.kafkawire.message_id import KafkaMessageId
from tests.kafka.helpers import create_topic, read

CODECS = [
    msgclient.CompressionType.NONE,
    msgclient.CompressionType.GZIP,
    msgclient.CompressionType.SNAPPY,
    msgclient.CompressionType.LZ4,
    msgclient.CompressionType.ZSTD,
]


async def within(awaitable: Any, timeout: float = 15.0) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
async def test_kafka_python_reads_exactly_what_msgclient_wrote(
    kafka_broker: KafkaBroker, topic: str, codec: msgclient.CompressionType
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 3)
    sent: list[tuple[Any, bytes, dict[str, str] | None, int | None]] = [
        ("user-1", b"keyed by str", {"a": "1", "b": "two"}, 1_700_000_000_123),
        (b"\x00\xff", b"keyed by bytes", None, None),
        (None, b"", None, 1_700_000_000_456),  # empty value, no key
        (None, bytes(range(256)) * 4096, {"big": "yes"}, None),  # 1 MiB
    ] + [(f"k{i}", b"m%d" % i, None, None) for i in range(200)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, compression_type=codec, max_request_size=4 * 1024 * 1024
        )
        futures = [
            await producer.send_async(
                value, partition_key=key, properties=headers, event_timestamp=timestamp
            )
            for key, value, headers, timestamp in sent
        ]
        ids = await within(asyncio.gather(*futures))
    records = await read(kafka_broker.bootstrap_servers, topic, len(sent))
    by_value = {r.value: r for r in records}
    for (key, value, headers, timestamp), message_id in zip(sent, ids, strict=True):
        record = by_value[value]
        key_bytes = key.encode() if isinstance(key, str) else key
        assert record.key == key_bytes
        assert dict(record.headers) == {k: v.encode() for k, v in (headers or {}).items()}
        if timestamp is not None:
            assert record.timestamp == timestamp
        assert isinstance(message_id, KafkaMessageId)
        assert (message_id.topic, message_id.partition, message_id.offset) == (
            record.topic,
            record.partition,
            record.offset,
        )
        if key_bytes is not None:  # keyed: the partition the Java client and kafka-python pick
            assert record.partition == (murmur2(key_bytes) & 0x7FFFFFFF) % 3


async def test_answers_are_taken_in_order_with_requests_in_flight(
    kafka_broker: KafkaBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Several Produce answers arriving in one read are handled in the order sent: none is
    taken for out of step (which made the producer reconnect and resend everything)."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=20)
        futures = [await producer.send_async(b"%d" % i) for i in range(20_000)]
        ids = await within(asyncio.gather(*futures), 60)
    assert not [r for r in caplog.records if "while expecting" in r.getMessage()]
    assert [i.offset for i in ids] == list(range(20_000))  # type: ignore[attr-defined]


async def test_idempotent_sequence_numbers_on_the_wire(
    kafka_broker: KafkaBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each partition's batches carry consecutive base sequences from 0 under one producer
    id and epoch (read from the Produce requests msgclient writes)."""
    produced: list[bytes] = []
    write = Connection.write

    def tapped(self: Connection[Any], data: bytes | list[bytes]) -> None:
        produced.append(b"".join(data) if isinstance(data, list) else data)
        write(self, data)

    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=50)
        monkeypatch.setattr(Connection, "write", tapped)
        futures = [
            await producer.send_async(b"x%d" % i, partition_key=str(i % 2)) for i in range(500)
        ]
        await within(asyncio.gather(*futures))
        monkeypatch.undo()
    sequences: dict[int, list[tuple[int, int, int, int]]] = {}
    for frame in produced:
        if int.from_bytes(frame[4:6], "big") != ProduceRequest.API_KEY:
            continue
        version = int.from_bytes(frame[6:8], "big")
        request = ProduceRequest.decode(frame[4:], version=version, header=True)
        for data in request.topic_data:
            for part in data.partition_data:
                batch = bytes(part.records)
                producer_id = int.from_bytes(batch[43:51], "big", signed=True)
                epoch = int.from_bytes(batch[51:53], "big", signed=True)
                base = int.from_bytes(batch[53:57], "big", signed=True)
                count = int.from_bytes(batch[57:61], "big")
                sequences.setdefault(part.index, []).append((producer_id, epoch, base, count))
    assert sorted(sequences) == [0, 1]
    for batches in sequences.values():
        assert batches[0][0] >= 0 and batches[0][1] >= 0
        assert len({(pid, epoch) for pid, epoch, _, _ in batches}) == 1
        expected = 0
        for _, _, base, count in batches:
            assert base == expected
            expected += count
        assert expected == 250


async def test_a_batch_resent_after_a_dropped_connection_is_stored_once(
    kafka_broker: KafkaBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection is cut while a Produce request is in flight (written, its batch not
    yet confirmed): the batch is written again on the new connection with the same
    producer id, epoch and sequence, and every record is stored once."""
    batches: list[tuple[int, int, int, int]] = []  # producer id, epoch, base sequence, count
    write = Connection.write

    def tapped(self: Connection[Any], data: bytes | list[bytes]) -> None:
        frame = b"".join(data) if isinstance(data, list) else data
        batches.extend(produced_batches(frame))
        write(self, data)

    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    count = 5000
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_max_messages=100)
        monkeypatch.setattr(Connection, "write", tapped)
        futures: list[asyncio.Future[msgclient.MessageId]] = []
        cut_after = -1  # batches written before the cut
        for i in range(count):
            futures.append(await producer.send_async(b"%d" % i))
            # One partition: a batch's sequences are the indexes of its messages.
            in_flight = [b for b in batches if not futures[b[2] + b[3] - 1].done()]
            if cut_after < 0 and i >= count // 2 and in_flight:
                # Cut every connection now: the answer to the batch in flight is lost.
                cut_after = len(batches)
                for task in list(client._backend.pool._connections.values()):  # type: ignore[attr-defined]
                    if task.done():
                        task.result().abort(ConnectionResetError("cut by the test"))
        results = await within(asyncio.gather(*futures, return_exceptions=True), 60)
        monkeypatch.undo()
    assert not [r for r in results if isinstance(r, BaseException)]
    assert cut_after >= 0, "no batch was in flight from the middle on"
    before, after = batches[:cut_after], batches[cut_after:]
    resent = set(before) & set(after)
    assert resent, "no batch written before the cut was written again after it"
    assert len({(pid, epoch) for pid, epoch, _, _ in batches}) == 1
    records = await read(kafka_broker.bootstrap_servers, topic, count)
    assert sorted(int(r.value) for r in records) == list(range(count))


def produced_batches(frame: bytes) -> list[tuple[int, int, int, int]]:
    """(producer id, epoch, base sequence, record count) of each batch of a Produce request;
    nothing for other requests."""
    if int.from_bytes(frame[4:6], "big") != ProduceRequest.API_KEY:
        return []
    version = int.from_bytes(frame[6:8], "big")
    request = ProduceRequest.decode(frame[4:], version=version, header=True)
    found = []
    for data in request.topic_data:
        for part in data.partition_data:
            batch = bytes(part.records)
            found.append(
                (
                    int.from_bytes(batch[43:51], "big", signed=True),
                    int.from_bytes(batch[51:53], "big", signed=True),
                    int.from_bytes(batch[53:57], "big", signed=True),
                    int.from_bytes(batch[57:61], "big"),
                )
            )
    return found


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_zero_and_one(kafka_broker: KafkaBroker, topic: str, acks: int) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic, acks=acks, enable_idempotence=False)
        ids = await within(
            asyncio.gather(*[await producer.send_async(b"a%d" % i) for i in range(100)])
        )
    offsets = [i.offset for i in ids]  # type: ignore[attr-defined]
    assert offsets == ([-1] * 100 if acks == 0 else list(range(100)))
    await read(kafka_broker.bootstrap_servers, topic, 100)


async def test_kafka_specific_refusals_name_the_problem(kafka_broker: KafkaBroker) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match="GZIP"):
            await client.create_producer("t", compression_type=msgclient.CompressionType.ZLIB)
        with pytest.raises(msgclient.InvalidTopicNameError, match="a/b"):
            await client.create_producer("a/b")
        with pytest.raises(msgclient.NotSupportedError, match="Shared subscriptions"):
            await client.subscribe("t", "s", consumer_type=msgclient.ConsumerType.Shared)
