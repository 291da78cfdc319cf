"""``pulsar.schema``'s names (``from msgclient.pulsar_compat.schema import JsonSchema``):
msgclient.schema's, which encode and describe themselves as the official ones do."""

from __future__ import annotations

from msgclient.schema import (
    Array,
    AvroSchema,
    Boolean,
    Bytes,
    BytesSchema,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    JsonSchema,
    Long,
    Map,
    Null,
    ProtobufNativeSchema,
    Record,
    Schema,
    String,
    StringSchema,
)

__all__ = [
    "Array",
    "AvroSchema",
    "Boolean",
    "Bytes",
    "BytesSchema",
    "CustomEnum",
    "Double",
    "Field",
    "Float",
    "Integer",
    "JsonSchema",
    "Long",
    "Map",
    "Null",
    "ProtobufNativeSchema",
    "Record",
    "Schema",
    "String",
    "StringSchema",
]
