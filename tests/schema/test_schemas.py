"""The schema classes against the official ones: encodings, decodings, refusals and the
description each sends to the broker (``schema_info``)."""

from __future__ import annotations

import sys
from typing import Any

import pulsar.schema as official
import pytest
from google.protobuf import struct_pb2, type_pb2

import msgclient.schema as ours
from msgclient.schema_info import SchemaInfo, SchemaType
from tests.schema.test_record import in_both
from tests.schema.twins import official_schema_info

TEXTS = ["", "plain", "ünïcödé ✓", "\x00 nul", "😀" * 100]


@pytest.mark.parametrize("text", TEXTS)
def test_string_schema(text: str) -> None:
    assert in_both(lambda m: m.StringSchema().encode(text)) == ("ok", text.encode())
    assert in_both(lambda m: m.StringSchema().decode(text.encode())) == ("ok", text)


@pytest.mark.parametrize("payload", [b"", b"\x00\xff raw", bytes(range(256))])
def test_bytes_schema(payload: bytes) -> None:
    assert in_both(lambda m: m.BytesSchema().encode(payload)) == ("ok", payload)
    assert in_both(lambda m: m.BytesSchema().decode(payload)) == ("ok", payload)


@pytest.mark.parametrize(
    ("schema", "value"),
    [("StringSchema", b"bytes"), ("StringSchema", 5), ("BytesSchema", "text")],
)
def test_wrong_types_are_refused(schema: str, value: Any) -> None:
    assert in_both(lambda m: getattr(m, schema)().encode(value)) == ("raised", TypeError)


def test_string_and_bytes_descriptions() -> None:
    # The official client sends b"null" as a String schema's definition, and no schema at
    # all for bytes (test_schema_info_wire.py shows both on the wire).
    assert ours.StringSchema().schema_info() == SchemaInfo(SchemaType.STRING, "STRING", b"null")
    assert ours.BytesSchema().schema_info() is None
    for name in ("StringSchema", "BytesSchema"):
        assert getattr(ours, name)().schema_info() == official_schema_info(
            getattr(official, name)()
        )
    assert (str(ours.StringSchema()), str(ours.BytesSchema())) == ("StringSchema", "BytesSchema")


DEFINITION = {
    "type": "record",
    "name": "Reading",
    "namespace": "sensors",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "ünïcode", "type": "int"},
    ],
}
READING = {"sensor": "s-1", "value": 20.5, "tags": {"room": "kitchen"}, "ünïcode": 3}


def test_avro_schema_of_a_definition_encodes_dicts_as_official() -> None:
    ours_schema = ours.AvroSchema(None, schema_definition=DEFINITION)
    their_schema = official.AvroSchema(None, schema_definition=DEFINITION)
    assert ours_schema.schema_info() == official_schema_info(their_schema)
    assert b"\\u00fcn\\u00efcode" in ours_schema.schema_info().definition  # ASCII, as theirs
    payload = ours_schema.encode(READING)
    assert payload == their_schema.encode(READING)
    assert ours_schema.decode(payload) == READING == their_schema.decode(payload)


def test_avro_schema_of_a_definition_refuses_what_is_not_a_dict() -> None:
    assert in_both(lambda m: m.AvroSchema(None, schema_definition=DEFINITION).encode([1])) == (
        "raised",
        ValueError,
    )


def test_avro_schema_needs_a_record_or_a_definition() -> None:
    with pytest.raises(ValueError, match="needs a record_cls or a schema_definition"):
        ours.AvroSchema(None)  # type: ignore[call-overload]


def test_invalid_avro_definitions_fail_when_the_schema_is_made() -> None:
    # The official client fails at the first encode instead.
    with pytest.raises(ValueError, match="not a valid Avro schema"):
        ours.AvroSchema(None, schema_definition={"type": "record", "name": "X", "fields": 1})


def test_record_schemas_take_record_classes_only() -> None:
    for schema in (ours.JsonSchema, ours.AvroSchema):
        with pytest.raises(TypeError, match="record_cls must be a Record subclass"):
            schema(dict)  # type: ignore[arg-type, type-var]


def test_record_schemas_refuse_other_records() -> None:
    def encode(m: Any, schema: str) -> Any:
        class A(m.Record):
            x = m.Integer()

        class B(m.Record):
            x = m.Integer()

        return getattr(m, schema)(A).encode(B(x=1))

    for schema in ("JsonSchema", "AvroSchema"):
        assert in_both(lambda m, s=schema: encode(m, s)) == ("raised", TypeError)


def test_json_payloads_that_are_not_objects_are_refused_clearly() -> None:
    class A(ours.Record):
        x = ours.Integer()

    with pytest.raises(ValueError, match="must be a JSON object, not list"):
        ours.JsonSchema(A).decode(b"[1]")


def test_avro_without_fastavro_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastavro", None)  # import fastavro now fails

    class A(ours.Record):
        x = ours.Integer()

    with pytest.raises(ImportError, match=r"pip install 'msgclient\[avro\]'"):
        ours.AvroSchema(A)
    assert ours.JsonSchema(A).encode(A(x=1)) == b'{\n "x": 1\n}'  # the rest still works


@pytest.mark.parametrize(
    "message",
    [
        struct_pb2.Struct(fields={"a": struct_pb2.Value(number_value=1.5)}),
        # type.proto depends on any.proto and source_context.proto: all three are sent
        type_pb2.Type(name="T", fields=[type_pb2.Field(name="f", number=1)]),
    ],
    ids=["Struct", "Type"],
)
def test_protobuf_native_schema_as_official(message: Any) -> None:
    cls = type(message)
    ours_schema, their_schema = ours.ProtobufNativeSchema(cls), official.ProtobufNativeSchema(cls)
    assert ours_schema.schema_info() == official_schema_info(their_schema)
    assert ours_schema.schema_info().type is SchemaType.PROTOBUF_NATIVE
    payload = ours_schema.encode(message)
    assert payload == their_schema.encode(message)
    assert ours_schema.decode(payload) == message
    assert str(ours_schema) == str(their_schema)


def test_protobuf_native_schema_refuses_other_classes() -> None:
    assert in_both(lambda m: m.ProtobufNativeSchema(dict)) == ("raised", TypeError)
    assert in_both(
        lambda m: m.ProtobufNativeSchema(struct_pb2.Struct).encode(struct_pb2.Value())
    ) == ("raised", TypeError)
