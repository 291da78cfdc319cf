"""The Pulsar sink's producer names and sequence ids on the wire: named after the task,
numbered from the micro-batch id << 32, the same when a task is retried, so that a broker
with deduplication drops the copies. pulsar-lite has none: the copies are stored, and the
test checks that each carries the same (producer name, partition, sequence id) as the
first. (A micro-batch replayed after a restart has the same query id and micro-batch, so
the same names and ids: the Kafka sink's driver-kill test shows the query id holds.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker
from msgclient.options import InitialPosition
from tests.pulsar.helpers import official_client
from tests.spark.helpers import TIMEOUT, produce
from tests.spark.test_exactly_once import PAD, write_failing_once
from tests.spark.test_sink import write

Earliest = InitialPosition.Earliest
# Shared: on Exclusive pulsar-lite dispatches duplicates (brokers.md: exactly-once assertions
# belong on Shared). An Exclusive read in one CI run got one entry (25 of the 400 messages)
# and then nothing for a second; not seen again in 16 runs, alone or under load.
CHECK = {"initial_position": Earliest, "consumer_type": msgclient.ConsumerType.Shared}


def read_messages(url: str, topic: str, count: int) -> list[msgclient.Message]:
    """Exactly ``count`` messages of ``topic`` from the start, with msgclient."""

    async def read() -> list[msgclient.Message]:
        async with msgclient.Client(url) as client:
            consumer = await client.subscribe(topic, "check", **CHECK)
            messages = [await consumer.receive(timeout_millis=10_000) for _ in range(count)]
            try:
                extra = await consumer.receive(timeout_millis=500)
            except msgclient.ReceiveTimeoutError:
                return messages
            raise AssertionError(f"more than {count} messages: {extra.data()!r}")

    return asyncio.run(asyncio.wait_for(read(), TIMEOUT))


def test_a_batch_write_numbers_each_tasks_messages_per_partition(
    spark: Any, make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    rows = [(f"k{i % 5}" if i % 3 else None, b"v%d" % i) for i in range(300)]
    frame = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, 2), "key string, value binary"
    )
    options = {"url": broker.service_url, "topic": topic, "producer.batching_max_messages": "20"}
    write(frame, options)
    messages = read_messages(broker.service_url, topic, len(rows))
    names = {m.producer_name() for m in messages}
    assert len(names) == 2 and all(n.startswith("msgclient-sink-") for n in names)
    assert {n.rsplit("-", 1)[1] for n in names} == {"0", "1"}  # the Spark partitions
    by_producer: dict[tuple[str, str], list[int]] = defaultdict(list)
    for message in messages:
        by_producer[(message.producer_name(), message.topic_name())].append(message.sequence_id())
    for sequence_ids in by_producer.values():  # each partition's messages counted from 0
        assert sequence_ids == list(range(len(sequence_ids)))
    assert sorted(m.data() for m in messages) == sorted(v for _, v in rows)


def test_a_retried_task_sends_its_rows_with_the_same_ids(
    spark: Any, make_pulsar_broker: Callable[..., PulsarBroker], topic: str, tmp_path: Path
) -> None:
    """Micro-batch 0 (300 rows) has a task that fails once after writing some rows: the
    retry sends them again, with the same ids; micro-batch 1 (100 rows) is numbered from
    1 << 32."""
    source, sink = f"{topic}-in", f"{topic}-out"
    broker = make_pulsar_broker(partitioned_topics={source: 1, sink: 2})
    url = broker.service_url
    sent = produce(url, source, 400)
    source_options, sink_options = {"url": url, "topic": source}, {"url": url, "topic": sink}
    write_failing_once(spark, source_options, sink_options, pulsar_holds_some(url, sink), tmp_path)
    messages = read_until_quiet(url, sink, {s.value + PAD for s in sent})
    copies: dict[tuple[str, str, int], set[bytes]] = defaultdict(set)
    counts: dict[tuple[str, str, int], int] = defaultdict(int)
    for message in messages:
        ids = (message.producer_name(), message.topic_name(), message.sequence_id())
        copies[ids].add(message.data())
        counts[ids] += 1
    assert all(len(values) == 1 for values in copies.values())  # one message per id
    assert {v for values in copies.values() for v in values} == {s.value + PAD for s in sent}
    twice = [ids for ids, n in counts.items() if n == 2]
    assert twice and len(messages) == len(sent) + len(twice)  # the retry's copies
    assert {ids[2] >> 32 for ids in twice} == {0}
    assert {ids[2] >> 32 for ids in counts} == {0, 1}


def pulsar_holds_some(url: str, topic: str) -> Callable[[], bool]:
    """Whether ``topic`` holds a message."""

    def holds() -> bool:
        with msgclient.blocking.Client(url) as client:
            consumer = client.subscribe(
                topic, f"probe-{time.monotonic_ns()}", initial_position=Earliest
            )
            try:
                consumer.receive(timeout_millis=100)
            except msgclient.ReceiveTimeoutError:
                return False
            return True

    return holds


def read_until_quiet(url: str, topic: str, expected: set[bytes]) -> list[msgclient.Message]:
    """Every message of ``topic`` from the start: until each of the ``expected`` values came
    (a wait of 10 s for the next fails), then until none comes for a second (the copies)."""

    async def read() -> list[msgclient.Message]:
        async with msgclient.Client(url) as client:
            consumer = await client.subscribe(topic, "check", **CHECK)
            messages: list[msgclient.Message] = []
            missing = set(expected)
            while missing:
                try:
                    message = await consumer.receive(timeout_millis=10_000)
                except msgclient.ReceiveTimeoutError:
                    raise AssertionError(stall(url, topic, messages, len(missing))) from None
                messages.append(message)
                missing.discard(message.data())
            while True:
                try:
                    messages.append(await consumer.receive(timeout_millis=1000))
                except msgclient.ReceiveTimeoutError:
                    return messages

    return asyncio.run(asyncio.wait_for(read(), TIMEOUT))


def stall(url: str, topic: str, got: list[msgclient.Message], missing: int) -> str:
    """What a read that stalled got against what the broker stores (the official client's
    read of each partition): says whether the rows were not written or not delivered."""
    ours = Counter(m.topic_name().rsplit("-", 1)[1] for m in got)
    stored = {}
    with official_client(url) as client:
        for partition in range(2):
            name = f"persistent://public/default/{topic}-partition-{partition}"
            reader = client.create_reader(name, pulsar.MessageId.earliest)
            count = 0
            with contextlib.suppress(pulsar.Timeout):
                while True:
                    reader.read_next(timeout_millis=1000)
                    count += 1
            stored[str(partition)] = count
    return f"stalled, {missing} values missing: got {dict(ours)} by partition, stored {stored}"
