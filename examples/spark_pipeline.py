"""A Spark streaming pipeline on msgclient: clicks per user and per second, counted live.

Starts an embedded broker (pulsar-lite, or tansu with --broker kafka) unless --url names
one, and a Spark job (local[2]; Java is found, or brought by the spark extra) that streams
the topic through ``spark.readStream.format("msgclient")`` into an aggregate: per user and
per one-second window of publish time, the number of clicks and their bytes. msgclient
produces a sample stream meanwhile; at the end the aggregate is printed and checked
against what was produced. Ctrl-C stops everything cleanly.

    python examples/spark_pipeline.py [--broker pulsar|kafka] [--url URL] [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from typing import Any

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker

USERS = [f"user-{n}" for n in range(5)]
PAGES = ["/", "/cart", "/checkout", "/search?q=spark", "/product/42"]


def start_broker(stack: ExitStack, kind: str, topic: str, partitions: int) -> str:
    if kind == "kafka":
        broker = stack.enter_context(KafkaBroker())
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            admin.close()
    else:
        broker = stack.enter_context(PulsarBroker(partitioned_topics={topic: partitions}))
    print(f"[broker] {broker.name} at {broker.service_url}", flush=True)
    return broker.service_url


def produce(
    url: str, topic: str, count: int, rate: int, embedded: bool, stop: threading.Event
) -> None:
    """``count`` clicks at about ``rate`` per second, keyed by user (until ``stop``)."""

    async def send() -> None:
        # The embedded tansu reports the end of a partition correctly only for one-record
        # batches (a known quirk of that broker): no batching there.
        options: dict[str, Any] = {"block_if_queue_full": True}
        if embedded and url.startswith("kafka"):
            options["batching_enabled"] = False
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **options)
            started = time.monotonic()
            for i in range(count):
                if stop.is_set():
                    break
                user = random.choice(USERS)
                click = {"user": user, "page": random.choice(PAGES), "n": i}
                await producer.send_async(json.dumps(click).encode(), partition_key=user)
                if i % 1000 == 999:
                    await producer.flush()
                    print(f"[producer] {i + 1:,} clicks sent", flush=True)
                    ahead = (i + 1) / rate - (time.monotonic() - started)
                    if ahead > 0:
                        await asyncio.sleep(ahead)
            await producer.flush()
            await producer.close()

    asyncio.run(send())


def aggregate(spark: Any, url: str, topic: str, checkpoint: str) -> Any:
    """The streaming query: per user and second, clicks and bytes, into a memory table."""
    from pyspark.sql import functions as F

    clicks = (
        spark.readStream.format("msgclient")
        .option("url", url)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20000")
        .load()
    )
    per_user = clicks.groupBy(
        F.window("timestamp", "1 second").alias("window"),
        F.col("key").cast("string").alias("user"),
    ).agg(F.count("*").alias("clicks"), F.sum(F.length("value")).alias("bytes"))
    return (
        per_user.writeStream.outputMode("complete")
        .format("memory")
        .queryName("clicks_per_user")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def follow(spark: Any, query: Any, expected: int, timeout: float, stop: threading.Event) -> int:
    """Print each micro-batch's progress until every click is counted (or timeout)."""
    deadline = time.monotonic() + timeout
    seen_batch, counted = -1, 0
    while time.monotonic() < deadline:
        if stop.is_set():
            raise KeyboardInterrupt
        progress = query.lastProgress
        if progress and progress["batchId"] != seen_batch:
            seen_batch = progress["batchId"]
            counted = spark.sql("select coalesce(sum(clicks), 0) from clicks_per_user").first()[0]
            rate = progress.get("processedRowsPerSecond") or 0
            print(
                f"[spark] batch {seen_batch}: {progress['numInputRows']:,} rows "
                f"({rate:,.0f} rows/s); {counted:,} clicks counted",
                flush=True,
            )
        if counted >= expected:
            break
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        time.sleep(0.5)
    return counted


def run(args: argparse.Namespace, stack: ExitStack) -> int:
    topic = args.topic or f"clicks-{uuid.uuid4().hex[:6]}"
    embedded = args.url is None
    url = args.url or start_broker(stack, args.broker, topic, args.partitions)
    import tempfile

    from msgclient.spark import local_session

    print(f"[spark] starting a {args.master} session (first start takes a few seconds)")
    spark = local_session(args.master, "msgclient-spark-pipeline")
    stack.callback(spark.stop)
    # Ctrl-C: PySpark's own handler raises inside whatever JVM call is running; instead,
    # note it and stop between calls (the ExitStack stops query, Spark and broker).
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    checkpoint = stack.enter_context(tempfile.TemporaryDirectory(prefix="msgclient-ckpt-"))
    query = aggregate(spark, url, topic, checkpoint)
    stack.callback(query.stop)
    # A query stopped mid-batch makes Spark log errors about the aborted batch: quiet.
    stack.callback(spark.sparkContext.setLogLevel, "OFF")
    # The first micro-batch starts Spark's Python workers: produce once it is done, so
    # that the batches follow the stream as it comes.
    deadline = time.monotonic() + args.timeout
    while query.lastProgress is None and time.monotonic() < deadline:
        if stop.is_set():
            raise KeyboardInterrupt
        time.sleep(0.2)
    print("[spark] the query runs; producing the clicks", flush=True)
    producer = threading.Thread(
        target=produce, args=(url, topic, args.messages, args.rate, embedded, stop), daemon=True
    )
    stack.callback(producer.join, 10)
    stack.callback(stop.set)
    producer.start()
    counted = follow(spark, query, args.messages, args.timeout, stop)
    producer.join(timeout=5)
    print("\nclicks and bytes per user and second (first 15 rows):")
    spark.sql(
        "select date_format(window.start, 'HH:mm:ss') as second, user, clicks, bytes "
        "from clicks_per_user order by window.start, user"
    ).show(15, truncate=False)
    if counted != args.messages:
        print(f"FAILED: {counted:,} of {args.messages:,} clicks counted")
        return 1
    print(f"all {counted:,} clicks counted exactly once: OK")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--broker",
        choices=("pulsar", "kafka"),
        default="pulsar",
        help="the embedded broker to start (default: pulsar)",
    )
    parser.add_argument("--url", help="use this broker instead (pulsar://... or kafka://...)")
    parser.add_argument("--topic", help="topic name (default: a new one)")
    parser.add_argument("--partitions", type=int, default=3, help="embedded topic partitions")
    parser.add_argument("--messages", type=int, default=20_000, help="clicks to produce")
    parser.add_argument("--rate", type=int, default=5_000, help="clicks per second")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait at most")
    args = parser.parse_args()
    with ExitStack() as stack:
        try:
            return run(args, stack)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping the query, Spark and the broker", flush=True)
            return 130


if __name__ == "__main__":
    sys.exit(main())
