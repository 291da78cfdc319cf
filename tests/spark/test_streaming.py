"""Streaming reads (spark.readStream.format("msgclient")): micro-batch sizes under read
limits with Trigger.AvailableNow, restarts from a checkpoint, replays, data loss.

Messages are produced one per batch: tansu's latest offset is right only for
single-record batches (brokers.md). Every query run is bounded by helpers.TIMEOUT.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import create_topic_blocking
from tests.spark.helpers import TIMEOUT, Batches, produce, run_available_now


def topic_url(
    kind: str, topic: str, partitions: int, kafka: KafkaBroker, make_pulsar: Callable[..., Any]
) -> str:
    if kind == "kafka":
        create_topic_blocking(kafka.bootstrap_servers, topic, partitions)
        return kafka.service_url
    broker: PulsarBroker = make_pulsar(partitioned_topics={topic: partitions})
    return broker.service_url


@pytest.mark.parametrize("kind", ["pulsar", "kafka"])
def test_read_limits_and_restart_from_the_checkpoint(
    spark: Any,
    kind: str,
    kafka_broker: KafkaBroker,
    make_pulsar_broker: Callable[..., PulsarBroker],
    topic: str,
    tmp_path: Path,
) -> None:
    url = topic_url(kind, topic, 3, kafka_broker, make_pulsar_broker)
    sent = produce(url, topic, 25)
    options = {
        "url": url,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "10",
    }
    checkpoint = str(tmp_path / "checkpoint")
    first = run_available_now(spark, options, checkpoint)
    # 10 per trigger, split across the 3 partitions by backlog.
    assert first.sizes() == [10, 10, 5]
    assert sorted(first.values()) == sorted(s.value for s in sent)
    # A restart from the same checkpoint reads only what came since, once.
    later = produce(url, topic, 7, first=25)
    second = run_available_now(spark, options, checkpoint)
    assert second.sizes() == [7]
    assert sorted(second.values()) == sorted(s.value for s in later)
    # As if the query had died after planning batch 3 and before committing it: Spark
    # replays batch 3 from its logged offsets, exactly, though more arrived meanwhile.
    for name in ("3", ".3.crc"):
        (tmp_path / "checkpoint" / "commits" / name).unlink()
    produce(url, topic, 2, first=32)
    replay = run_available_now(spark, options, checkpoint)
    assert sorted(replay.rows) == [3, 4]
    assert [r.value for r in replay.rows[3]] == [r.value for r in second.rows[3]]
    assert sorted(bytes(r.value) for r in replay.rows[4]) == [b"v32", b"v33"]


def test_max_offsets_per_trigger_counts_messages_on_a_batched_pulsar_topic(
    spark: Any, pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    """A producer batch is one entry of many messages: maxOffsetsPerTrigger bounds the
    rows of a micro-batch all the same (a micro-batch ends inside an entry, by batch
    index); maxEntriesPerTrigger keeps counting entries."""
    url = pulsar_broker.service_url
    sent = produce(
        url,
        topic,
        1000,
        batching_enabled=True,
        batching_max_messages=100,
        batching_max_publish_delay_ms=100,
    )
    entries: dict[tuple[int, int], int] = {}  # in order: messages of each entry
    for s in sent:
        entry = (s.message_id.ledger_id, s.message_id.entry_id)  # type: ignore[attr-defined]
        entries[entry] = entries.get(entry, 0) + 1
    assert len(entries) <= 20, entries  # batched: 50+ messages an entry
    options = {"url": url, "subscribe": topic, "startingOffsets": "earliest"}
    by_messages = run_available_now(
        spark, {**options, "maxOffsetsPerTrigger": "150"}, str(tmp_path / "messages")
    )
    assert by_messages.sizes() == [150] * 6 + [100]
    assert sorted(by_messages.values()) == sorted(s.value for s in sent)  # each row once
    by_entries = run_available_now(
        spark, {**options, "maxEntriesPerTrigger": "3"}, str(tmp_path / "entries")
    )
    sizes = list(entries.values())
    assert by_entries.sizes() == [sum(sizes[i : i + 3]) for i in range(0, len(sizes), 3)]
    assert sorted(by_entries.values()) == sorted(s.value for s in sent)


def test_latest_start_reads_what_comes_after(
    spark: Any, pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    url = pulsar_broker.service_url
    produce(url, topic, 3)
    options = {"url": url, "subscribe": topic}  # startingOffsets=latest: the default
    checkpoint = str(tmp_path / "checkpoint")
    # Spark runs a first micro-batch even when it is empty.
    assert sum(run_available_now(spark, options, checkpoint).sizes()) == 0
    produce(url, topic, 4, first=3)
    after = run_available_now(spark, options, checkpoint)
    assert sorted(after.values()) == [b"v3", b"v4", b"v5", b"v6"]


def test_min_offsets_per_trigger_waits_for_enough(
    spark: Any, pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    url = pulsar_broker.service_url
    produce(url, topic, 1)  # the topic exists (and is not empty) before the query starts
    reader = spark.readStream.format("msgclient").option("url", url).option("topic", topic)
    sink = Batches()
    query = (
        reader.option("minOffsetsPerTrigger", "6")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def wait_for(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not condition() and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.2)

    try:
        # Spark runs a first micro-batch, empty, from where the query starts (latest).
        wait_for(lambda: bool(sink.rows))
        assert sink.sizes() == [0]
        produce(url, topic, 4, first=1)
        time.sleep(2)  # several triggers: too few messages for a batch
        assert sink.sizes() == [0]
        produce(url, topic, 3, first=5)
        wait_for(lambda: len(sink.rows) > 1)
        assert sink.sizes() == [0, 7]
    finally:
        query.stop()


def test_data_loss_fails_or_reads_on(
    spark: Any, kafka_broker: KafkaBroker, topic: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    create_topic_blocking(bootstrap, topic, 1)
    produce(kafka_broker.service_url, topic, 10)
    options = {"url": kafka_broker.service_url, "subscribe": topic, "startingOffsets": "earliest"}
    checkpoint = tmp_path / "checkpoint"
    assert run_available_now(spark, options, str(checkpoint)).sizes() == [10]
    # The topic is deleted and made again: offsets 3 to 9, which the checkpoint is past,
    # no longer exist.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    create_topic_blocking(bootstrap, topic, 1)
    produce(kafka_broker.service_url, topic, 3, first=100)
    shutil.copytree(checkpoint, tmp_path / "copy")
    with pytest.raises(Exception, match=rf"{topic}/0 went back from 10 to 3.*failOnDataLoss"):
        run_available_now(spark, options, str(checkpoint))
    lenient = {**options, "failOnDataLoss": "false"}
    rest = run_available_now(spark, lenient, str(tmp_path / "copy"))
    assert rest.values() == [b"v100", b"v101", b"v102"]
