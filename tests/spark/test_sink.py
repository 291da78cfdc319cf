"""Writes (df.write / df.writeStream .format("msgclient")) to tansu and pulsar-lite, read
back by the official clients; options and columns refused before any task runs; a
streaming write stopped and restarted from its checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import create_topic_blocking, read_blocking
from tests.pulsar.helpers import official_client, receive_blocking, subscribe
from tests.spark.helpers import TIMEOUT, produce, write_available_now

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
KAFKA_ROWS = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER)),
        StructField("partition", IntegerType()),
        StructField("ignored", StringType()),  # not a column the sink writes
    ]
)


def write(frame: Any, options: dict[str, str]) -> None:
    writer = frame.write.format("msgclient").mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_a_batch_write_to_kafka_read_back_by_kafka_python(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 3)
    rows = [
        (
            b"k%d" % (i % 5) if i % 4 else None,
            None if i == 7 else b"v%d" % i,
            [("n", b"%d" % i), ("raw", b"\xff\x00")] if i % 3 == 0 else None,
            i % 3,
            "x",
        )
        for i in range(300)
    ]
    # One Spark partition: one task, so the rows' order is the order written.
    write(
        spark.createDataFrame(rows, KAFKA_ROWS).coalesce(1),
        {"url": kafka_broker.service_url, "topic": topic},
    )
    records = read_blocking(kafka_broker.bootstrap_servers, topic, len(rows))
    for partition in range(3):
        stored = sorted((r for r in records if r.partition == partition), key=lambda r: r.offset)
        wanted = [row for row in rows if row[3] == partition]
        assert [(r.key, r.value) for r in stored] == [(k, v) for k, v, *_ in wanted]
        assert [r.headers or None for r in stored] == [h for _, _, h, *_ in wanted]


def test_rows_go_to_the_topic_of_their_topic_column(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    """String values and keys; a topic per row (no topic option); no partition column: a
    key goes where Kafka's partitioner puts it."""
    first, second = f"{topic}-a", f"{topic}-b"
    for name in (first, second):
        create_topic_blocking(kafka_broker.bootstrap_servers, name, 2)
    rows = [(f"key-{i % 4}", f"value {i}", first if i % 2 else second) for i in range(100)]
    frame = spark.createDataFrame(rows, "key string, value string, topic string")
    write(frame, {"kafka.bootstrap.servers": kafka_broker.bootstrap_servers})
    for name in (first, second):
        records = read_blocking(kafka_broker.bootstrap_servers, name, 50)
        expected = {(k.encode(), v.encode()) for k, v, t in rows if t == name}
        assert {(r.key, r.value) for r in records} == expected
        by_key: dict[bytes, set[int]] = {}
        for record in records:
            by_key.setdefault(record.key, set()).add(record.partition)
        assert all(len(partitions) == 1 for partitions in by_key.values())


def test_a_batch_write_to_pulsar_read_back_by_the_official_client(
    spark: Any, make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 2})
    rows = [
        (
            f"user-{i % 6}" if i % 5 else None,
            f"value {i}",
            [("n", b"%d" % i)] if i % 2 else None,
            i % 2,
        )
        for i in range(200)
    ]
    frame = spark.createDataFrame(
        rows, "key string, value string, headers array<struct<key:string,value:binary>>, "
        "partition int",
    )  # fmt: skip
    with official_client(broker.service_url) as official:
        consumer = subscribe(official, topic)
        write(frame.coalesce(1), {"url": broker.service_url, "topic": topic})
        received = receive_blocking(consumer, len(rows))
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=500)
    for partition in range(2):
        got = [m for m in received if m.topic_name().endswith(f"-partition-{partition}")]
        wanted = [row for row in rows if row[3] == partition]
        assert [(m.partition_key() or None, m.data().decode()) for m in got] == [
            (k, v) for k, v, *_ in wanted
        ]
        assert [m.properties() or None for m in got] == [
            {"n": h[0][1].decode()} if h else None for _, _, h, _ in wanted
        ]


def test_bad_options_and_columns_fail_before_any_task(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    url = kafka_broker.service_url
    good = spark.createDataFrame([(b"v",)], "value binary")
    cases: list[tuple[Any, dict[str, str], str]] = [
        (good, {"url": url}, "'topic': missing"),
        (good, {"url": url, "topic": topic, "topc": "x"}, "'topc': unknown option"),
        (good, {"topic": topic}, "'url': missing"),
        (good, {"url": "http://x", "topic": topic}, "'url'.*pulsar://"),
        (good, {"url": url, "topic": topic, "producer.no_such": "1"}, "'producer.no_such'"),
        (good, {"url": url, "topic": topic, "producer.acks": "lots"}, "not a number"),
        (good, {"url": url, "topic": topic, "producer.block_if_queue_full": "false"}, "waits"),
        (good, {"url": url, "topic": topic, "exactlyOnce": "maybe"}, "'exactlyOnce'.*true"),
        (
            good,
            {"url": "pulsar://127.0.0.1:1", "topic": topic, "exactlyOnce": "true"},
            "'exactlyOnce'.*Kafka only",
        ),
        (spark.createDataFrame([(1,)], "value int"), {"url": url, "topic": topic}, "'value'"),
        (spark.createDataFrame([(b"v",)], "data binary"), {"url": url, "topic": topic}, "no value"),
        (
            spark.createDataFrame([(b"v", "h")], "value binary, headers string"),
            {"url": url, "topic": topic},
            "'headers'.*array<struct",
        ),
        (
            spark.createDataFrame([(b"v", 1)], "value binary, partition long"),
            {"url": url, "topic": topic},
            "'partition'.*not int",
        ),
    ]
    for frame, options, message in cases:
        with pytest.raises(Exception, match=message):
            write(frame, options)
    with pytest.raises(Exception, match=r"'mode'.*append"):
        good.write.format("msgclient").mode("overwrite").option("url", url).option(
            "topic", topic
        ).save()


@pytest.mark.parametrize("exactly_once", ["false", "true"])
def test_a_failed_send_fails_the_write(spark: Any, topic: str, exactly_once: str) -> None:
    """No broker at the address: the task fails with the client's error, and so does the
    write (it does not hang), exactly-once or not."""
    frame = spark.createDataFrame([(b"v",)], "value binary")
    started = time.monotonic()
    with pytest.raises(Exception, match=r"(?i)connect"):
        write(
            frame,
            {
                "url": "kafka://127.0.0.1:1",
                "topic": topic,
                "client.operation_timeout_seconds": "1",
                "exactlyOnce": exactly_once,
            },
        )
    assert time.monotonic() - started < TIMEOUT


def test_a_streaming_write_restarted_from_its_checkpoint_loses_nothing(
    spark: Any, pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    """A copy from one topic to another: stopped after the first run, restarted from the
    checkpoint after more arrived; the output holds each input row once."""
    url = pulsar_broker.service_url
    source, sink = f"{topic}-in", f"{topic}-out"
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> None:
        frame = (
            spark.readStream.format("msgclient")
            .option("url", url)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "40")
            .load()
            .select("key", "value")
        )
        write_available_now(frame, {"url": url, "topic": sink}, checkpoint)

    with official_client(url) as official:
        consumer = subscribe(official, sink)
        first = produce(url, source, 100)
        run()
        more = produce(url, source, 30, first=100)
        run()
        received = receive_blocking(consumer, 130)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=500)
    assert sorted(m.data() for m in received) == sorted(s.value for s in first + more)
    assert {m.partition_key() for m in received} == {s.key.decode() for s in first + more}
