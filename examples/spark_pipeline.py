"""A Spark streaming pipeline on msgclient: clicks per user and per second, counted live and
written back to a topic.

Starts an embedded broker (pulsar-lite, or tansu with --broker kafka) unless --url names
one, and a Spark job (local[2]; Java is found, or brought by the spark extra) that streams
the clicks topic through ``spark.readStream.format("msgclient")`` into an aggregate (per
user and per one-second window of event time: the number of clicks and their bytes) and
writes each window's rows, once the window is over (a watermark), to an output topic
through ``writeStream.format("msgclient")`` (exactly once on Kafka), keyed by window and
user. msgclient produces
a sample stream meanwhile, then a last "tick" a few seconds later that moves the
watermark past the last clicks' windows; at the end msgclient reads the output topic back,
and the totals there are checked against what was produced. Ctrl-C stops everything
cleanly.

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
TICK = "tick"  # the key of the message that closes the last windows (not a click)
WATERMARK_DELAY = "1 second"  # how late a click may come and still be counted
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
            if not stop.is_set():
                # Event time moves on only with new messages: a tick past the watermark
                # delay closes the windows of the last clicks.
                await asyncio.sleep(3)
                await producer.send(b"{}", partition_key=TICK)
            await producer.close()

    asyncio.run(send())


def aggregate(spark: Any, url: str, topic: str, output: str, checkpoint: str) -> Any:
    """The streaming query: per user and second, clicks and bytes, each window's rows
    written to ``output`` once it is closed (append mode), keyed by window and user."""
    from pyspark.sql import functions as F

    clicks = (
        spark.readStream.format("msgclient")
        .option("url", url)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20000")
        .load()
        # The tick is aggregated like a click (a filter would be pushed below the
        # watermark, which would then never pass the last clicks); its own window stays
        # open, so it never reaches the output.
        .withWatermark("timestamp", WATERMARK_DELAY)
    )
    per_user = clicks.groupBy(
        F.window("timestamp", "1 second").alias("window"),
        F.col("key").cast("string").alias("user"),
    ).agg(F.count("*").alias("clicks"), F.sum(F.length("value")).alias("bytes"))
    rows = per_user.select(
        F.concat_ws(" ", F.date_format("window.start", "HH:mm:ss"), "user").alias("key"),
        F.to_json(F.struct("clicks", "bytes")).alias("value"),
    )
    return (
        rows.writeStream.outputMode("append")
        .format("msgclient")
        .option("url", url)
        .option("topic", output)
        # Kafka: each micro-batch's rows in transactions committed with it, read once.
        .option("exactlyOnce", str(url.startswith("kafka")).lower())
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def follow(query: Any, expected: int, timeout: float, stop: threading.Event) -> int:
    """Print each micro-batch's progress until every click was read (or timeout); the
    clicks the query read."""
    deadline = time.monotonic() + timeout
    seen_batch, read = -1, 0
    while time.monotonic() < deadline and read < expected:
        if stop.is_set():
            raise KeyboardInterrupt
        for progress in query.recentProgress:
            if progress["batchId"] <= seen_batch:
                continue
            seen_batch = progress["batchId"]
            read += progress["numInputRows"]
            rate = progress.get("processedRowsPerSecond") or 0
            print(
                f"[spark] batch {seen_batch}: {progress['numInputRows']:,} clicks read "
                f"({rate:,.0f} rows/s), their counts written; {read:,} in all",
                flush=True,
            )
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        time.sleep(0.5)
    return read


def read_counts(url: str, output: str, expected: int, timeout: float) -> dict[str, dict[str, int]]:
    """The output topic read back with msgclient (read_committed) until it counts
    ``expected`` clicks (or timeout): each window and user's row. On Kafka the sink wrote
    exactly once: a row read twice is an error. On Pulsar it is at-least-once: a row
    written twice is the same row again, counted once."""
    exactly_once = url.startswith("kafka")

    async def read() -> dict[str, dict[str, int]]:
        rows: dict[str, dict[str, int]] = {}
        async with msgclient.Client(url) as client:
            reader = await client.create_reader(output, msgclient.InitialPosition.Earliest)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if sum(row["clicks"] for row in rows.values()) >= expected:
                    break
                try:
                    message = await reader.read_next(timeout_millis=1000)
                except msgclient.ReceiveTimeoutError:
                    continue
                key = (message.key_bytes() or b"").decode()
                if exactly_once and key in rows:
                    raise RuntimeError(f"the row of {key!r} was written twice")
                rows[key] = json.loads(message.data())
            await reader.close()
        return rows

    return asyncio.run(read())


def stop_between_batches(query: Any, timeout: float = 5.0) -> None:
    """Stop ``query`` while no micro-batch runs, waiting ``timeout`` seconds at most: a
    micro-batch stopped midway is aborted (the sink logs what it had stored of it)."""
    deadline = time.monotonic() + timeout
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


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
    output = f"{topic}-per-user"
    query = aggregate(spark, url, topic, output, checkpoint)
    stack.callback(stop_between_batches, query)
    # A query stopped mid-batch (Ctrl-C) makes Spark log errors about the aborted batch:
    # quiet.
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
    read = follow(query, args.messages + 1, args.timeout, stop) - 1  # less the tick
    producer.join(timeout=10)
    print(f"[check] reading {output} back with msgclient", flush=True)
    counts = read_counts(url, output, args.messages, args.timeout)
    print("\nclicks and bytes per user and second, as the output topic holds them (first 15):")
    for key in sorted(counts)[:15]:
        second, user = key.split(" ")
        print(f"  {second}  {user:8} {counts[key]['clicks']:6,} clicks {counts[key]['bytes']:9,} B")
    counted = sum(row["clicks"] for row in counts.values())
    if read != args.messages or counted != args.messages:
        print(
            f"FAILED: {read:,} clicks read, {counted:,} counted in {output}, "
            f"{args.messages:,} produced"
        )
        return 1
    print(f"all {counted:,} clicks read once and counted in {output}: OK")
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
