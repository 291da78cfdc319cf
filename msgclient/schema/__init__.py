"""Schemas: the official ``pulsar.schema`` module's names, with the same encodings.

Define a Record, give a JsonSchema or AvroSchema of it to a producer or consumer, and the
values are encoded and decoded with the same bytes as the official pulsar-client, which
also sends the same schema description to the broker. See docs/schema.md.
"""

from msgclient.schema.avro_schema import AvroSchema
from msgclient.schema.containers import Array, CustomEnum, Map
from msgclient.schema.fields import (
    Boolean,
    Bytes,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Null,
    String,
)
from msgclient.schema.protobuf_schema import ProtobufNativeSchema
from msgclient.schema.record import Record
from msgclient.schema.schema import BytesSchema, JsonSchema, Schema, StringSchema

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
