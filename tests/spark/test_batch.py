"""Batch reads (spark.read.format("msgclient")) from pulsar-lite and tansu.

A read of a fixed range equals what was produced there: count, keys, values, partitions,
offsets or message ids. Messages are produced one per batch: tansu's latest offset is
right only for single-record batches (brokers.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import create_topic_blocking
from tests.spark.helpers import Sent, keys_values, produce, pulsar_json, read_batch, row_id


def by_partition(sent: list[Sent]) -> dict[int, list[Sent]]:
    parts: dict[int, list[Sent]] = {}
    for item in sent:
        parts.setdefault(item.partition, []).append(item)
    return parts


def expected_rows(sent: list[Sent]) -> set[tuple[Any, ...]]:
    return {(s.key, s.value, s.partition, s.message_id) for s in sent}


def actual_rows(rows: list[Any]) -> set[tuple[Any, ...]]:
    return {(bytes(r.key), bytes(r.value), r.partition, row_id(r)) for r in rows}


def test_a_fixed_range_of_kafka_partitions(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 3)
    sent = produce(kafka_broker.service_url, topic, 60)
    parts = by_partition(sent)
    assert sorted(parts) == [0, 1, 2] and all(len(p) >= 5 for p in parts.values())
    options = {
        "kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
        "subscribe": topic,
        "startingOffsets": json.dumps({topic: {str(p): 1 for p in parts}}),
        "endingOffsets": json.dumps({topic: {str(p): 4 for p in parts}}),
        "includeHeaders": "true",
    }
    rows = read_batch(spark, options)
    expected = [s for s in sent if 1 <= s.message_id.offset < 4]  # type: ignore[attr-defined]
    assert len(rows) == len(expected) == 9
    assert actual_rows(rows) == expected_rows(expected)
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}
    assert_headers(rows)


def test_a_fixed_range_of_pulsar_partitions(
    spark: Any, make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={topic: 3})
    sent = produce(broker.service_url, topic, 60)
    parts = by_partition(sent)
    assert sorted(parts) == [0, 1, 2] and all(len(p) >= 5 for p in parts.values())
    # Pulsar positions are the last message already read: (1st, 4th] is the 2nd to 4th.
    options = {
        "service.url": broker.service_url,
        "topic": topic,
        "startingOffsets": json.dumps(
            {topic: {str(p): pulsar_json(m[0].message_id) for p, m in parts.items()}}
        ),
        "endingOffsets": json.dumps(
            {topic: {str(p): pulsar_json(m[3].message_id) for p, m in parts.items()}}
        ),
        "includeHeaders": "true",
    }
    rows = read_batch(spark, options)
    expected = [s for p in parts.values() for s in p[1:4]]
    assert len(rows) == len(expected) == 9
    assert actual_rows(rows) == expected_rows(expected)
    assert {r.offset for r in rows} == {None}
    assert_headers(rows)  # the message properties


def assert_headers(rows: list[Any]) -> None:
    """Each message was sent with the property (header) n = its number."""
    for row in rows:
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("n", bytes(row.value)[1:])]


@pytest.mark.parametrize("kind", ["pulsar", "kafka"])
def test_one_input_partition_per_topic_partition(
    spark: Any,
    kind: str,
    kafka_broker: KafkaBroker,
    make_pulsar_broker: Callable[..., PulsarBroker],
    topic: str,
) -> None:
    if kind == "kafka":
        create_topic_blocking(kafka_broker.bootstrap_servers, topic, 4)
        url = kafka_broker.service_url
    else:
        url = make_pulsar_broker(partitioned_topics={topic: 4}).service_url
    sent = produce(url, topic, 80)
    assert len(by_partition(sent)) == 4
    frame = spark.read.format("msgclient").option("url", url).option("subscribe", topic).load()
    assert frame.rdd.getNumPartitions() == 4
    rows = frame.collect()
    assert actual_rows(rows) == expected_rows(sent) and len(rows) == 80
    # A large range is sliced: more input partitions, the same rows.
    sliced = spark.read.format("msgclient").option("url", url).option("subscribe", topic)
    sliced = sliced.option("maxRecordsPerPartition", "7").load()
    if kind == "kafka":  # Pulsar slices count entries; unbatched here, so the same.
        assert sliced.rdd.getNumPartitions() > 4
    assert sorted(map(row_id, sliced.collect())) == sorted(s.message_id for s in sent)


def test_kafka_start_by_timestamp(spark: Any, kafka_broker: KafkaBroker, topic: str) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 1)
    produce(kafka_broker.service_url, topic, 5)
    time.sleep(0.3)
    middle = int(time.time() * 1000)
    time.sleep(0.3)
    later = produce(kafka_broker.service_url, topic, 5, first=5)
    options = {"url": kafka_broker.service_url, "subscribe": topic}
    rows = read_batch(spark, {**options, "startingTimestamp": str(middle)})
    assert keys_values(rows) == {(s.key, s.value) for s in later}
    by_partition_json = json.dumps({topic: {"0": middle}})
    rows = read_batch(spark, {**options, "startingOffsetsByTimestamp": by_partition_json})
    assert len(rows) == 5
    # No message at or after the time: the broker's answer is "the end", and the planner
    # learns it when no message comes within pollTimeoutMs.
    future = {"startingTimestamp": str(middle + 3_600_000), "pollTimeoutMs": "1000"}
    with pytest.raises(Exception, match=r"startingTimestamp.*no message at or after"):
        read_batch(spark, {**options, **future})
    strategy = {"startingOffsetsByTimestampStrategy": "latest"}
    assert read_batch(spark, {**options, **future, **strategy}) == []


def test_bad_options_fail_through_spark_naming_them(
    spark: Any, kafka_broker: KafkaBroker, topic: str
) -> None:
    """Through Spark, as users meet them (each option's checks: test_options.py and
    test_planning.py)."""
    kafka = kafka_broker.service_url
    with pytest.raises(Exception, match=r"'url'.*missing"):
        spark.read.format("msgclient").option("subscribe", topic).load()
    with pytest.raises(Exception, match=r"'startingOffsets'.*not valid JSON"):
        read_batch(spark, {"url": kafka, "subscribe": topic, "startingOffsets": "{bad"})
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 2)
    with pytest.raises(Exception, match=r"'assign'.*has 2 partition\(s\): no \[5\]"):
        read_batch(spark, {"url": kafka, "assign": json.dumps({topic: [0, 5]})})
