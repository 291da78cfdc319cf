"""Schemas through the official API: records written by the official client and read by
pulsar_compat, and the other way round, with the same program on each side.

pulsar-lite ignores schemas (brokers.md): the two sides meet on the payload bytes, and the
schema each sends is compared in test_wire_options.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import pulsar
import pytest

from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker
from msgclient.message import Message as CoreMessage
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.compat.conftest import QUIET, RECEIVE_MS
from tests.schema.test_interop import TEXTS, comparable, users
from tests.schema.twins import user_record

# kind -> (the schema in schema module m, the values in schema module m)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Sequence[Any]]]] = {
    "json": (lambda m: m.JsonSchema(user_record(m)), users),
    "avro": (lambda m: m.AvroSchema(user_record(m)), users),
    "string": (lambda m: m.StringSchema(), lambda m: TEXTS),
}
MODULES = {"official": pulsar, "compat": pulsar_compat}
DIRECTIONS = [(w, r) for w in MODULES for r in MODULES]


def produce(module: ModuleType, service_url: str, topic: str, kind: str) -> None:
    make_schema, make_values = CASES[kind]
    client = module.Client(service_url, logger=QUIET)
    try:
        producer = client.create_producer(topic, schema=make_schema(module.schema))
        for value in make_values(module.schema):
            producer.send(value, partition_key="k")
    finally:
        client.close()


def consume(module: ModuleType, service_url: str, topic: str, kind: str) -> list[Any]:
    """What ``message.value()`` gives for each message, with its schema_version()."""
    make_schema, make_values = CASES[kind]
    schema = make_schema(module.schema)
    # The official Avro consumer's value() first asks the broker for the writer's schema;
    # pulsar-lite never answers (no schema registry), so after its operation timeout (per
    # message) it decodes with its own schema, which is what decode() does at once.
    waits_for_registry = module is pulsar and kind == "avro"
    client = module.Client(service_url, logger=QUIET)
    try:
        consumer = client.subscribe(
            topic, "sub", initial_position=module.InitialPosition.Earliest, schema=schema
        )
        decoded = []
        for _ in make_values(module.schema):
            message = consumer.receive(RECEIVE_MS)
            consumer.acknowledge(message)
            value = schema.decode(message.data()) if waits_for_registry else message.value()
            decoded.append((comparable(value), message.schema_version()))
        return decoded
    finally:
        client.close()


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize(("writer", "reader"), DIRECTIONS, ids="-to-".join)
def test_records_written_by_one_are_read_by_the_other(
    pulsar_broker: PulsarBroker, topic: str, kind: str, writer: str, reader: str
) -> None:
    produce(MODULES[writer], pulsar_broker.service_url, topic, kind)
    decoded = consume(MODULES[reader], pulsar_broker.service_url, topic, kind)
    _, make_values = CASES[kind]
    written = [comparable(v) for v in make_values(MODULES[writer].schema)]
    # No schema registry, no version: '' as the official client says it (a str).
    assert decoded == [(value, "") for value in written]


def test_readers_and_table_views_decode_with_their_schema(
    pulsar_module: ModuleType, client: Any, pulsar_broker: PulsarBroker, topic: str
) -> None:
    other = pulsar_compat if pulsar_module is pulsar else pulsar
    produce(other, pulsar_broker.service_url, topic, "json")  # every value under key "k"
    schema = CASES["json"][0](pulsar_module.schema)
    written = [comparable(v) for v in users(other.schema)]
    reader = client.create_reader(topic, pulsar_module.MessageId.earliest, schema=schema)
    read = [comparable(reader.read_next(RECEIVE_MS).value()) for _ in written]
    view = client.create_table_view(topic, schema=schema)
    latest = comparable(view.get("k"))
    view.close()
    reader.close()
    assert read == written
    assert latest == written[-1]


def test_a_schema_of_the_other_module_is_refused(pulsar_module: ModuleType, client: Any) -> None:
    """As the official client: ValueError naming the argument (the schema classes of
    pulsar.schema and pulsar_compat.schema are not interchangeable)."""
    other = pulsar_compat if pulsar_module is pulsar else pulsar
    with pytest.raises(ValueError, match="schema"):
        client.create_producer("t", schema=other.schema.StringSchema())
    with pytest.raises(ValueError, match="schema"):
        client.subscribe("t", "sub", schema=other.schema.StringSchema())


def test_a_null_value_is_none_whatever_the_schema(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    """A deliberate difference: the official value() decodes a tombstone's empty payload
    with the schema (JSONDecodeError for JSON, '' for String); pulsar_compat gives None,
    what was sent."""
    schema = pulsar_module.schema.JsonSchema(user_record(pulsar_module.schema))
    consumer = client.subscribe(
        topic, "sub", initial_position=pulsar_module.InitialPosition.Earliest, schema=schema
    )
    client.create_producer(topic, schema=schema).send(None, partition_key="k")
    message = consumer.receive(RECEIVE_MS)
    assert message.has_null_value()
    if pulsar_module is pulsar:
        with pytest.raises(json.JSONDecodeError):
            message.value()
    else:
        assert message.value() is None


def test_schema_version_is_the_version_bytes_as_str() -> None:
    """pulsar-lite gives no versions (''; above): the official client's str of the
    version bytes, from a message made here; bytes that are no UTF-8 (where the official
    client raises UnicodeDecodeError) come out as surrogates."""

    def schema_version(version: bytes) -> str:
        core = CoreMessage(b"", PulsarMessageId(1, 2), "t", schema_version=version)
        return pulsar_compat.Message(core, pulsar_compat.schema.BytesSchema()).schema_version()

    assert schema_version(b"\x00" * 7 + b"\x05") == "\x00" * 7 + "\x05"
    no_utf8 = b"\x00" * 7 + b"\x80"
    assert schema_version(no_utf8).encode("utf-8", "surrogateescape") == no_utf8


@pytest.mark.parametrize("module", [pulsar, pulsar_compat], ids=["official", "compat"])
def test_schema_info_is_read_by_the_official_methods(module: ModuleType) -> None:
    """``schema_info()`` answers ``schema_type()``, ``name()`` and ``schema()`` (the
    definition as text) alike on both modules."""
    user = user_record(module.schema)
    schemas = [module.schema.StringSchema(), module.schema.JsonSchema(user)]
    infos = [schema.schema_info() for schema in schemas]
    assert [(i.schema_type().name, i.name()) for i in infos] == [
        ("STRING", "STRING"),
        ("JSON", "JSON"),
    ]
    assert infos[0].schema() == "null"
    assert json.loads(infos[1].schema())["name"] == "User"
