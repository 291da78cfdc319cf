"""The command line's pieces, in this process: ``--from``, cutting stdin into records, the
JSON line format and ``--end``'s comparisons."""

from __future__ import annotations

import datetime
import json

import pytest

from msgclient.cli.bounds import Ends
from msgclient.cli.errors import CliError, UsageError
from msgclient.cli.positions import AtTime, Offset, parse_start
from msgclient.cli.records import json_line, parse_record
from msgclient.cli.stdin import Splitter
from msgclient.message import Message
from msgclient.options import InitialPosition
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId


def test_from_positions() -> None:
    assert parse_start("earliest", kafka=True) is InitialPosition.Earliest
    assert parse_start("Latest", kafka=False) is InitialPosition.Latest
    assert parse_start("42", kafka=True) == Offset(42)
    assert parse_start("@1777636800000", kafka=False) == AtTime(1777636800000)
    assert parse_start("2026-05-01T12:00:00Z", kafka=True) == AtTime(1777636800000)
    assert parse_start("2026-05-01T14:00:00+02:00", kafka=True) == AtTime(1777636800000)
    local = datetime.datetime(2026, 5, 1, 12, 0).astimezone()  # no zone: local time
    assert parse_start("2026-05-01T12:00", kafka=False) == AtTime(int(local.timestamp() * 1000))
    pulsar_id = parse_start("( 12, 3,-1, 2)", kafka=False)
    assert pulsar_id == PulsarMessageId(12, 3, -1, 2)
    assert str(pulsar_id) == "(12,3,-1,2)"  # the form consume prints


@pytest.mark.parametrize(
    ("text", "kafka"), [("42", False), ("(1,2,-1,0)", True), ("@soon", True), ("then", False)]
)
def test_bad_from_positions(text: str, kafka: bool) -> None:
    with pytest.raises(UsageError, match="--from"):
        parse_start(text, kafka)


def test_splitting_stdin() -> None:
    splitter = Splitter(b"\r\n")
    assert splitter.feed(b"a\r") == []
    assert splitter.feed(b"\nb\r\n\r\nc") == [b"a", b"b", b""]  # a delimiter across chunks
    assert splitter.finish() == [b"c"]
    assert splitter.finish() == []  # a stream ending with a delimiter has no empty last record


def test_json_lines_carry_bytes_keys_and_headers() -> None:
    kafka = Message(
        b"\xff\x00",
        KafkaMessageId("orders", 2, 7),
        "orders-2",
        partition_key=b"\xfe",
        properties={"h": "v"},
        event_timestamp=5,
        publish_timestamp=5,
    )
    fields = json.loads(json_line(kafka))
    assert fields == {
        "topic": "orders",
        "partition": 2,
        "offset": 7,
        "key": "/g==",
        "key_encoding": "base64",
        "headers": {"h": "v"},
        "timestamp": 5,
        "value": "/wA=",
        "value_encoding": "base64",
    }
    record = parse_record(json_line(kafka), "line 1")
    assert (record.value, record.key, record.headers, record.partition) == (
        b"\xff\x00",
        b"\xfe",
        {"h": "v"},
        2,
    )
    pulsar = Message(
        b"caf\xc3\xa9",
        PulsarMessageId(3, 4, -1, 0, 2),
        "persistent://public/default/t",
        partition_key="k",
        event_timestamp=9,
        publish_timestamp=10,
        null_value=False,
    )
    fields = json.loads(json_line(pulsar))
    assert fields["message_id"] == "(3,4,-1,0)" and fields["partition"] == -1
    assert (fields["value"], fields["value_encoding"], fields["key"]) == ("café", "utf-8", "k")
    assert (fields["timestamp"], fields["event_timestamp"]) == (10, 9)
    record = parse_record(json_line(pulsar), "line 1")
    assert (record.value, record.key, record.partition, record.event_timestamp) == (
        "café".encode(),
        "k",
        None,  # a negative partition is none
        9,
    )
    tombstone = Message(b"", KafkaMessageId("t", 0, 0), "t-0", null_value=True)
    assert json.loads(json_line(tombstone))["value"] is None
    assert parse_record(json_line(tombstone), "line 1").value is None


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"[1]", "expected a JSON object"),
        (b'{"key": "k"}', 'no "value"'),
        (b'{"value": "!!", "value_encoding": "base64"}', "not valid base64"),
        (b'{"value": "v", "headers": {"a": 1}}', '"headers" must be an object of strings'),
        (b'{"value": "v", "partition": "0"}', '"partition" must be an integer'),
    ],
)
def test_bad_json_lines(line: bytes, error: str) -> None:
    with pytest.raises(CliError, match=f"^line 3: .*{error}"):
        parse_record(line, "line 3")


def _pulsar(entry: int, index: int, size: int) -> Message:
    return Message(b"", PulsarMessageId(1, entry, -1, index, size), "t")


def test_the_end_of_a_pulsar_batch_is_its_last_message() -> None:
    # pulsar-lite's last message id of a batched entry has batch index -1 (brokers.md).
    ends = Ends({"t": PulsarMessageId(1, 5, -1, -1)}, InitialPosition.Earliest, group=False)
    assert ends.admit(_pulsar(4, 2, 3))
    assert ends.admit(_pulsar(5, 0, 3)) and not ends.done
    assert ends.admit(_pulsar(5, 2, 3)) and ends.done
    assert not ends.admit(_pulsar(6, 0, 1))  # past the end


def test_ends_a_start_lies_past() -> None:
    last = {"t-0": KafkaMessageId("t", 0, 9), "t-1": KafkaMessageId("t", 1, 2), "t-2": None}
    ends = Ends(last, Offset(5), group=False)
    assert not ends.done and not ends.on_idle
    assert ends.admit(Message(b"", KafkaMessageId("t", 0, 9), "t-0"))
    assert ends.done  # t-1 ends before offset 5, t-2 is empty
    assert Ends(last, InitialPosition.Latest, group=False).done
    assert Ends(last, AtTime(0), group=False).on_idle
