"""exactlyOnce=true on Kafka (tansu): each task's rows in a transaction the driver commits.

Proved under failures: a task whose first attempt fails after writing part of its rows
(a UDF that raises once), and a driver killed before and after it committed a micro-batch
to Kafka, restarted from the checkpoint. What is read is read by msgclient's
read_committed consumer: on tansu, confluent-kafka's and kafka-python's read aborted
records too (tansu lists no aborted transactions in Fetch, brokers.md).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from pyspark import TaskContext
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic_blocking, read_blocking
from tests.kafka.test_transactions import read_all
from tests.spark.helpers import TIMEOUT, produce, write_available_now
from tests.spark.test_sink import write

JOB = Path(__file__).with_name("exactly_once_job.py")


def committed_and_all(url: str, topic: str, committed: int, stored: int) -> list[bytes]:
    """The values a read_committed consumer reads (exactly ``committed``), once a
    read_uncommitted one has read exactly ``stored`` (the aborted ones too)."""

    async def read() -> list[bytes]:
        await read_all(url, topic, stored, isolation_level="read_uncommitted")
        return await read_all(url, topic, committed)

    return asyncio.run(asyncio.wait_for(read(), TIMEOUT))


def test_a_batch_write_commits_every_task_at_once(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 3)
    rows = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(500)]
    frame = spark.createDataFrame(rows, "key binary, value binary").repartition(4)
    write(frame, {"url": kafka_broker.service_url, "topic": topic, "exactlyOnce": "true"})
    values = committed_and_all(kafka_broker.service_url, topic, len(rows), len(rows))
    assert sorted(values) == sorted(v for _, v in rows)


# Spark buffers what it streams to a Python worker (spark.buffer.size, 64 KiB): 4 KB
# values reach the writer a 50-row batch at a time, as the UDF makes them.
PAD = b"." * 4000


def failing_once(wrote_some: Callable[[], bool]) -> Any:
    """A UDF that pads values, and raises at v250 on the first attempt of its task once
    ``wrote_some()`` says the task has written some rows."""

    def fail_once(value: bytes) -> bytes:
        context = TaskContext.get()
        if value == b"v250" and context is not None and context.attemptNumber() == 0:
            deadline = time.monotonic() + TIMEOUT / 2
            while not wrote_some():
                assert time.monotonic() < deadline, "the task wrote nothing"
                time.sleep(0.05)
            raise RuntimeError("the UDF fails once")
        return value + PAD

    return udf(fail_once, BinaryType())


def write_failing_once(
    spark: Any,
    source: dict[str, str],
    sink: dict[str, str],
    wrote_some: Callable[[], bool],
    tmp_path: Path,
) -> None:
    """Stream ``source`` (its 400 messages in micro-batches of 300 and 100) through
    ``failing_once(wrote_some)`` into the sink with ``sink`` options, to its end; Arrow
    batches of 50 rows, so that the failing task has sent some before it fails."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        reader = spark.readStream.format("msgclient")
        for key, value in source.items():
            reader = reader.option(key, value)
        frame = (
            reader.option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "300")
            .load()
            .select("key", failing_once(wrote_some)("value").alias("value"))
        )
        write_available_now(frame, sink, str(tmp_path / "checkpoint"))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def kafka_holds_some(bootstrap: str, topic: str) -> Callable[[], bool]:
    """Whether partition 0 or 1 of ``topic`` holds a record (aborted ones too)."""

    def holds() -> bool:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            ends = consumer.end_offsets([TopicPartition(topic, p) for p in (0, 1)])
            return sum(ends.values()) > 0
        finally:
            consumer.close()

    return holds


def test_tasks_overlapping_on_partitions_are_all_read(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    """Tasks writing partitions {0, 1}, {1, 2} and {2}, committed in that order: tansu
    closes a transaction only if every transaction overlapping it has ended, so the first
    stayed open (and partitions 0 and 1 unreadable by read_committed consumers) until the
    driver learnt to end them all a second time."""
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 3)
    rows = [(b"a", 0), (b"b", 1), (b"c", 1), (b"d", 2), (b"e", 2), (b"f", 2)]
    frame = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, 3), "value binary, partition int"
    )
    write(frame, {"url": kafka_broker.service_url, "topic": topic, "exactlyOnce": "true"})
    values = committed_and_all(kafka_broker.service_url, topic, len(rows), len(rows))
    assert sorted(values) == [v for v, _ in rows]


def test_a_task_failing_once_writes_its_rows_once(
    spark: Any, kafka_broker: KafkaBroker, topic: str, tmp_path: Path
) -> None:
    url = kafka_broker.service_url
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic_blocking(kafka_broker.bootstrap_servers, source, 1)
    create_topic_blocking(kafka_broker.bootstrap_servers, sink, 2)
    sent = produce(url, source, 400)
    options = {"url": url, "topic": sink, "exactlyOnce": "true"}
    holds_some = kafka_holds_some(kafka_broker.bootstrap_servers, sink)
    write_failing_once(spark, {"url": url, "subscribe": source}, options, holds_some, tmp_path)
    # Some of v0..v249 went out in the failed attempt's transaction (aborted), then all
    # again in the retry's.
    stored = len(read_blocking(kafka_broker.bootstrap_servers, sink, None))
    assert stored > len(sent)
    values = committed_and_all(url, sink, len(sent), stored)
    assert sorted(values) == sorted(s.value + PAD for s in sent)


def test_a_failed_batch_write_leaves_nothing_visible(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    """Two tasks: the first writes its row and prepares; the second fails on each attempt
    once that row is stored. The write fails, and the driver aborts every task's
    transaction (Spark hands its abort no report of the task that finished)."""
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 1)
    bootstrap = kafka_broker.bootstrap_servers

    def fail_after_the_first_task(value: bytes) -> bytes:
        if value == b"fails":
            consumer = KafkaConsumer(bootstrap_servers=bootstrap)
            try:
                deadline = time.monotonic() + TIMEOUT / 4
                while not consumer.end_offsets([TopicPartition(topic, 0)])[
                    TopicPartition(topic, 0)
                ]:
                    assert time.monotonic() < deadline, "the first task wrote nothing"
                    time.sleep(0.05)
            finally:
                consumer.close()
            raise RuntimeError("this task always fails")
        return value

    rows = spark.sparkContext.parallelize([(b"written",), (b"fails",)], 2)
    frame = spark.createDataFrame(rows, "value binary").select(
        udf(fail_after_the_first_task, BinaryType())("value").alias("value")
    )
    url = kafka_broker.service_url
    with pytest.raises(Exception, match="this task always fails"):
        write(frame, {"url": url, "topic": topic, "exactlyOnce": "true"})
    # Aborted, not left open: a transaction left open would hold back read_committed
    # readers of the partition (tansu never times it out), so "after" would not be read.
    after = spark.createDataFrame([(b"after",)], "value binary")
    write(after, {"url": url, "topic": topic, "exactlyOnce": "true"})
    assert committed_and_all(url, topic, 1, 2) == [b"after"]


def run_job(url: str, source: str, sink: str, checkpoint: Path, kill: str) -> int:
    """The streaming job in a driver process of its own (exactly_once_job.py); its exit
    code (-9: killed as told)."""
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    job = subprocess.run(
        [sys.executable, str(JOB), url, source, sink, str(checkpoint), kill],
        env=environment,
        capture_output=True,
        timeout=2 * TIMEOUT,
        check=False,
    )
    if job.returncode not in (0, -9):
        raise AssertionError(job.stderr.decode(errors="replace")[-3000:])
    return job.returncode


def test_a_driver_killed_after_its_commit_and_restarted_writes_each_row_once(
    kafka_broker: KafkaBroker, topic: str, tmp_path: Path
) -> None:
    """Micro-batches of 100 rows, 300 in all. The driver (its JVM) is killed just after
    the sink committed micro-batch 1 to Kafka, before Spark logged it: the restarted query
    replays it, and its tasks find it written. (A replay of a micro-batch that was only
    prepared aborts and writes again, as a retried task does: the UDF test above.)"""
    url = kafka_broker.service_url
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic_blocking(kafka_broker.bootstrap_servers, source, 1)
    create_topic_blocking(kafka_broker.bootstrap_servers, sink, 2)
    sent = produce(url, source, 300)
    checkpoint = tmp_path / "checkpoint"
    assert run_job(url, source, sink, checkpoint, "after-commit:1") == -9
    assert run_job(url, source, sink, checkpoint, "none") == 0
    values = committed_and_all(url, sink, len(sent), len(sent))
    assert sorted(values) == sorted(s.value for s in sent)
