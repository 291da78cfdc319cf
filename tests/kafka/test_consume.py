"""The Kafka consumer and reader on a real broker (tansu), fed by kafka-python and msgclient.

Group tests use short session timeouts: tansu holds a JoinGroup for about half the session
timeout (brokers.md).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest

import msgclient
from msgclient.embedded import KafkaBroker
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.message_id import KafkaMessageId
from tests.kafka.helpers import create_topic, produce, read

GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "initial_position": msgclient.InitialPosition.Earliest,
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 4000,
    "fetch_max_wait_ms": 100,
}


async def within(awaitable: Any, timeout: float = 20.0) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


async def receive_n(consumer: msgclient.Consumer, count: int) -> list[msgclient.Message]:
    return [await consumer.receive(timeout_millis=10_000) for _ in range(count)]


async def receive_across(
    consumers: tuple[msgclient.Consumer, ...], count: int
) -> list[list[msgclient.Message]]:
    """``count`` messages in all from ``consumers`` (each acknowledged), as they come: what
    each one received. Bound it with ``within``."""
    received: list[list[msgclient.Message]] = [[] for _ in consumers]
    while sum(map(len, received)) < count:
        for consumer, messages in zip(consumers, received, strict=True):
            try:
                message = await consumer.receive(timeout_millis=50)
            except msgclient.ReceiveTimeoutError:
                continue
            consumer.acknowledge(message)
            messages.append(message)
    return received


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
async def test_msgclient_reads_exactly_what_kafka_python_wrote(
    kafka_broker: KafkaBroker, topic: str, codec: str | None
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    records = [
        {"key": b"k%d" % (i % 5), "value": b"v%d" % i, "headers": [("h", b"%d" % i)]}
        for i in range(300)
    ] + [{"value": b"", "timestamp_ms": 1_700_000_000_000}, {"value": b"x" * (1 << 20)}]
    await produce(
        kafka_broker.bootstrap_servers,
        topic,
        records,
        compression_type=codec,
        max_request_size=4 << 20,
    )
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        received = await within(receive_n(consumer, len(records)))
        for message in received:
            consumer.acknowledge(message)
    by_value = {m.data(): m for m in received}
    assert len(by_value) == len(records)
    for record in records[:300]:
        message = by_value[record["value"]]
        assert message.key_bytes() == record["key"]
        assert message.properties() == {"h": record["headers"][0][1].decode()}
    assert by_value[b""].event_timestamp() == 1_700_000_000_000


async def test_out_of_order_acks_never_commit_past_an_unacked_message(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"%d" % i} for i in range(10)])
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        received = await within(receive_n(consumer, 10))
        for message in received:
            if message.data() != b"3":  # everything but offset 3
                consumer.acknowledge(message)
        await consumer.close()
        again = await client.subscribe(topic, "g-" + topic, **GROUP)
        first = await within(again.receive(timeout_millis=10_000))
        # the reopened consumer starts at the first unacked message
        assert isinstance(first.message_id(), KafkaMessageId)
        assert first.message_id().offset == 3  # type: ignore[attr-defined]
        assert first.data() == b"3"


async def test_two_consumers_split_the_partitions_and_one_takes_over(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 4)
    async with msgclient.Client(kafka_broker.service_url) as client:
        first = await client.subscribe(topic, "g-" + topic, **GROUP)
        second = await client.subscribe(topic, "g-" + topic, **GROUP)

        def active(consumer: msgclient.Consumer) -> int:
            return sum(1 for p in consumer._partitions if p.is_active)  # type: ignore[attr-defined]

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not (active(first) == 2 and active(second) == 2):
            assert loop.time() < deadline, (active(first), active(second))
            await asyncio.sleep(0.1)
        producer = await client.create_producer(topic)
        for i in range(40):
            await producer.send(b"%d" % i, partition_key=str(i))
        by_consumer = await within(receive_across((first, second), 40))
        got = [m for messages in by_consumer for m in messages]
        assert sorted(int(m.data()) for m in got) == list(range(40))
        for consumer in (first, second):  # nothing more: none came twice
            with pytest.raises(msgclient.ReceiveTimeoutError):
                await consumer.receive(timeout_millis=500)
        # Split: no partition's messages went to both.
        first_partitions, second_partitions = (
            {m.message_id().partition for m in messages}  # type: ignore[attr-defined]
            for messages in by_consumer
        )
        assert not first_partitions & second_partitions
        await second.close()
        deadline = loop.time() + 20
        while active(first) != 4:
            assert loop.time() < deadline
            await asyncio.sleep(0.1)
        for i in range(40, 60):
            await producer.send(b"%d" % i, partition_key=str(i))
        rest = await within(receive_n(first, 20))
        assert sorted(int(m.data()) for m in rest) == list(range(40, 60))
        for message in rest:
            first.acknowledge(message)
        await first.close()
        # The committed offsets cover everything acknowledged: a new member of the group
        # starts after the last message, with nothing left over and nothing lost.
        after = await client.subscribe(topic, "g-" + topic, **GROUP)
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await after.receive(timeout_millis=1500)
        await producer.send(b"60", partition_key="60")
        assert (await within(after.receive(timeout_millis=10_000))).data() == b"60"


async def test_negative_ack_redelivers_with_count_then_dead_letters(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"poison"}, {"value": b"ok"}])
    dlq = topic + "-dlq"
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(
            topic,
            "g-" + topic,
            negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=msgclient.DeadLetterPolicy(
                max_redeliver_count=2, dead_letter_topic=dlq
            ),
            **GROUP,
        )
        counts: list[int] = []
        for _ in range(4):
            message = await within(consumer.receive(timeout_millis=10_000))
            if message.data() == b"ok":
                consumer.acknowledge(message)
                continue
            counts.append(message.redelivery_count())
            consumer.negative_acknowledge(message)
        assert counts == [0, 1, 2]
        # the third nack sends it to the dead-letter topic, readable by kafka-python
        records = await read(kafka_broker.bootstrap_servers, dlq, 1)
        assert records[0].value == b"poison"


async def test_reader_from_earliest_reads_every_partition(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 3)
    await produce(
        kafka_broker.bootstrap_servers,
        topic,
        [{"key": b"%d" % i, "value": b"%d" % i} for i in range(30)],
    )
    async with msgclient.Client(kafka_broker.service_url) as client:
        reader = await client.create_reader(topic, msgclient.InitialPosition.Earliest)
        messages = [await within(reader.read_next(timeout_millis=10_000)) for _ in range(30)]
    assert sorted(int(m.data()) for m in messages) == list(range(30))


async def test_buffered_messages_never_exceed_the_permits(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"%d" % i} for i in range(500)])
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, receiver_queue_size=20, **GROUP)
        partition = consumer._partitions[0]  # type: ignore[attr-defined]
        queue = partition._queue
        # Nothing was taken yet: what is queued now is the most there has been so far.
        depths = [queue.count(partition.window)]
        put_all = queue.put_all

        def watched(messages: Any, window: Any) -> None:
            put_all(messages, window)
            depths.append(queue.count(partition.window))

        queue.put_all = watched  # the depth after every dispatch from now on
        deadline = asyncio.get_running_loop().time() + 20
        while depths[-1] < 20:  # the fetcher fills the window while nothing is taken
            assert asyncio.get_running_loop().time() < deadline, depths[-5:]
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a while with nothing taken: an overfill would show
        received = await within(receive_n(consumer, 500))
        assert [m.data() for m in received] == [b"%d" % i for i in range(500)]
    assert max(depths) == 20, max(depths)


async def single_record_batches(url: str, topic: str, count: int) -> list[KafkaMessageId]:
    """One record per batch: tansu answers ListOffsets latest with the newest batch's base
    offset + 1 (brokers.md), which is only right when batches hold one record."""
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        return [await producer.send(b"%d" % i) for i in range(count)]  # type: ignore[misc]


@pytest.mark.parametrize("inclusive", [True, False])
async def test_reader_from_a_message_id_reads_that_partition_from_there(
    kafka_broker: KafkaBroker, topic: str, inclusive: bool
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    await produce(
        kafka_broker.bootstrap_servers,
        topic,
        [{"value": b"%d" % i, "partition": i % 2} for i in range(20)],
    )
    start = KafkaMessageId(topic, 1, 4)
    expected = [KafkaMessageId(topic, 1, offset) for offset in range(4 if inclusive else 5, 10)]
    async with msgclient.Client(kafka_broker.service_url) as client:
        reader = await client.create_reader(topic, start, start_message_id_inclusive=inclusive)
        read = [await within(reader.read_next(timeout_millis=10_000)) for _ in expected]
        with pytest.raises(msgclient.ReceiveTimeoutError):  # partition 1 only: offsets 0-9
            await reader.read_next(timeout_millis=1000)
    assert [m.message_id() for m in read] == expected


async def test_reader_seeks_by_offset_and_by_time_and_knows_the_end(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    ids = await single_record_batches(kafka_broker.service_url, topic, 5)
    await asyncio.sleep(0.05)
    middle_ms = time.time_ns() // 1_000_000
    await asyncio.sleep(0.05)
    ids += await single_record_batches(kafka_broker.service_url, topic, 5)
    async with msgclient.Client(kafka_broker.service_url) as client:
        reader = await client.create_reader(topic, ids[0], start_message_id_inclusive=True)
        assert await reader.has_message_available()
        assert await within(reader._consumer.get_last_message_id()) == ids[-1]  # type: ignore[attr-defined]
        read = [await within(reader.read_next(timeout_millis=10_000)) for _ in range(10)]
        assert [m.message_id() for m in read] == ids
        assert not await reader.has_message_available()
        await reader.seek(ids[2])
        assert (await within(reader.read_next(timeout_millis=10_000))).message_id() == ids[2]
        await reader.seek(middle_ms)  # the first message written at or after that time
        assert (await within(reader.read_next(timeout_millis=10_000))).message_id() == ids[5]


async def test_deliver_after_holds_the_partition_until_due(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """Kafka has no delayed delivery: msgclient carries the time in a header and its
    consumer holds the partition at that record until it is due."""
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        sent_at = time.monotonic()
        confirmed: asyncio.Future[msgclient.MessageId] = asyncio.Future()

        def callback(error: BaseException | None, message_id: msgclient.MessageId | None) -> None:
            confirmed.set_result(message_id)  # type: ignore[arg-type]

        # With a callback (no future): the message is copied to carry the header.
        await producer.send_async(b"later", callback, deliver_after=700)
        later_id = await within(confirmed)
        await producer.send(b"behind it")
        first = await within(consumer.receive(timeout_millis=10_000))
        waited = time.monotonic() - sent_at
        second = await within(consumer.receive(timeout_millis=10_000))
    assert (first.data(), second.data()) == (b"later", b"behind it")
    assert first.message_id() == later_id
    assert waited >= 0.65


async def test_reconsume_later_goes_through_the_retry_topic(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"again"}])
    policy = msgclient.DeadLetterPolicy(
        max_redeliver_count=2, retry_letter_topic=topic + "-retry", dead_letter_topic=topic + "-dlq"
    )
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "g-" + topic, dead_letter_policy=policy, retry_enable=True, **GROUP
        )
        times: list[str] = []
        started = time.monotonic()
        for _ in range(3):
            message = await within(consumer.receive(timeout_millis=15_000))
            assert message.data() == b"again"
            times.append(message.properties().get("RECONSUMETIMES", "0"))
            await consumer.reconsume_later(message, 300)
        assert times == ["0", "1", "2"]
        assert time.monotonic() - started >= 0.55  # two retries, 300 ms each
        # the third reconsume is over max_redeliver_count: to the dead-letter topic
        (dead,) = await read(kafka_broker.bootstrap_servers, topic + "-dlq", 1)
        assert dead.value == b"again"


async def test_ack_timeout_redelivers_with_the_count_incremented(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"slow"}, {"value": b"ok"}])
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "g-" + topic, unacked_messages_timeout_ms=1000, tick_duration_ms=100, **GROUP
        )
        first = await within(consumer.receive(timeout_millis=10_000))
        second = await within(consumer.receive(timeout_millis=10_000))
        consumer.acknowledge(second)
        assert (first.data(), first.redelivery_count()) == (b"slow", 0)
        again = await within(consumer.receive(timeout_millis=10_000))  # never acknowledged
        assert (again.data(), again.redelivery_count()) == (b"slow", 1)
        assert again.message_id() == first.message_id()


async def test_cumulative_ack_commits_up_to_the_message(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    await produce(kafka_broker.bootstrap_servers, topic, [{"value": b"%d" % i} for i in range(8)])
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        received = await within(receive_n(consumer, 8))
        await consumer.acknowledge_cumulative(received[4])
        await consumer.close()
        again = await client.subscribe(topic, "g-" + topic, **GROUP)
        assert (await within(again.receive(timeout_millis=10_000))).data() == b"5"


async def test_a_consumer_of_two_topics_acknowledges_by_message_id(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """Kafka's ids name their topic, so a consumer of several topics (whose partition
    numbers repeat) routes an ack by id alone; a TopicMessageId does the same."""
    first, second = f"{topic}-a", f"{topic}-b"
    for name in (first, second):
        await create_topic(kafka_broker.bootstrap_servers, name, 2)
        await produce(
            kafka_broker.bootstrap_servers,
            name,
            [{"value": b"%d" % i, "partition": 0} for i in range(3)],
        )
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe([first, second], "g-" + topic, **GROUP)
        received = await within(receive_n(consumer, 6))
        last = {m.topic_name(): m for m in received}  # partition 0 of each, in order
        await consumer.acknowledge_cumulative(last[f"{first}-0"].message_id())
        plain = last[f"{second}-0"].message_id()
        await consumer.acknowledge_cumulative(msgclient.TopicMessageId(second, plain))
        await consumer.close()
        offsets = await client.admin().list_consumer_group_offsets("g-" + topic)
    assert {(tp.topic, tp.partition): o for tp, o in offsets.items() if o >= 0} == {
        (first, 0): 3,
        (second, 0): 3,
    }


async def test_the_rebalance_listener_hears_assignments_and_revocations(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    heard: list[tuple[str, list[tuple[str, int]]]] = []

    class Listener:
        def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            heard.append(("assigned", sorted(partitions)))

        async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            heard.append(("revoked", sorted(partitions)))

    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(
            topic, "g-" + topic, rebalance_listener=Listener(), **GROUP
        )
        await consumer.close()
    both = [(topic, 0), (topic, 1)]
    assert heard == [("assigned", both), ("revoked", both)]


async def test_fetch_requests_stay_within_the_byte_limits(
    kafka_broker: KafkaBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 2)
    await produce(
        kafka_broker.bootstrap_servers, topic, [{"value": b"x" * 1000} for _ in range(400)]
    )
    fetches: list[Any] = []
    request = KafkaConnection.request

    def tapped(self: KafkaConnection, body: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(body, FetchRequest):
            fetches.append(body)
        return request(self, body, *args, **kwargs)

    monkeypatch.setattr(KafkaConnection, "request", tapped)
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(
            topic,
            "g-" + topic,
            fetch_max_bytes=64 * 1024,
            max_partition_fetch_bytes=32 * 1024,
            receiver_queue_size=50,
            **GROUP,
        )
        await within(receive_n(consumer, 400))
    assert fetches
    for fetch in fetches:
        assert fetch.max_bytes == 64 * 1024
        for topic_data in fetch.topics:
            for partition in topic_data.partitions:
                assert partition.partition_max_bytes <= 32 * 1024


async def test_reader_from_latest_and_seek_to_the_ends(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    ids = await single_record_batches(kafka_broker.service_url, topic, 3)
    async with msgclient.Client(kafka_broker.service_url) as client:
        reader = await client.create_reader(topic, msgclient.InitialPosition.Latest)
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await reader.read_next(timeout_millis=500)
        more = await single_record_batches(kafka_broker.service_url, topic, 1)
        assert (await within(reader.read_next(timeout_millis=10_000))).message_id() == more[0]
        await reader.seek(0)  # the first message at or after time 0: the beginning
        assert (await within(reader.read_next(timeout_millis=10_000))).message_id() == ids[0]
        await reader.seek(2**62)  # no message that late: the end
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await reader.read_next(timeout_millis=500)


async def test_receive_many_gives_columns_and_acknowledges_the_whole_batch(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    records = [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(50)]
    await produce(kafka_broker.bootstrap_servers, topic, records)
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        batches = []
        while sum(map(len, batches)) < len(records):
            batches.append(await within(consumer.receive_many(timeout_millis=10_000)))
        assert [v for b in batches for v in b.values()] == [r["value"] for r in records]
        assert [k for b in batches for k in b.key_bytes()] == [r["key"] for r in records]
        offsets = [i.offset for b in batches for i in b.message_ids()]  # type: ignore[attr-defined]
        assert offsets == list(range(len(records)))
        for batch in batches:
            await within(consumer.acknowledge(batch))
        await consumer.close()
        again = await client.subscribe(topic, "g-" + topic, **GROUP)
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await again.receive(timeout_millis=1_500)  # everything was committed
