"""The JSON line format: what ``consume --format json`` writes, one object per message,
and what ``produce --format json`` reads, so that one feeds the other byte-exactly.

Written: ``topic``, ``partition``, ``offset`` (Kafka) or ``message_id`` (Pulsar, its text
form ``(ledger,entry,partition,batch)``), ``key`` (null if none), ``headers`` (Kafka
headers, Pulsar properties), ``timestamp`` (ms: Kafka's record time, Pulsar's publish
time), ``event_timestamp`` (Pulsar, when the producer set one), ``value`` and
``value_encoding``: "utf-8" when the bytes decode as UTF-8, else "base64"; a null value
(a tombstone) is ``"value": null``. A key that is not UTF-8 is base64 with
``"key_encoding": "base64"``.

Read: ``value`` (required; null sends a null value), ``value_encoding``, ``key``,
``key_encoding``, ``headers``, ``partition`` (Kafka; a negative one is none) and
``event_timestamp``; other fields (those of the written form) are ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from msgclient.cli.errors import CliError
from msgclient.message import Message
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId

UTF8, BASE64 = "utf-8", "base64"


@dataclass(slots=True)
class Record:
    """One message to send."""

    value: bytes | None
    key: str | bytes | None = None
    headers: dict[str, str] | None = None
    partition: int | None = None
    event_timestamp: int | None = None


# -- writing ----------------------------------------------------------------------------


def _text(data: bytes) -> tuple[str, str]:
    """``data`` as JSON text and its encoding."""
    try:
        return data.decode(UTF8), UTF8
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), BASE64


def message_fields(message: Message) -> dict[str, Any]:
    """The JSON object of a received message."""
    message_id = message.message_id()
    fields: dict[str, Any]
    if isinstance(message_id, KafkaMessageId):
        fields = {
            "topic": message_id.topic,
            "partition": message_id.partition,
            "offset": message_id.offset,
        }
    else:
        partition = message_id.partition if isinstance(message_id, PulsarMessageId) else -1
        fields = {
            "topic": message.topic_name(),
            "partition": partition,
            "message_id": str(message_id),
        }
    key = message.key_bytes()
    if key is None:
        fields["key"] = None
    else:
        fields["key"], encoding = _text(key)
        if encoding == BASE64:
            fields["key_encoding"] = BASE64
    fields["headers"] = message.properties()
    fields["timestamp"] = message.publish_timestamp()
    # A Kafka record's one timestamp is its event time too: written once, as timestamp.
    if not isinstance(message_id, KafkaMessageId) and message.event_timestamp():
        fields["event_timestamp"] = message.event_timestamp()
    value = message.value()
    if value is None:
        fields["value"] = None
    else:
        fields["value"], fields["value_encoding"] = _text(value)
    return fields


def json_line(message: Message) -> bytes:
    """One line of JSON (UTF-8, ending in a newline)."""
    fields = message_fields(message)
    try:
        return (json.dumps(fields, ensure_ascii=False) + "\n").encode(UTF8)
    except UnicodeEncodeError:  # a lone surrogate (an undecodable header): escape it
        return (json.dumps(fields) + "\n").encode("ascii")


# -- reading ----------------------------------------------------------------------------


def parse_record(line: bytes, where: str) -> Record:
    """The record of one JSON line; CliError naming ``where`` (e.g. "stdin line 3")."""
    try:
        fields = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise CliError(f"{where}: not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise CliError(f"{where}: expected a JSON object, got {type(fields).__name__}")
    if "value" not in fields:
        raise CliError(f'{where}: no "value" (null sends a null value)')
    try:
        value = _bytes(fields, "value", "value_encoding")
        key = _key(fields)
        return Record(
            value,
            key,
            _headers(fields.get("headers")),
            _partition(fields.get("partition")),
            _timestamp(fields.get("event_timestamp")),
        )
    except ValueError as error:
        raise CliError(f"{where}: {error}") from None


def _bytes(fields: dict[str, Any], name: str, encoding_name: str) -> bytes | None:
    text = fields.get(name)
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f'"{name}" must be a string or null, not {type(text).__name__}')
    encoding = fields.get(encoding_name) or UTF8
    if encoding == UTF8:
        try:
            return text.encode(UTF8)
        except UnicodeEncodeError as error:
            raise ValueError(f'"{name}" is not valid UTF-8 text: {error}') from None
    if encoding == BASE64:
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error as error:
            raise ValueError(f'"{name}" is not valid base64: {error}') from None
    raise ValueError(f'"{encoding_name}" must be "utf-8" or "base64", not {encoding!r}')


def _key(fields: dict[str, Any]) -> str | bytes | None:
    key = _bytes(fields, "key", "key_encoding")
    if key is None or fields.get("key_encoding") == BASE64:
        return key
    return key.decode(UTF8)  # a text key stays one (Pulsar sends bytes keys flagged)


def _headers(headers: object) -> dict[str, str] | None:
    if headers is None:
        return None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ValueError('"headers" must be an object of strings')
    return headers or None


def _partition(partition: object) -> int | None:
    if partition is None:
        return None
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise ValueError(f'"partition" must be an integer, not {partition!r}')
    return partition if partition >= 0 else None


def _timestamp(timestamp: object) -> int | None:
    if timestamp is None:
        return None
    if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
        raise ValueError(f'"event_timestamp" must be an integer >= 0 (ms), not {timestamp!r}')
    return timestamp
