"""The source's rows: Spark's Kafka source schema, and the Arrow batches that carry them.

Columns: key, value (binary), topic (string), partition (int), offset (long),
timestamp, timestampType (int; 0 = CreateTime), then ``headers`` (array of key/value
structs) with ``includeHeaders=true``. On Pulsar, ``offset`` is null and the message id
comes serialized in ``messageId`` (binary, before ``headers``); message properties are the
headers, and ``timestamp`` is the publish time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from msgclient.message import Message
from msgclient.spark.positions import Protocol

TIMESTAMP = pa.timestamp("us", tz="UTC")  # what Spark's TimestampType is in Arrow
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
CREATE_TIME = 0  # Spark's timestampType for a producer-set time

_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)

Header = tuple[str, bytes]


def spark_schema(protocol: Protocol, include_headers: bool) -> str:
    """The schema as Spark's DDL."""
    ddl = _DDL
    if protocol is Protocol.PULSAR:
        ddl += ", messageId binary"
    if include_headers:
        ddl += ", headers array<struct<key: string, value: binary>>"
    return ddl


def arrow_schema(protocol: Protocol, include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("timestampType", pa.int32()),
    ]
    if protocol is Protocol.PULSAR:
        fields.append(("messageId", pa.binary()))
    if include_headers:
        fields.append(("headers", pa.list_(HEADER)))
    return pa.schema(fields)


class BatchBuilder:
    """Record batches of one partition's messages. The columns are built in bulk, one
    comprehension each, after the read loop picked the messages: cheaper per message than
    appending to several lists inside that loop."""

    def __init__(self, protocol: Protocol, topic: str, partition: int, headers: bool) -> None:
        self.protocol = protocol
        self.headers = headers
        self.schema = arrow_schema(protocol, headers)
        self._topic = pa.scalar(topic, pa.string())
        self._partition = pa.scalar(partition, pa.int32())
        self._create_time = pa.scalar(CREATE_TIME, pa.int32())

    def build(self, messages: list[Message], ids: list[int] | list[bytes]) -> pa.RecordBatch:
        """``ids``: Kafka offsets, or serialized Pulsar message ids."""
        return self.build_columns(
            [m.key_bytes() for m in messages],
            [m.data() for m in messages],
            [m.publish_timestamp() for m in messages],
            ids,
            [m.properties() for m in messages] if self.headers else [],
        )

    def build_columns(
        self,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        publish_timestamps: Sequence[int],
        ids: list[int] | list[bytes],
        properties: Sequence[Mapping[str, str] | None],
    ) -> pa.RecordBatch:
        """A batch from columns (``properties`` only read with headers on)."""
        rows = len(values)
        timestamps = pa.array(publish_timestamps, pa.int64())
        arrays = [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(self._topic, rows),
            pa.repeat(self._partition, rows),
            pa.array(ids, pa.int64())
            if self.protocol is Protocol.KAFKA
            else pa.nulls(rows, pa.int64()),
            timestamps.cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP),
            pa.repeat(self._create_time, rows),
        ]
        if self.protocol is Protocol.PULSAR:
            arrays.append(pa.array(ids, pa.binary()))
        if self.headers:
            arrays.append(pa.array([headers_of(p) for p in properties], pa.list_(HEADER)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def headers_of(properties: Mapping[str, str] | None) -> list[Header] | None:
    """Kafka headers (kept as text by msgclient, undecodable bytes as surrogates) or Pulsar
    properties, as Spark's header structs; None where there are none, as Spark's source."""
    if not properties:
        return None
    return [(name, text.encode("utf-8", "surrogateescape")) for name, text in properties.items()]
