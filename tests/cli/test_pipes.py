"""Byte-exact round trips through pipes: ``produce`` from stdin, ``consume`` to stdout, raw
and as JSON lines (``consume --format json | produce --format json``), on both brokers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.cli.helpers import finish, run, run_all, start, start_shell

# Raw records: each newline ends one; bytes that are not UTF-8, an empty record, a CR.
RAW_RECORDS = [
    b"plain text",
    b"",
    b"caf\xc3\xa9 \xe2\x82\xac",
    b"\xff\xfe\x00\x01 not UTF-8",
    b"tab\tand cr\r",
    b"x" * 3000,
    *(b"record %d" % i for i in range(200)),
]
RAW = b"".join(record + b"\n" for record in RAW_RECORDS)


def test_raw_round_trip_on_pulsar(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    produced = run("produce", url, topic, stdin=RAW)
    assert (produced.code, produced.err) == (0, "")
    consumed = run("consume", url, topic, "--end")  # every message there, then exit
    assert (consumed.code, consumed.err) == (0, "")
    assert consumed.out == RAW


def test_raw_round_trip_on_kafka(kafka_broker: KafkaBroker, topic: str) -> None:
    url = kafka_broker.service_url
    # One partition keeps the order. -n, not --end: tansu's last offset is the newest
    # batch's first (brokers.md), so --end would stop inside the last batch.
    consuming = start("consume", url, topic, "--partition", "0", "-n", str(len(RAW_RECORDS)))
    produced = run("produce", url, topic, "--partition", "0", "--delimiter", r"\n", stdin=RAW)
    assert (produced.code, produced.err) == (0, "")
    consumed = finish(consuming)
    assert (consumed.code, consumed.err) == (0, "")
    assert consumed.out == RAW


def _records() -> list[dict[str, Any]]:
    """JSON input: binary values, a newline in one, a null value (a tombstone), keys (one
    not UTF-8: on Pulsar it travels in base64, flagged) and headers."""
    records: list[dict[str, Any]] = [
        {"value": base64.b64encode(b"\x00\xff\xfe\x80").decode(), "value_encoding": "base64",
         "key": "k1", "headers": {"h1": "v1", "h2": "caf\u00e9"}},
        {"value": "two\nlines", "key": "k2"},
        {"value": None, "key": "tombstone"},
        {"value": "", "headers": {"empty": ""}},
        {"value": "\u20ac uni\u00e7ode"},
        {"value": "binary key", "key": "//4=", "key_encoding": "base64"},
    ]  # fmt: skip
    return records


def _files_and_values(url: str, topic: str, tmp_path: Path) -> tuple[tuple[str, ...], list[Any]]:
    """A produce of two files and a -m value, and the JSON records they become."""
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xc3\x28 invalid UTF-8 \x00")
    lines = tmp_path / "lines"
    lines.write_bytes(b"first\nsecond\n")
    options = ("--key", "files", "--header", "from=files", "--header", "eq=a=b")
    command = ("produce", url, topic, "--file", str(binary), "--file", str(lines), "-m", "m")
    records: list[dict[str, Any]] = [
        {"value": base64.b64encode(binary.read_bytes()).decode(), "value_encoding": "base64"},
        {"value": "first\nsecond\n"},
        {"value": "m"},
    ]
    for record in records:
        record.update(key="files", headers={"from": "files", "eq": "a=b"})
    return (*command, *options), records


def _essence(record: dict[str, Any], kafka: bool) -> tuple[Any, ...]:
    """What a copy keeps: value and key (as bytes), headers, and on Kafka the partition."""

    def raw(name: str) -> bytes | None:
        text = record.get(name)
        if text is None:
            return None
        encoding = record.get(f"{name}_encoding", "utf-8")
        return base64.b64decode(text) if encoding == "base64" else text.encode()

    partition = record.get("partition") if kafka else None
    headers = sorted((record.get("headers") or {}).items())
    return (raw("value"), raw("key"), headers, partition)


@pytest.mark.parametrize("broker", ["pulsar", "kafka"])
def test_json_round_trip_keeps_values_keys_and_headers(
    broker: str, request: pytest.FixtureRequest, topic: str, tmp_path: Path
) -> None:
    kafka = broker == "kafka"
    url = request.getfixturevalue(f"{broker}_broker").service_url
    source, copy = f"{topic}-a", f"{topic}-b"
    records = _records()
    stdin = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    # On Pulsar, files and -m values too (each one message), from a second producer.
    from_files, files_part = _files_and_values(url, source, tmp_path)
    expected = records + ([] if kafka else files_part)
    count = len(expected)
    teed = tmp_path / "source.jsonl"
    # All at once, as a pipeline runs: the producers, the copy (consume | produce) and the
    # reader of the copy.
    copying = start_shell(
        f"msgclient consume {url} {source} -n {count} --format json | tee {teed} "
        f"| msgclient produce {url} {copy} --format json"
    )
    commands = [  # run_all feeds them stdin in this order: the producers first
        ("produce", url, source, "--format", "json"),
        *([] if kafka else [from_files]),
        ("consume", url, copy, "-n", str(count), "--format", "json"),
    ]
    *produced, read = run_all(commands, stdin)
    assert [(p.code, p.err) for p in produced] == [(0, "")] * len(produced)
    copied = finish(copying)
    assert (copied.code, copied.err) == (0, "")
    assert read.code == 0, read.err

    original = [json.loads(line) for line in teed.read_bytes().splitlines()]
    assert sorted((_essence(r, False) for r in original), key=repr) == sorted(
        (_essence(r, False) for r in expected), key=repr
    )
    # The copy: the same messages, each in the same partition on Kafka.
    assert sorted((_essence(r, kafka) for r in read.records()), key=repr) == sorted(
        (_essence(r, kafka) for r in original), key=repr
    )
    first = read.records()[0]
    if kafka:
        assert first["topic"] == copy and isinstance(first["offset"], int)
    else:
        assert first["topic"].endswith(copy) and first["message_id"].startswith("(")
    assert isinstance(first["timestamp"], int) and first["timestamp"] > 0
