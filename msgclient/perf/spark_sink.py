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

import os
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from msgclient.perf import event_loop
from msgclient.perf.stopwatch import MachineClock
from msgclient.spark.sink_options import WRITER_DEFAULTS

CHUNK = 10_000


@dataclass(frozen=True)
class SinkResult:
    plain_rate: float  # messages/s
    sink_rate: float  # rows/s
    exactly_once_rate: float | None  # rows/s (Kafka)
    discard_rate: float  # rows/s, Spark alone
    # CPU microseconds a row of every process (JVM, Python workers, broker) in the best
    # round of each; None where the machine's counters cannot be read
    cpu_us: dict[str, float | None]


@dataclass(frozen=True)
class _Round:
    rate: float
    cpu_us: float | None


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
    best: dict[str, _Round] = {}

    def keep(number: int, name: str, measured: _Round, unit: str) -> None:
        cpu = "" if measured.cpu_us is None else f"   {measured.cpu_us:5.2f} CPU µs a row"
        print(f"  round {number}: {name:<26}{measured.rate:>10,.0f} {unit}{cpu}", flush=True)
        if name not in best or measured.rate > best[name].rate:
            best[name] = measured

    with ExitStack() as stack:
        url = url or _start_broker(stack, broker, topics, partitions)
        if url.startswith("kafka"):
            _create_kafka_topics(url, topics, partitions)
        print(f"broker {url}; {messages:,} x {size} B rows, {partitions} partitions")
        print("(CPU: every process of the machine, the broker's and Spark's JVM included)")
        spark = _session(stack, master, url, topics.pop(), size)
        kafka = url.startswith("kafka")
        sink_name = f"spark sink ({master})"
        for number in range(1, rounds + 1):
            plain_round = _plain_produce(url, topics.pop(), messages, size)
            keep(number, "plain msgclient producer", plain_round, "msg/s")
            sink_round = _spark_write(spark, url, topics.pop(), messages, size, partitions)
            keep(number, sink_name, sink_round, "rows/s")
            if kafka:
                written = _spark_write(spark, url, topics.pop(), messages, size, partitions, True)
                keep(number, "spark sink exactlyOnce", written, "rows/s")
            discarded = _discard(spark, messages, size, partitions)
            keep(number, "spark, rows discarded", discarded, "rows/s")
    plain = best["plain msgclient producer"].rate
    print(f"best of {rounds} rounds (msg/s or rows/s; x plain; CPU µs a row, all processes):")
    notes = {"spark, rows discarded": "(Spark alone: the ceiling of a Python sink)"}
    for name, measured in best.items():
        cpu = "" if measured.cpu_us is None else f"{measured.cpu_us:6.2f} µs"
        print(
            f"  {name:<26}{measured.rate:>12,.0f}   {measured.rate / plain:.2f}x   {cpu}  "
            f"{notes.get(name, '')}"
        )
    _print_ceiling(best, sink_name)
    return SinkResult(
        plain,
        best[sink_name].rate,
        best["spark sink exactlyOnce"].rate if kafka else None,
        best["spark, rows discarded"].rate,
        {name: measured.cpu_us for name, measured in best.items()},
    )


def _print_ceiling(best: dict[str, _Round], sink_name: str) -> None:
    """What the machine's cores allow the sink: they spend its CPU a row on Spark's own
    work (the discarding sink's CPU a row) and on producing (the plain producer's)."""
    discard, plain = best["spark, rows discarded"].cpu_us, best["plain msgclient producer"].cpu_us
    sink = best[sink_name].cpu_us
    cores = os.cpu_count() or 1
    if discard is None or plain is None or sink is None:
        return
    print(
        f"  on {cores} cores: Spark alone + plain producing = {discard + plain:.2f} µs a row, "
        f"the sink spent {sink:.2f}; at that CPU a row the cores allow at most "
        f"{cores / sink * 1e6:,.0f} rows/s "
        f"({cores / sink * 1e6 / best['plain msgclient producer'].rate:.2f}x plain)"
    )


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


def _plain_produce(url: str, topic: str, count: int, size: int) -> _Round:
    async def produce() -> _Round:
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **WRITER_DEFAULTS)
            await producer.send(b"warm-up")
            payload = b"x" * size
            measured = _Measuring(count)
            for done in range(0, count, CHUNK):
                await producer.send_many([payload] * min(CHUNK, count - done))
            result = measured.stop()
            await producer.close()
            return result

    return event_loop.run(produce())


class _Measuring:
    """Wall time and every process's CPU time from now to ``stop`` for ``count`` rows."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._cpu = MachineClock()
        self._started = time.perf_counter()

    def stop(self) -> _Round:
        elapsed = time.perf_counter() - self._started
        return _Round(self._count / elapsed, self._cpu.stop(self._count))


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


def _discard(spark: Any, count: int, size: int, partitions: int) -> _Round:
    writer = _frame(spark, count, size, partitions).write.format("msgclient-perf-discard")
    measured = _Measuring(count)
    writer.mode("append").save()
    return measured.stop()


def _spark_write(
    spark: Any,
    url: str,
    topic: str,
    count: int,
    size: int,
    partitions: int,
    exactly_once: bool = False,
) -> _Round:
    writer = (
        _frame(spark, count, size, partitions)
        .write.format("msgclient")
        .option("url", url)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .mode("append")
    )
    measured = _Measuring(count)
    writer.save()
    return measured.stop()
