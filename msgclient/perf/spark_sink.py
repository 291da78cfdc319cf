"""Spark sink throughput: rows/s through ``df.write.format("msgclient")`` versus a plain
msgclient producer sending the same rows.

Each round writes ``messages`` x ``size`` bytes to a fresh topic of ``partitions``
partitions twice: Spark (``local[2]`` by default) saves a DataFrame of that many rows
(``spark.range`` with a constant binary value, split in ``partitions`` Spark partitions:
what Spark generates costs little next to the writing); the clock runs around ``save()``,
planning and task start included, after a warm-up write has started Spark's Python
workers and their producers. The plain producer sends the same values with ``send_many``,
10 000 a call, at the sink's batching; the clock runs until the last is confirmed. On
Kafka each round also writes with ``exactlyOnce=true`` (the tasks' transactions committed
by the driver, inside the clock). Each round also writes the same DataFrame to a Python
data source that discards its rows: what Spark itself costs (the JVM's rows to Arrow
batches in the Python workers), the ceiling of any Python sink. Rounds alternate; best of
``rounds`` for each. Run by ``python -m msgclient.perf spark --write``.
"""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from msgclient.perf import event_loop
from msgclient.spark.sink_options import WRITER_DEFAULTS

CHUNK = 10_000


@dataclass(frozen=True)
class SinkResult:
    plain_rate: float  # messages/s
    sink_rate: float  # rows/s
    exactly_once_rate: float | None  # rows/s (Kafka)
    discard_rate: float  # rows/s, Spark alone


def run(
    url: str | None,
    messages: int,
    size: int,
    partitions: int,
    rounds: int,
    broker: str,
    master: str,
) -> SinkResult:
    """Measure and print the rates and their ratios (``url``: an existing broker; None: an
    embedded one)."""
    # A topic for each write (the warm-up's, and up to three a round), made with the broker.
    topics = [f"perf-sink-{uuid.uuid4().hex[:8]}" for _ in range(1 + 3 * rounds)]
    with ExitStack() as stack:
        url = url or _start_broker(stack, broker, topics, partitions)
        if url.startswith("kafka"):
            _create_kafka_topics(url, topics, partitions)
        print(f"broker {url}; {messages:,} x {size} B rows, {partitions} partitions")
        spark = _session(stack, master, url, topics.pop(), size)
        plain = sink = exactly_once = discard = 0.0
        kafka = url.startswith("kafka")
        for number in range(1, rounds + 1):
            rate = _plain_produce(url, topics.pop(), messages, size)
            print(f"  round {number}: plain msgclient producer {rate:>10,.0f} msg/s", flush=True)
            plain = max(plain, rate)
            rate = _spark_write(spark, url, topics.pop(), messages, size, partitions)
            print(f"  round {number}: spark sink ({master})     {rate:>10,.0f} rows/s", flush=True)
            sink = max(sink, rate)
            if kafka:
                rate = _spark_write(spark, url, topics.pop(), messages, size, partitions, True)
                print(f"  round {number}: spark sink exactlyOnce {rate:>10,.0f} rows/s", flush=True)
                exactly_once = max(exactly_once, rate)
            rate = _discard(spark, messages, size, partitions)
            print(f"  round {number}: spark, rows discarded  {rate:>10,.0f} rows/s", flush=True)
            discard = max(discard, rate)
    print(f"best of {rounds} rounds:")
    print(f"  plain msgclient producer {plain:>12,.0f} msg/s")
    print(f"  spark sink ({master})     {sink:>12,.0f} rows/s   {sink / plain:.2f}x plain")
    if kafka:
        print(
            f"  spark sink exactlyOnce  {exactly_once:>12,.0f} rows/s   "
            f"{exactly_once / plain:.2f}x plain"
        )
    print(
        f"  spark, rows discarded  {discard:>12,.0f} rows/s   {discard / plain:.2f}x plain "
        "(Spark alone: the ceiling of a Python sink)"
    )
    return SinkResult(plain, sink, exactly_once if kafka else None, discard)


def _start_broker(stack: ExitStack, broker: str, topics: list[str], partitions: int) -> str:
    if broker == "kafka":
        return stack.enter_context(KafkaBroker()).service_url
    # Partitioned topics are declared before pulsar-lite starts (brokers.md).
    declared = dict.fromkeys(topics, partitions)
    return stack.enter_context(PulsarBroker(partitioned_topics=declared)).service_url


def _create_kafka_topics(url: str, topics: list[str], partitions: int) -> None:
    # Explicitly: tansu auto-creates unknown topics with 4 partitions.
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=url.split("://", 1)[1])
    try:
        admin.create_topics([NewTopic(topic, partitions, 1) for topic in topics])
    finally:
        admin.close()


def _plain_produce(url: str, topic: str, count: int, size: int) -> float:
    async def produce() -> float:
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **WRITER_DEFAULTS)
            await producer.send(b"warm-up")
            payload = b"x" * size
            started = time.perf_counter()
            for done in range(0, count, CHUNK):
                await producer.send_many([payload] * min(CHUNK, count - done))
            elapsed = time.perf_counter() - started
            await producer.close()
            return count / elapsed

    return event_loop.run(produce())


def _frame(spark: Any, count: int, size: int, partitions: int) -> Any:
    return spark.range(0, count, 1, partitions).selectExpr(
        f"cast(repeat('x', {size}) as binary) as value"
    )


def _session(stack: ExitStack, master: str, url: str, topic: str, size: int) -> Any:
    """A session whose JVM, executors, Python workers and their producers have started."""
    from msgclient.spark import local_session

    spark = local_session(master, "msgclient-perf-sink")
    stack.callback(spark.stop)
    from msgclient.perf.discarding_sink import DiscardingSink

    spark.dataSource.register(DiscardingSink)
    _frame(spark, 1000, size, 2).write.format("msgclient").option("url", url).option(
        "topic", topic
    ).mode("append").save()
    return spark


def _discard(spark: Any, count: int, size: int, partitions: int) -> float:
    writer = _frame(spark, count, size, partitions).write.format("msgclient-perf-discard")
    started = time.perf_counter()
    writer.mode("append").save()
    return count / (time.perf_counter() - started)


def _spark_write(
    spark: Any,
    url: str,
    topic: str,
    count: int,
    size: int,
    partitions: int,
    exactly_once: bool = False,
) -> float:
    writer = (
        _frame(spark, count, size, partitions)
        .write.format("msgclient")
        .option("url", url)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .mode("append")
    )
    started = time.perf_counter()
    writer.save()
    return count / (time.perf_counter() - started)
