"""The planner and the partition reader against real brokers, without Spark: range
errors, Pulsar batch entries (ends, entry counts), data lost under a planned range."""

from __future__ import annotations

import json
import logging
import time

import pytest
from kafka.admin import KafkaAdminClient

from msgclient.embedded import KafkaBroker, PulsarBroker
from msgclient.spark import planning
from msgclient.spark.errors import DataLossError, SourceOptionError
from msgclient.spark.metadata import TopicPartition, Walk
from msgclient.spark.options import SourceOptions, parse_options
from msgclient.spark.partition_reader import read_range
from msgclient.spark.planning import PartitionRange, latest_offsets, next_end, plan_batch, run
from msgclient.spark.positions import PULSAR_EARLIEST, Position, pulsar_position
from tests.kafka.helpers import create_topic_blocking
from tests.spark.helpers import produce, pulsar_json

BATCHED = {
    "batching_enabled": True,
    "batching_max_messages": 5,
    "batching_max_publish_delay_ms": 1000,
}


def read_all(options: SourceOptions, ranges: list[PartitionRange]) -> list[bytes]:
    return [
        value.as_py()
        for part in ranges
        for batch in read_range(options, part)
        for value in batch.column("value")
    ]


def test_range_errors_name_their_option(kafka_broker: KafkaBroker, topic: str) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 2)
    produce(kafka_broker.service_url, topic, 6)
    base = {"url": kafka_broker.service_url, "subscribe": topic}

    def plan(**extra: str) -> list[PartitionRange]:
        return run(plan_batch(parse_options({**base, **extra}, streaming=False)))

    with pytest.raises(SourceOptionError, match=rf"'startingOffsets'.*no position for.*{topic}/1"):
        plan(startingOffsets=json.dumps({topic: {"0": 0}}))
    with pytest.raises(SourceOptionError, match=r"'startingOffsets'.*names topic 'other'"):
        plan(startingOffsets=json.dumps({topic: {"0": 0, "1": 0}, "other": {"0": 0}}))
    with pytest.raises(SourceOptionError, match=rf"'endingOffsets'.*{topic}/0: 50 is past"):
        plan(endingOffsets=json.dumps({topic: {"0": 50, "1": -1}}))
    with pytest.raises(SourceOptionError, match=rf"'startingOffsets'.*{topic}/0.*after its end"):
        plan(startingOffsets=json.dumps({topic: {"0": 40, "1": 0}}))
    with pytest.raises(SourceOptionError, match=r"'subscribe'.*invalid Kafka topic name"):
        run(plan_batch(parse_options({**base, "subscribe": "no such topic!"}, False)))
    # The broker creates a topic a client looks up (auto-creation): it reads as empty.
    assert plan(subscribe=f"{topic}-new") == []


def test_pulsar_batches_end_at_their_last_message(pulsar_broker: PulsarBroker, topic: str) -> None:
    sent = produce(pulsar_broker.service_url, topic, 23, **BATCHED)
    ids = [s.message_id for s in sent]
    assert ids[7].batch_index == 2  # type: ignore[attr-defined]
    base = {"url": pulsar_broker.service_url, "topic": topic, "pollTimeoutMs": "20000"}
    options = parse_options(base, streaming=False)
    # pulsar-lite's last message id names the last entry without a batch index
    # (brokers.md): the read ends at that batch's last message, without waiting for the
    # poll timeout (20 s; under 10 s is a loaded machine's margin for the read itself).
    started = time.monotonic()
    assert read_all(options, run(plan_batch(options))) == [s.value for s in sent]
    assert time.monotonic() - started < 10
    inside = {
        "startingOffsets": json.dumps({topic: {"0": pulsar_json(ids[2])}}),
        "endingOffsets": json.dumps({topic: {"0": pulsar_json(ids[7])}}),
    }
    options = parse_options({**base, **inside}, streaming=False)
    assert read_all(options, run(plan_batch(options))) == [s.value for s in sent[3:8]]


def test_pulsar_read_limits_count_messages(pulsar_broker: PulsarBroker, topic: str) -> None:
    """maxOffsetsPerTrigger counts messages: a micro-batch may end inside an entry."""
    sent = produce(pulsar_broker.service_url, topic, 23, **BATCHED)
    options = parse_options({"url": pulsar_broker.service_url, "topic": topic}, True)
    tp = TopicPartition(topic, 0)
    latest = run(latest_offsets(options))
    end = run(next_end(options, {tp: PULSAR_EARLIEST}, latest, 7, None))
    assert end[tp].batch == 1  # type: ignore[union-attr]  # the 2nd message of the 2nd batch
    assert read_all(options, [PartitionRange(tp, PULSAR_EARLIEST, end[tp])]) == [
        s.value for s in sent[:7]
    ]
    middle = run(next_end(options, end, latest, 10, None))
    assert read_all(options, [PartitionRange(tp, end[tp], middle[tp])]) == [
        s.value for s in sent[7:17]
    ]
    rest = run(next_end(options, middle, latest, 100, None))  # past the end: stops there
    assert read_all(options, [PartitionRange(tp, middle[tp], rest[tp])]) == [
        s.value for s in sent[17:]
    ]
    # minOffsetsPerTrigger counts messages too: 6 left, so 7 wait.
    assert run(next_end(options, middle, latest, None, 7)) == middle
    assert run(next_end(options, middle, latest, None, 6)) == latest


def test_pulsar_a_start_at_the_last_message_is_at_the_end(
    pulsar_broker: PulsarBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A micro-batch ended at the last message of the partition's last entry, whose end
    names that whole entry: nothing is left. Counting messages after it ends at once (it
    waited the probe, 5 s, for one more), and a range from there to the end reads nothing
    at once (it waited pollTimeoutMs, then reported data loss)."""
    sent = produce(pulsar_broker.service_url, topic, 23, **BATCHED)
    base = {"url": pulsar_broker.service_url, "topic": topic, "pollTimeoutMs": "20000"}
    options = parse_options(base, True)
    tp = TopicPartition(topic, 0)
    latest = run(latest_offsets(options))
    last = {tp: pulsar_position(sent[-1].message_id)}
    assert last[tp].batch == 2 and latest[tp].batch < 0  # type: ignore[union-attr]
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="msgclient.spark"):
        assert run(next_end(options, last, latest, 7, None)) == last
    assert read_all(options, [PartitionRange(tp, last[tp], latest[tp])]) == []
    assert time.monotonic() - started < 4  # neither waited; a loaded machine's margin
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_pulsar_read_limits_go_on_when_the_probe_reads_nothing(
    pulsar_broker: PulsarBroker,
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker that answers the planner's reads with nothing within the probe (5 s; a
    loaded machine) while its last message id says the messages are there: the micro-batch
    counts entries instead, so the stream goes on. It used to stay at its start, which ends
    an AvailableNow query with the data unread."""
    sent = produce(pulsar_broker.service_url, topic, 23, **BATCHED)  # entries of 5
    options = parse_options({"url": pulsar_broker.service_url, "topic": topic}, True)
    tp = TopicPartition(topic, 0)
    latest = run(latest_offsets(options))
    inside = run(next_end(options, {tp: PULSAR_EARLIEST}, latest, 7, None))  # in entry 2

    async def nothing_found(*args: object) -> None:
        return None

    async def nothing_read(
        client: object, tp: TopicPartition, after: Position, *args: object
    ) -> Walk:
        return Walk(after, 0, True)

    monkeypatch.setattr(planning, "first_after", nothing_found)
    monkeypatch.setattr(planning, "after_messages", nothing_read)
    with caplog.at_level(logging.WARNING, logger="msgclient.spark"):
        # From inside entry 2, 2 entries: the rest of entry 2, then entry 3.
        two = run(next_end(options, inside, latest, 2, None))
        assert read_all(options, [PartitionRange(tp, inside[tp], two[tp])]) == [
            s.value for s in sent[7:15]
        ]
        # From before the first message, where entries have no number: up to the end.
        assert run(next_end(options, {tp: PULSAR_EARLIEST}, latest, 7, None)) == latest
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all(f"{tp}: no message within" in w for w in warnings)


def test_pulsar_entry_limits_count_entries(pulsar_broker: PulsarBroker, topic: str) -> None:
    sent = produce(pulsar_broker.service_url, topic, 23, **BATCHED)
    options = parse_options(
        {"url": pulsar_broker.service_url, "topic": topic, "maxEntriesPerTrigger": "2"}, True
    )
    tp = TopicPartition(topic, 0)
    latest = run(latest_offsets(options))
    end = run(next_end(options, {tp: PULSAR_EARLIEST}, latest, 2, None))
    first_two = read_all(options, [PartitionRange(tp, PULSAR_EARLIEST, end[tp])])
    assert first_two == [s.value for s in sent[:10]]  # two entries: two batches of 5
    after = run(next_end(options, end, latest, 3, None))
    assert after[tp] == latest[tp]  # 3 entries left: 5 + 5 + 3 messages
    assert read_all(options, [PartitionRange(tp, end[tp], after[tp])]) == [
        s.value for s in sent[10:]
    ]


@pytest.mark.parametrize("fail", [True, False])
def test_a_range_deleted_under_the_reader(
    kafka_broker: KafkaBroker, topic: str, fail: bool, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 1)
    produce(kafka_broker.service_url, topic, 5)
    raw = {
        "url": kafka_broker.service_url,
        "subscribe": topic,
        "pollTimeoutMs": "1000",
        "failOnDataLoss": str(fail).lower(),
    }
    options = parse_options(raw, streaming=False)
    ranges = run(plan_batch(options))
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    if fail:
        with pytest.raises(DataLossError, match=f"{topic}/0: no message within pollTimeoutMs"):
            read_all(options, ranges)
        return
    with caplog.at_level(logging.WARNING, "msgclient.spark"):
        assert read_all(options, ranges) == []
    assert "failOnDataLoss=false" in caplog.text
