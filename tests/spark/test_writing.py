"""The sink's executor side without Spark or a broker: Arrow rows to send_many's columns
(keys, headers) and to their (topic, partition) groups."""

from __future__ import annotations

import pyarrow as pa
import pytest

from msgclient.errors import MsgClientError
from msgclient.spark.positions import Protocol
from msgclient.spark.sink_options import InputColumns, SinkOptions
from msgclient.spark.writing import _by_target, _keys, _properties

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def options(protocol: Protocol, topic: str | None = None) -> SinkOptions:
    scheme = "kafka" if protocol is Protocol.KAFKA else "pulsar"
    return SinkOptions(f"{scheme}://localhost", protocol, {}, {}, topic)


def test_rows_are_grouped_by_topic_and_partition_in_their_order() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": [b"0", b"1", b"2", b"3", b"4", b"5"],
            "topic": ["a", "b", "a", "a", "b", "a"],
            "partition": pa.array([0, None, 1, 0, None, 1], pa.int32()),
        }
    )
    columns = InputColumns(value_is_text=False, topic=True, partition=True)
    groups = {
        target: rows.column("value").to_pylist()
        for target, rows in _by_target(batch, options(Protocol.KAFKA), columns)
    }
    assert groups == {
        ("a", 0): [b"0", b"3"],
        ("a", 1): [b"2", b"5"],
        ("b", None): [b"1", b"4"],
    }
    one_topic = list(
        _by_target(batch, options(Protocol.KAFKA, "t"), InputColumns(value_is_text=False))
    )
    assert [(target, rows.num_rows) for target, rows in one_topic] == [(("t", None), 6)]


def test_a_row_without_a_topic_fails_naming_it() -> None:
    batch = pa.RecordBatch.from_pydict({"value": [b"0", b"1"], "topic": ["a", None]})
    with pytest.raises(MsgClientError, match=r"row 1 .* null topic"):
        list(_by_target(batch, options(Protocol.KAFKA), InputColumns(False, topic=True)))


def test_pulsar_keys_are_text_where_they_are_utf8() -> None:
    column = pa.array([b"user-1", b"\xff\x00", None], pa.binary())
    assert _keys(column, options(Protocol.PULSAR)) == ["user-1", b"\xff\x00", None]
    assert _keys(column, options(Protocol.KAFKA)) == [b"user-1", b"\xff\x00", None]
    text = pa.array(["k", None], pa.string())
    assert _keys(text, options(Protocol.PULSAR)) == ["k", None]


def test_headers_as_kafka_headers_and_pulsar_properties() -> None:
    column = pa.array(
        [[{"key": "a", "value": b"1"}, {"key": "raw", "value": b"\xff"}], None, []], HEADERS
    )
    kafka = _properties(column, options(Protocol.KAFKA))
    assert kafka[0] is not None and kafka[0]["raw"].encode("utf-8", "surrogateescape") == b"\xff"
    assert kafka[1:] == [None, None]
    with pytest.raises(MsgClientError, match="not UTF-8"):
        _properties(column, options(Protocol.PULSAR))
    text = pa.array([[{"key": "a", "value": b"1"}]], HEADERS)
    assert _properties(text, options(Protocol.PULSAR)) == [{"a": "1"}]
