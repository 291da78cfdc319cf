"""Spark source throughput: rows/s through ``format("msgclient")`` versus the plain consumer.

One backlog of ``messages`` x ``size`` bytes on a topic of ``partitions`` partitions,
produced once. The plain msgclient consumer reads it in one process (receive + acknowledge
per message, as the ``consume`` workload does; the clock runs from the first receive to
the last acknowledgment). Spark (``local[2]`` by default) counts a DataFrame over the same
backlog; the clock runs around ``count()``, planning and task start included, after a
warm-up count has started Spark's Python workers. Rounds alternate (so that drift hits
both alike); best of ``rounds`` for each. Run by ``python -m msgclient.perf spark``.
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

SUBSCRIPTION = "perf-plain"
# The setting: 1M x 100 B messages on 4 partitions, read by Spark in local[2].
MESSAGES = 1_000_000
PARTITIONS = 4
MASTER = "local[2]"


@dataclass(frozen=True)
class Result:
    plain_rate: float  # messages/s
    spark_rate: float  # rows/s

    @property
    def ratio(self) -> float:
        return self.spark_rate / self.plain_rate


def run(
    url: str | None,
    messages: int,
    size: int,
    partitions: int,
    rounds: int,
    broker: str,
    master: str,
) -> Result:
    """Measure and print both rates and their ratio (``url``: an existing broker whose
    topics are created with ``partitions`` partitions; None: an embedded one)."""
    topic = f"perf-spark-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        if url is None:
            url = _start_broker(stack, broker, topic, partitions)
        print(f"broker {url}; {messages:,} x {size} B messages on {partitions} partitions")
        _produce(url, topic, messages, size)
        spark = _session(stack, master, url, topic)
        plain = spark_rate = 0.0
        for number in range(1, rounds + 1):
            rate = _plain_consume(url, topic, messages)
            print(f"  round {number}: plain msgclient consumer {rate:>10,.0f} msg/s", flush=True)
            plain = max(plain, rate)
            rate = _spark_count(spark, url, topic, messages)
            print(f"  round {number}: spark source ({master}) {rate:>10,.0f} rows/s", flush=True)
            spark_rate = max(spark_rate, rate)
    result = Result(plain, spark_rate)
    print(f"best of {rounds} rounds:")
    print(f"  plain msgclient consumer {plain:>12,.0f} msg/s")
    print(f"  spark source ({master})  {spark_rate:>12,.0f} rows/s")
    print(f"  ratio spark / plain: {result.ratio:.2f}x")
    return result


def _start_broker(stack: ExitStack, broker: str, topic: str, partitions: int) -> str:
    if broker == "kafka":
        kafka = stack.enter_context(KafkaBroker())
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            admin.close()
        return kafka.service_url
    pulsar = stack.enter_context(PulsarBroker(partitioned_topics={topic: partitions}))
    return pulsar.service_url


def _produce(url: str, topic: str, count: int, size: int) -> None:
    async def produce() -> None:
        async with msgclient.Client(url) as client:
            kafka = url.startswith("kafka")
            # tansu's latest offset is wrong for batches of several records (brokers.md):
            # one record per batch on Kafka, so that the source sees the whole backlog.
            options: dict[str, Any] = (
                {"batching_enabled": False}
                if kafka
                else {"batching_max_messages": 1000, "batching_max_publish_delay_ms": 5}
            )
            producer = await client.create_producer(topic, block_if_queue_full=True, **options)
            payload = b"x" * size
            for i in range(count):
                await producer.send_async(payload, partition_key=f"k{i}" if kafka else None)
            await producer.flush()
            await producer.close()

    started = time.perf_counter()
    event_loop.run(produce())
    print(f"  produced the backlog in {time.perf_counter() - started:.1f} s", flush=True)


def _plain_options(url: str) -> dict[str, Any]:
    """A new subscription from the earliest message (Shared on Pulsar: pulsar-lite's
    Exclusive dispatch has quirks; Kafka: a consumer group of one)."""
    if url.startswith("kafka"):
        return {
            "consumer_type": msgclient.ConsumerType.Exclusive,
            "initial_position": msgclient.InitialPosition.Earliest,
            "session_timeout_ms": 6000,  # tansu: a join blocks for half of it (brokers.md)
        }
    return {
        "consumer_type": msgclient.ConsumerType.Shared,
        "initial_position": msgclient.InitialPosition.Earliest,
    }


def _plain_consume(url: str, topic: str, count: int) -> float:
    async def consume() -> float:
        async with msgclient.Client(url) as client:
            name = f"{SUBSCRIPTION}-{uuid.uuid4().hex[:6]}"
            consumer = await client.subscribe(topic, name, **_plain_options(url))
            receive, acknowledge = consumer.receive, consumer.acknowledge
            started = time.perf_counter()
            for _ in range(count):
                acknowledge(await receive(30_000))
            elapsed = time.perf_counter() - started
            if url.startswith("kafka"):
                await consumer.close()  # a consumer group: nothing to delete
            else:
                await consumer.unsubscribe()  # no backlog left behind on the broker
            return count / elapsed

    return event_loop.run(consume())


def _session(stack: ExitStack, master: str, url: str, topic: str) -> Any:
    """A session whose JVM, executors and Python workers have started (one count)."""
    from msgclient.spark import local_session

    spark = local_session(master, "msgclient-perf")
    stack.callback(spark.stop)
    spark.read.format("msgclient").option("url", url).option("subscribe", topic).load().count()
    return spark


def _spark_count(spark: Any, url: str, topic: str, count: int) -> float:
    frame = spark.read.format("msgclient").option("url", url).option("subscribe", topic)
    started = time.perf_counter()
    counted = frame.load().count()
    elapsed = time.perf_counter() - started
    if counted != count:
        raise RuntimeError(f"the source counted {counted} rows, not {count}")
    return float(counted / elapsed)
