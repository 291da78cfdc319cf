"""``msgclient topics ...`` and ``msgclient groups ...`` against tansu and pulsar-lite:
what they print, what they change (checked with the library's admin API), their errors
and exit codes. Independent commands run side by side (each costs an interpreter)."""

from __future__ import annotations

import asyncio

import msgclient
from msgclient.admin import ConfigResource, NewTopic
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.cli.helpers import TIMEOUT, run, run_all


def admin_call(url: str, call: str, *args: object) -> object:
    """One call of the library's admin API (what the command changed)."""

    async def go() -> object:
        async with msgclient.Client(url) as client:
            return await getattr(client.admin(), call)(*args)

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def test_topics_are_created_listed_described_and_deleted(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    url, other = kafka_broker.service_url, f"{topic}-b"
    created = run("topics", "create", url, topic, other, "--partitions", "3",
                  "--config", "retention.ms=60000")  # fmt: skip
    assert (created.code, created.lines()) == (
        0,
        [f"created {topic}".encode(), f"created {other}".encode()],
    )

    again, tolerated, listed, described = run_all(
        [
            ("topics", "create", url, topic),
            ("topics", "create", url, topic, "--if-not-exists"),
            ("topics", "list", url),
            ("topics", "describe", url, topic, "--format", "json"),
        ]
    )
    assert again.code == 1 and f"error: {topic}: TOPIC_ALREADY_EXISTS" in again.err
    assert (tolerated.code, tolerated.out) == (0, b"")
    assert {topic.encode(), other.encode()} <= set(listed.lines())
    records = described.records()
    assert [r["partition"] for r in records] == [0, 1, 2]
    assert {r["configs"]["retention.ms"] for r in records} == {"60000"}
    configs = admin_call(url, "describe_configs", [ConfigResource.topic(topic)])
    assert configs.result(ConfigResource.topic(topic))["retention.ms"].value == "60000"  # type: ignore[attr-defined]

    deleted, missing = run_all(
        [
            ("topics", "delete", url, topic, other),
            ("topics", "delete", url, f"{topic}-never", "--if-exists"),
        ]
    )
    assert deleted.code == 0 and missing.code == 0
    assert topic not in admin_call(url, "list_topics")  # type: ignore[operator]


def test_a_group_is_reset_shown_with_its_lag_and_deleted(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    url, group = kafka_broker.service_url, f"group-{topic}"
    admin_call(url, "create_topics", [NewTopic(topic, 1)])

    async def produce() -> None:
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic)
            for i in range(5):  # one record a batch: tansu's end offset is right then
                await producer.send(b"%d" % i)

    asyncio.run(asyncio.wait_for(produce(), TIMEOUT))

    dry = run("groups", "reset", url, group, "--topic", topic, "--to", "2", "--format", "json")
    assert dry.code == 0 and "dry run" in dry.err
    assert dry.records() == [{"topic": topic, "partition": 0, "current": None, "new": 2}]
    assert admin_call(url, "list_consumer_group_offsets", group) == {}

    done = run("groups", "reset", url, group, "--topic", topic, "--to", "2", "--execute")
    assert done.code == 0 and "dry run" not in done.err
    offsets, listed = run_all(
        [("groups", "offsets", url, group, "--format", "json"), ("groups", "list", url)]
    )
    assert offsets.records() == [
        {"topic": topic, "partition": 0, "committed": 2, "end": 5, "lag": 3}
    ]
    assert group in listed.out.decode()

    earliest = run("groups", "reset", url, group, "--topic", topic, "--to", "earliest",
                   "--execute", "--format", "json")  # fmt: skip
    assert earliest.records() == [{"topic": topic, "partition": 0, "current": 2, "new": 0}]

    deleted = run("groups", "delete", url, group)
    assert (deleted.code, deleted.lines()) == (0, [f"deleted {group}".encode()])
    assert admin_call(url, "list_consumer_group_offsets", group) == {}


def test_pulsar_describes_topics_and_names_what_needs_its_rest_api(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    described, groups, created = run_all(
        [
            ("topics", "describe", url, topic),
            ("groups", "list", url),
            ("topics", "create", url, topic),
        ]
    )
    header, row = described.lines()
    assert header.split() == [b"TOPIC", b"PARTITION", b"LEADER", b"REPLICAS", b"ISR", b"CONFIGS"]
    full_name = f"persistent://public/default/{topic}".encode()
    assert row.split()[:3] == [full_name, b"0", f"127.0.0.1:{pulsar_broker.port}".encode()]
    for result in (groups, created):
        assert result.code == 1 and "REST admin API" in result.err


def test_admin_errors_name_the_problem(kafka_broker: KafkaBroker) -> None:
    url, nobody = kafka_broker.service_url, "kafka://127.0.0.1:1"
    usage = run_all(
        [
            ("topics",),
            ("topics", "create", url),
            ("groups", "reset", url, "g", "--topic", "t"),
            ("groups", "reset", url, "g", "--topic", "t", "--to", "yesterday"),
            ("topics", "create", url, "t", "--partitions", "0"),
            ("groups", "offsets", "nowhere://x", "g"),
            ("topics", "list", nobody, "--timeout", "1"),
            ("groups", "describe", nobody, "g", "--timeout", "1"),
        ]
    )
    assert [r.code for r in usage] == [2, 2, 2, 2, 2, 1, 1, 1]
    assert "--to 'yesterday' is none of" in usage[3].err
    assert "expected an integer > 0, got '0'" in usage[4].err
    assert "no protocol adapter for scheme 'nowhere'" in usage[5].err
    for result in usage[6:]:
        assert "msgclient: error:" in result.err and "127.0.0.1:1" in result.err
        assert "Traceback" not in result.err
