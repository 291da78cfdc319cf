"""subscribePattern / topicsPattern: the planner lists the matching topics at each
micro-batch (and for a batch read); a topic that starts to match is read in a later batch
from its first message, as Spark's Kafka source reads a new partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic_blocking
from tests.spark.helpers import produce, read_batch, run_available_now


def test_a_pattern_reads_the_topics_that_match_at_each_batch(
    spark: Any, kafka_broker: KafkaBroker, topic: str, tmp_path: Path
) -> None:
    url, bootstrap = kafka_broker.service_url, kafka_broker.bootstrap_servers
    first, later, other = f"{topic}-m-a", f"{topic}-m-b", f"{topic}-other"
    create_topic_blocking(bootstrap, first, 2)
    create_topic_blocking(bootstrap, other, 1)
    produce(url, first, 3)
    produce(url, other, 1)
    options = {"url": url, "subscribePattern": f"{topic}-m-.*", "startingOffsets": "latest"}
    checkpoint = str(tmp_path / "checkpoint")
    # The first run starts at the latest offsets of the topics that match then.
    assert run_available_now(spark, options, checkpoint).values() == []

    create_topic_blocking(bootstrap, later, 1)
    produce(url, later, 2)
    produce(url, first, 1, first=3)
    second = run_available_now(spark, options, checkpoint)
    assert sorted(second.values()) == [b"v0", b"v1", b"v3"]  # the new topic from its start

    rows = read_batch(spark, {"url": url, "subscribePattern": f"{topic}-m-.*"})
    assert sorted((r.topic, bytes(r.value)) for r in rows) == [
        (first, b"v0"),
        (first, b"v1"),
        (first, b"v2"),
        (first, b"v3"),
        (later, b"v0"),
        (later, b"v1"),
    ]
