"""What a producer or consumer tells the broker about its payloads' schema.

The Pulsar wire carries it in the PRODUCER and SUBSCRIBE commands (``Schema``: name, type,
definition bytes, properties); the type numbers are the protocol's. Encoding and decoding
payloads is the job of the schema classes built on top (``msgclient.schema``); the client
core only carries this description.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs


class SchemaType(enum.IntEnum):
    """Schema.Type of PulsarApi.proto (the numbers go on the wire)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    AUTO_CONSUME = 21
    EXTERNAL = 22


def _frozen_properties(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return dict(value or {})


@attrs.frozen
class SchemaInfo:
    """A schema as the broker sees it: ``definition`` is the type's schema text, as bytes
    (an Avro record schema in JSON for JSON and AVRO, empty for STRING and BYTES).

    ``SchemaInfo(type, name, definition, properties)``; read back as the official client's
    methods (``schema_type()``, ``name()``, ``schema()``) or as fields (``type``,
    ``schema_name``, ``definition``, ``properties``)."""

    type: SchemaType = attrs.field(converter=SchemaType)
    # The field has another name than the official ``name()`` method it is read by.
    schema_name: str = attrs.field(default="", alias="name")
    definition: bytes = b""
    properties: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_properties)

    def schema_type(self) -> SchemaType:
        return self.type

    def name(self) -> str:
        return self.schema_name

    def schema(self) -> str:
        """The definition as text, as the official ``SchemaInfo.schema()`` gives it."""
        return self.definition.decode()
