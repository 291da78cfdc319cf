"""The sink's options and the columns it writes, checked on the driver when Spark plans the
write (before any task runs); every error names the option or the column.

Input columns are those of Spark's Kafka sink: ``value`` (binary or string, required; null
is a null value), ``key`` (binary or string), ``headers``
(array<struct<key: string, value: binary>>), ``topic`` (string; the ``topic`` option wins)
and ``partition`` (int). Other columns are not written (a DataFrame read with the source
can be written back as it is).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from msgclient.errors import InvalidConfigurationError
from msgclient.options import ProducerOptions
from msgclient.spark.errors import SinkOptionError, SourceOptionError
from msgclient.spark.options import (
    CLIENT_PREFIX,
    URL_OPTIONS,
    bool_option,
    check_client_options,
    client_options_of,
    prefixed_options,
    url_of,
)
from msgclient.spark.positions import Protocol
from msgclient.validators import build

PRODUCER_PREFIX = "producer."
KNOWN = (*URL_OPTIONS, "kafka.security.protocol", "kafka.client.id", "kafka.sasl.mechanism",
         "kafka.sasl.jaas.config", "topic", "includeHeaders", "exactlyOnce")  # fmt: skip
# Spark's own options of a write, handed to the sink with the user's.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")
_CANONICAL = {name.lower(): name for name in (*KNOWN, *SPARK_OPTIONS)}
# Big batches for a bulk writer (the producer's defaults are a live producer's: 16 KiB
# on Kafka, 128 KiB on Pulsar); producer.<name> options override them.
WRITER_DEFAULTS: dict[str, Any] = {
    "batching_max_messages": 10_000,
    "batching_max_allowed_size_in_bytes": 512 * 1024,
}
# What a producer of the sink must not be given: it would break what the sink promises.
_REFUSED = {
    "block_if_queue_full": "the sink always waits for room (a bulk write is a stream)",
    "message_router": "a function cannot be given as text",
    "transactional_id": "the sink's transactions are its own",
    "producer_name": "the sink names its producers after its tasks (Pulsar deduplication)",
    "initial_sequence_id": "the sink numbers its messages by micro-batch (Pulsar deduplication)",
}


@dataclass(frozen=True)
class SinkOptions:
    """Everything the sink needs from its options: plain data, picklable."""

    url: str
    protocol: Protocol
    client_options: dict[str, Any]
    producer_options: dict[str, Any]
    topic: str | None = None
    include_headers: bool = True
    exactly_once: bool = False  # Kafka: each task's rows in a transaction the driver commits


@dataclass(frozen=True)
class InputColumns:
    """Which of the written columns the DataFrame has, and their kinds."""

    value_is_text: bool
    key: bool = False
    key_is_text: bool = False
    headers: bool = False
    topic: bool = False
    partition: bool = False


def parse_sink_options(raw: Mapping[str, str], overwrite: bool) -> SinkOptions:
    options = {str(k).lower(): str(v) for k, v in raw.items()}
    if overwrite:
        raise SinkOptionError("mode", "a topic is appended to: write with mode append")
    unknown = sorted(
        k
        for k in options
        if k not in _CANONICAL and not k.startswith((CLIENT_PREFIX, PRODUCER_PREFIX))
    )
    if unknown:
        close = difflib.get_close_matches(unknown[0], _CANONICAL, n=1, cutoff=0.8)
        hint = f"did you mean {_CANONICAL[close[0]]}? " if close else ""
        raise SinkOptionError(
            unknown[0],
            f"unknown option; {hint}valid: {', '.join(KNOWN)}, client.<Client option> and "
            "producer.<Producer option>",
        )
    try:
        url = url_of(options)
        client_options = client_options_of(options)
        check_client_options(client_options)
        producer_options = prefixed_options(options, PRODUCER_PREFIX, ProducerOptions, "Producer")
        include_headers = bool_option(options, "includeHeaders", True)
        exactly_once = bool_option(options, "exactlyOnce", False)
        protocol = Protocol.of_url(url)
    except SourceOptionError as error:  # the same parsing as the source's
        raise SinkOptionError(error.option, error.problem) from None
    if exactly_once and protocol is not Protocol.KAFKA:
        raise SinkOptionError(
            "exactlyOnce",
            "Kafka only: a Pulsar write is at-least-once (its producer names and sequence ids "
            "are the same on a replay, so a broker with deduplication drops what it stored "
            "already)",
        )
    for name, why in _REFUSED.items():
        if name in producer_options:
            raise SinkOptionError(PRODUCER_PREFIX + name, why)
    producer_options = {**WRITER_DEFAULTS, **producer_options}
    try:
        build(ProducerOptions, "producer", producer_options)
    except InvalidConfigurationError as error:
        raise SinkOptionError("producer.*", str(error)) from None
    topic = options.get("topic", "").strip() or None
    return SinkOptions(
        url, protocol, client_options, producer_options, topic, include_headers, exactly_once
    )


def input_columns(schema: StructType, options: SinkOptions) -> InputColumns:
    """The columns the sink writes, from the DataFrame's schema."""
    types = {field.name: field.dataType for field in schema.fields}
    if "value" not in types:
        raise SinkOptionError(
            "value", f"the DataFrame has no value column (binary or string); it has {list(types)}"
        )
    _expect(types, "value", (BinaryType, StringType), "binary or string")
    _expect(types, "key", (BinaryType, StringType), "binary or string")
    _expect(types, "topic", (StringType,), "string")
    _expect(types, "partition", (IntegerType,), "int")
    headers = "headers" in types and options.include_headers
    if headers and not _is_header_array(types["headers"]):
        raise SinkOptionError(
            "headers",
            f"the column is {types['headers'].simpleString()}; the sink writes "
            "array<struct<key: string, value: binary>> (or set includeHeaders=false)",
        )
    if options.topic is None and "topic" not in types:
        raise SinkOptionError("topic", "missing: set the topic option or give a topic column")
    return InputColumns(
        value_is_text=isinstance(types["value"], StringType),
        key="key" in types,
        key_is_text=isinstance(types.get("key"), StringType),
        headers=headers,
        topic=options.topic is None,
        partition="partition" in types,
    )


def _expect(
    types: dict[str, DataType], column: str, kinds: tuple[type[DataType], ...], what: str
) -> None:
    if column in types and not isinstance(types[column], kinds):
        raise SinkOptionError(column, f"the column is {types[column].simpleString()}, not {what}")


def _is_header_array(kind: DataType) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in kind.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType | StringType)
    )
