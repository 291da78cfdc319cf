"""``consume``: where it starts (``--from``), where it stops (``-n``, ``--end``, a closed
pipe, Ctrl-C), and what a group acknowledges."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.cli.helpers import WAIT_SECONDS, finish, run, start, start_shell


def _read_lines(process: subprocess.Popen[bytes], count: int) -> list[bytes]:
    """``count`` lines of a running command's stdout, waiting at most WAIT_SECONDS."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    data = b""
    deadline = time.monotonic() + WAIT_SECONDS
    while data.count(b"\n") < count:
        left = deadline - time.monotonic()
        assert left > 0, f"{count} lines not within {WAIT_SECONDS} s: {data!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"stdout ended after {data!r}"
            data += chunk
    return data.splitlines()


def test_ctrl_c_acknowledges_what_a_group_printed(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    group = ("--group", "cli-group", "--subscription-type", "shared")
    consuming = start("consume", url, topic, *group)  # a new group starts at the earliest
    producing = start("produce", url, topic)  # fed below, its interpreter started meanwhile
    assert producing.stdin is not None
    producing.stdin.write(b"a\nb\nc\nd\n")
    producing.stdin.flush()
    assert _read_lines(consuming, 4) == [b"a", b"b", b"c", b"d"]
    consuming.send_signal(signal.SIGINT)
    stopped = finish(consuming)
    assert stopped.code == 130, stopped.err
    assert stopped.err == "msgclient: interrupted: 4 messages printed\n"
    produced = finish(producing, b"e\n")
    assert (produced.code, produced.err) == (0, "")
    # The group resumes after what it acknowledged, and --end stops at the last message.
    after = run("consume", url, topic, *group, "--end")
    assert (after.code, after.out, after.err) == (0, b"e\n", "")


def test_from_a_pulsar_message_id_as_printed(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    values = [b"m%d" % i for i in range(5)]
    heading = start_shell(f"msgclient consume {url} {topic} --format json | head -n 3")
    produced = run("produce", url, topic, stdin=b"\n".join(values))
    assert produced.code == 0, produced.err
    # head leaves after three lines: consume ends quietly, exit code 0 (pipefail is on).
    head = finish(heading)
    assert (head.code, head.err) == (0, "")
    assert [r["value"].encode() for r in head.records()] == values[:3]
    third = head.records()[2]["message_id"]  # e.g. (12,3,-1,2): inside a batch
    from_id = run("consume", url, topic, "--from", third, "--end")
    assert (from_id.code, from_id.err) == (0, "")
    assert from_id.lines() == values[2:]


def test_from_a_kafka_offset_and_a_time(kafka_broker: KafkaBroker, topic: str) -> None:
    url = kafka_broker.service_url
    later = start("produce", url, topic, "--partition", "0")  # fed below
    first = run("produce", url, topic, "--partition", "0", *(f"-m=a{i}" for i in range(5)))
    assert first.code == 0, first.err
    from_offset = start("consume", url, topic, "--from", "3", "-n", "2")  # in every partition
    time.sleep(0.05)  # tansu finds a time by its own write times (brokers.md)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    second = finish(later, b"b0\nb1\n")
    assert second.code == 0, second.err
    # (ISO-8601 times are read as the same milliseconds: test_units.py.)
    from_time = run("consume", url, topic, "--from", f"@{between}", "-n", "2", "--format", "json")
    offset = finish(from_offset)
    assert (offset.code, offset.err, offset.lines()) == (0, "", [b"a3", b"a4"])
    records = from_time.records()
    assert [(r["value"], r["partition"], r["offset"]) for r in records] == [
        ("b0", 0, 5),
        ("b1", 0, 6),
    ]
    assert all(r["timestamp"] >= between for r in records)
