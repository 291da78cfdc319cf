"""The Pulsar sink's producer names and sequence ids on the wire: named after the task,
numbered from the micro-batch id << 32, the same on a replay, so that a broker with
deduplication drops it. pulsar-lite has none: the replay is stored again, and the test
checks that each replayed message carries the same (producer name, sequence id, partition)
as its first copy."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgclient
from msgclient.embedded import PulsarBroker
from tests.spark.helpers import TIMEOUT, produce
from tests.spark.test_exactly_once import run_job
from tests.spark.test_sink import write


def read_messages(url: str, topic: str, count: int) -> list[msgclient.Message]:
    """Exactly ``count`` messages of ``topic`` from the start, with msgclient."""

    async def read() -> list[msgclient.Message]:
        async with msgclient.Client(url) as client:
            consumer = await client.subscribe(
                topic, "check", initial_position=msgclient.InitialPosition.Earliest
            )
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


def test_a_replayed_micro_batch_carries_the_same_ids(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str, tmp_path: Path
) -> None:
    """Micro-batch 1 of 3 (100 rows each) is replayed after the driver is killed once the
    sink committed it: its 100 messages come twice, with the same ids."""
    source, sink = f"{topic}-in", f"{topic}-out"
    broker = make_pulsar_broker(partitioned_topics={source: 1, sink: 2})
    url = broker.service_url
    sent = produce(url, source, 300)
    checkpoint = tmp_path / "checkpoint"
    assert run_job(url, source, sink, checkpoint, "after-commit") == -9
    assert run_job(url, source, sink, checkpoint, "none") == 0
    messages = read_messages(url, sink, len(sent) + 100)
    copies: dict[tuple[str, str, int], set[bytes]] = defaultdict(set)
    counts: dict[tuple[str, str, int], int] = defaultdict(int)
    for message in messages:
        ids = (message.producer_name(), message.topic_name(), message.sequence_id())
        copies[ids].add(message.data())
        counts[ids] += 1
    assert all(len(values) == 1 for values in copies.values())  # one message per id
    assert sorted(counts.values()).count(2) == 100  # micro-batch 1, twice
    assert {ids[2] >> 32 for ids, n in counts.items() if n == 2} == {1}
    assert {ids[2] >> 32 for ids in counts} == {0, 1, 2}
    assert {v for values in copies.values() for v in values} == {s.value for s in sent}
