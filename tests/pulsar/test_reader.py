"""Readers on pulsar-lite: from the earliest message or from a message id (inclusive or
not, batched or not), has_message_available, no subscription left behind; and the blocking
facade's reader and consumer.

pulsar-lite quirks met here (brokers.md): GET_LAST_MESSAGE_ID on an EMPTY topic (or
partition) answers with an error (UnknownError "Topic has no messages"; the connection
stays up), so has_message_available is only asked where every partition has messages;
and its answer for a batched last entry carries no batch index
(-1, where an Apache broker gives the index of the batch's last message), so a reader
whose position is inside the last batch cannot learn from the broker that the rest of the
batch is there (the official client answers False there too): has_message_available is
asked on unbatched topics, or where the answer does not depend on the batch index.
Not in brokers.md: pulsar-lite keeps NON-DURABLE subscriptions like durable ones (after
the consumer closes, after the connection drops, across a restart: a durable consumer
under a closed reader's subscription name, even from Latest, gets the messages past the
reader's cursor), and resumes an existing one from its cursor, ignoring the start id of
the resubscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.pulsar.consume_helpers import EARLIEST, full_name, payloads, produce
from tests.pulsar.helpers import QUIET_MS, TIMEOUT, strictly_increasing, within

COUNT = 20
BATCH = 5  # messages per batch when batched: the start ids fall inside batches


@pytest.fixture
async def client(pulsar_broker: PulsarBroker) -> AsyncIterator[msgclient.Client]:
    async with msgclient.Client(pulsar_broker.service_url, operation_timeout_seconds=5) as client:
        yield client


def values(count: int = COUNT) -> list[bytes]:
    return [b"v-%03d" % i for i in range(count)]


async def produce_values(
    client: msgclient.Client, topic: str, batched: bool, count: int = COUNT
) -> list[PulsarMessageId]:
    options: dict[str, Any] = {"batching_enabled": batched}
    if batched:  # full batches of BATCH, not cut short by the publish delay
        options.update(batching_max_messages=BATCH, batching_max_publish_delay_ms=1000)
    ids = await produce(client, topic, values(count), **options)
    assert all((i.batch_index >= 0) == batched for i in ids)
    if batched:
        assert len({(i.ledger_id, i.entry_id) for i in ids}) == count // BATCH
    return ids


async def read(reader: msgclient.Reader, count: int) -> list[msgclient.Message]:
    return [await reader.read_next(timeout_millis=int(TIMEOUT * 1000)) for _ in range(count)]


async def assert_read_nothing_more(reader: msgclient.Reader) -> None:
    with pytest.raises(msgclient.ReceiveTimeoutError):
        message = await reader.read_next(timeout_millis=QUIET_MS)
        raise AssertionError(f"unexpected {message.data()!r} ({message.message_id()})")


batching = pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])


@batching
async def test_reader_from_earliest_reads_everything_in_order(
    client: msgclient.Client, topic: str, batched: bool
) -> None:
    ids = await produce_values(client, topic, batched)
    reader = await client.create_reader(topic, EARLIEST)
    assert reader.topic == full_name(topic)
    messages = await within(read(reader, COUNT))
    assert payloads(messages) == values()
    assert [m.message_id() for m in messages] == ids
    assert strictly_increasing([m.message_id() for m in messages])
    assert all(m.topic_name() == full_name(topic) for m in messages)
    await assert_read_nothing_more(reader)
    await reader.close()


@batching
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
@pytest.mark.parametrize("start", [7, 10], ids=["mid-batch", "batch-start"])
async def test_reader_from_a_message_id(
    client: msgclient.Client, topic: str, batched: bool, inclusive: bool, start: int
) -> None:
    ids = await produce_values(client, topic, batched)
    # Through serialize/deserialize, as an application keeps a position.
    start_id = PulsarMessageId.deserialize(ids[start].serialize())
    reader = await client.create_reader(topic, start_id, start_message_id_inclusive=inclusive)
    first = start if inclusive else start + 1
    messages = await within(read(reader, COUNT - first))
    assert payloads(messages) == values()[first:]
    assert [m.message_id() for m in messages] == ids[first:]
    await assert_read_nothing_more(reader)
    await reader.close()


@batching
async def test_reader_from_the_last_message_id_exclusive_waits_for_new_ones(
    client: msgclient.Client, topic: str, batched: bool
) -> None:
    ids = await produce_values(client, topic, batched)
    reader = await client.create_reader(topic, ids[-1])
    await assert_read_nothing_more(reader)
    # Unbatched: so the new message is a new entry either way.
    (new_id,) = await produce(client, topic, [b"new"], batching_enabled=False)
    message = await within(reader.read_next())
    assert (message.data(), message.message_id()) == (b"new", new_id)
    await reader.close()


async def test_has_message_available(client: msgclient.Client, topic: str) -> None:
    # Not on the empty topic: pulsar-lite fails GET_LAST_MESSAGE_ID there (module doc).
    ids = await produce_values(client, topic, batched=False, count=3)
    # A zero queue: nothing is prefetched, so each answer comes from the broker's last id.
    reader = await client.create_reader(topic, EARLIEST, receiver_queue_size=0)
    assert await within(reader.has_message_available())
    messages = await within(read(reader, 3))
    assert payloads(messages) == values(3)
    assert not await within(reader.has_message_available())
    await produce(client, topic, [b"more"], batching_enabled=False)
    assert await within(reader.has_message_available())
    assert (await within(reader.read_next())).data() == b"more"
    assert not await within(reader.has_message_available())
    await reader.close()

    from_last = await client.create_reader(topic, ids[1], receiver_queue_size=0)
    assert await within(from_last.has_message_available())  # ids[2] and "more" follow
    await from_last.close()


async def test_has_message_available_batched(client: msgclient.Client, topic: str) -> None:
    await produce_values(client, topic, batched=True)
    reader = await client.create_reader(topic, EARLIEST)
    assert await within(reader.has_message_available())
    await within(read(reader, COUNT))
    # Read to the end: the last read is the batch's last message (the batch index the
    # broker leaves out does not matter here).
    assert not await within(reader.has_message_available())
    await reader.close()


async def test_has_message_available_false_after_the_last_message_exclusive(
    client: msgclient.Client, topic: str
) -> None:
    ids = await produce_values(client, topic, batched=False, count=3)
    reader = await client.create_reader(topic, ids[-1], receiver_queue_size=0)
    assert not await within(reader.has_message_available())
    await reader.close()


async def test_has_message_available_at_the_last_message_inclusive(
    client: msgclient.Client, topic: str
) -> None:
    # Inclusive: the start message itself is available (the Java and C++ clients compare
    # the broker's last id with >= then).
    ids = await produce_values(client, topic, batched=False, count=3)
    # A zero queue, so the answer is not the prefetched message's (that would race).
    reader = await client.create_reader(
        topic, ids[-1], start_message_id_inclusive=True, receiver_queue_size=0
    )
    try:
        assert await within(reader.has_message_available())
        message = await within(reader.read_next())
        assert message.message_id() == ids[-1]
    finally:
        await reader.close()


async def test_a_reader_leaves_no_subscription_behind(client: msgclient.Client, topic: str) -> None:
    # What this can show on pulsar-lite: a closed reader holds nothing back, and a new
    # reader from the earliest reads everything again. It cannot show that the broker
    # dropped the subscription, since pulsar-lite keeps non-durable subscriptions (quirk,
    # module doc). That the reader subscribes non-durable (durable=false) is checked on
    # the wire by tests/pulsar/scripted/test_consumer.py.
    await produce_values(client, topic, batched=False, count=5)
    reader = await client.create_reader(topic, EARLIEST)
    assert payloads(await within(read(reader, 5))) == values(5)
    await reader.close()

    again = await client.create_reader(topic, EARLIEST)
    assert payloads(await within(read(again, 5))) == values(5)
    await assert_read_nothing_more(again)
    await again.close()


async def test_a_reader_resumes_after_a_broker_restart(
    make_pulsar_broker: Callable[..., PulsarBroker], tmp_path: Path, topic: str
) -> None:
    # pulsar-lite quirk (module doc): the reader's non-durable subscription outlives the
    # connection, and the broker resumes it from its cursor, ignoring the start id the
    # resubscription sends (an Apache broker honours it). The reader acks cumulatively as
    # it reads, as the Java and C++ readers do, so the cursor is after what was read and
    # nothing is read twice.
    broker = make_pulsar_broker(data_dir=tmp_path / "pulsar")
    async with msgclient.Client(broker.service_url, operation_timeout_seconds=5) as client:
        await produce_values(client, topic, batched=False, count=10)
        reader = await client.create_reader(topic, EARLIEST, receiver_queue_size=4)
        got = await within(read(reader, 3))
        await asyncio.to_thread(broker.stop)  # off the loop: the reader sees the drop
        await asyncio.to_thread(broker.start)
        await produce(client, topic, [b"after"], batching_enabled=False)
        got += await within(read(reader, 8))
        await assert_read_nothing_more(reader)
        await reader.close()
    assert payloads(got) == [*values(10), b"after"]


def test_blocking_reader_and_consumer(pulsar_broker: PulsarBroker, topic: str) -> None:
    with msgclient.blocking.Client(
        pulsar_broker.service_url, operation_timeout_seconds=5
    ) as client:
        consumer = client.subscribe(
            topic,
            "blocking",
            consumer_type=msgclient.ConsumerType.Shared,
            initial_position=EARLIEST,
            negative_ack_redelivery_delay_ms=100,
        )
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(v) for v in values(5)]
        producer.close()

        received = [consumer.receive(timeout_millis=int(TIMEOUT * 1000)) for _ in range(5)]
        assert payloads(received) == values(5)
        assert consumer.get_last_message_id() == ids[-1]
        assert not consumer.has_reached_end_of_topic()
        for message in received[1:]:
            consumer.acknowledge(message)
        consumer.negative_acknowledge(received[0])
        again = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        assert (again.data(), again.redelivery_count()) == (values(1)[0], 1)
        consumer.acknowledge(again)
        with pytest.raises(msgclient.ReceiveTimeoutError):
            consumer.receive(timeout_millis=QUIET_MS)
        consumer.close()

        reader = client.create_reader(topic, ids[1])
        assert reader.topic == full_name(topic)
        assert reader.has_message_available()
        read_back = [next(iter(reader))]  # blocking iteration
        read_back += [reader.read_next(timeout_millis=int(TIMEOUT * 1000)) for _ in range(2)]
        assert [m.message_id() for m in read_back] == ids[2:]
        assert not reader.has_message_available()
        with pytest.raises(msgclient.ReceiveTimeoutError):
            reader.read_next(timeout_millis=QUIET_MS)
        reader.close()


async def test_reader_iterates(client: msgclient.Client, topic: str) -> None:
    await produce_values(client, topic, batched=True)
    reader = await client.create_reader(topic, EARLIEST)
    got: list[bytes] = []
    async with asyncio.timeout(TIMEOUT):
        async for message in reader:
            got.append(message.data())
            if len(got) == COUNT:
                break
    assert got == values()
    await assert_read_nothing_more(reader)
    await reader.close()


async def test_a_reader_of_a_partitioned_topic(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    async with msgclient.Client(broker.service_url, operation_timeout_seconds=5) as client:
        # Unbatched round robin: a message on every partition (pulsar-lite errors on the
        # last message id of an empty one, module doc).
        await produce(client, topic, values(6), batching_enabled=False)
        reader = await client.create_reader(topic, EARLIEST)
        assert await within(reader.has_message_available())
        messages = await within(read(reader, 6))
        assert sorted(payloads(messages)) == values(6)
        assert len({m.topic_name() for m in messages}) == 3
        assert not await within(reader.has_message_available())
        await produce(client, topic, [b"more"], batching_enabled=False)
        assert await within(reader.has_message_available())
        assert (await within(reader.read_next())).data() == b"more"
        await reader.close()
        # A message id names one partition: a partitioned reader cannot start at one.
        with pytest.raises(msgclient.InvalidConfigurationError, match="partitioned"):
            await client.create_reader(topic, messages[0].message_id())
        # ... but a reader of one partition can, as it can start at Earliest.
        partitions = await client.get_topic_partitions(topic)
        assert partitions == [
            f"persistent://public/default/{topic}-partition-{i}" for i in range(3)
        ]
        first = min(
            (m for m in messages if m.topic_name() == partitions[1]), key=lambda m: m.message_id()
        )
        one = await client.create_reader(topic, EARLIEST, partition=1)
        expected = sorted(m.message_id() for m in messages if m.topic_name() == partitions[1])
        on_partition = await within(read(one, len(expected)))
        assert [m.message_id() for m in on_partition] == expected
        assert {m.topic_name() for m in on_partition} == {partitions[1]}
        assert on_partition[0].message_id() == first.message_id()
        await one.close()
        after_first = await client.create_reader(topic, first.message_id(), partition=1)
        assert (await within(after_first.read_next())).topic_name() == partitions[1]
        await after_first.close()
        with pytest.raises(msgclient.InvalidConfigurationError, match="has 3 partition"):
            await client.create_reader(topic, EARLIEST, partition=3)
