"""Schema: turns values into payload bytes and back, and says what it is to the broker;
BytesSchema, StringSchema and JsonSchema (a Record as JSON, byte for byte as the official
client writes it).

The broker learns a producer's or consumer's schema from the ``SchemaInfo`` in its PRODUCER
or SUBSCRIBE command: ``schema_info()`` gives exactly what the official client sends there.
"""

from __future__ import annotations

import enum
import json
from abc import ABC, abstractmethod
from typing import Any, Generic, Protocol, TypeVar

from msgclient.schema.record import Record, check_record_class
from msgclient.schema_info import SchemaInfo, SchemaType

T = TypeVar("T")
R = TypeVar("R", bound=Record)


class HasData(Protocol):
    """A received message, as far as decoding needs it."""

    def data(self) -> bytes: ...


def definition_bytes(schema_definition: object) -> bytes:
    """The definition text the official client sends: JSON indented by one space, key
    order kept, non-ASCII escaped (so ``None`` gives b"null", as its String schema sends)."""
    return json.dumps(schema_definition, indent=1).encode()


class Schema(ABC, Generic[T]):
    """The base of every schema; subclass it for a custom encoding.

    ``record_cls`` is the type ``encode`` accepts; ``schema_type`` None means raw bytes
    (the official ``SchemaType.BYTES``), for which no schema goes on the wire;
    ``schema_definition`` is a JSON-ready value sent as the definition text.
    """

    def __init__(
        self,
        record_cls: type[Any] | None,
        schema_type: SchemaType | None,
        schema_definition: object,
        schema_name: str,
    ) -> None:
        self._record_cls = record_cls
        self._schema_info = (
            None
            if schema_type is None
            else SchemaInfo(schema_type, schema_name, definition_bytes(schema_definition))
        )

    @abstractmethod
    def encode(self, obj: T) -> bytes:
        """The payload of ``obj``; TypeError if it is not of the schema's type."""

    @abstractmethod
    def decode(self, data: bytes) -> T:
        """The value of a payload."""

    def decode_message(self, msg: HasData) -> T:
        """The value of a received message."""
        return self.decode(msg.data())

    def schema_info(self) -> SchemaInfo | None:
        """What the PRODUCER and SUBSCRIBE commands carry; None: no schema (raw bytes)."""
        return self._schema_info

    def _validate_object_type(self, obj: object) -> None:
        if self._record_cls is not None and not isinstance(obj, self._record_cls):
            raise TypeError(
                f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}"
            )

    def __repr__(self) -> str:
        kind = "" if self._record_cls is None else self._record_cls.__name__
        return f"{type(self).__name__}({kind})"


class BytesSchema(Schema[bytes]):
    """Payloads as they are (the default when no schema is given)."""

    def __init__(self) -> None:
        super().__init__(bytes, None, None, "BYTES")

    def encode(self, obj: bytes) -> bytes:
        self._validate_object_type(obj)
        return obj

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "BytesSchema"


class StringSchema(Schema[str]):
    """Text in UTF-8."""

    def __init__(self) -> None:
        super().__init__(str, SchemaType.STRING, None, "STRING")

    def encode(self, obj: str) -> bytes:
        self._validate_object_type(obj)
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def __str__(self) -> str:
        return "StringSchema"


def _json_value(value: object) -> Any:
    """What json cannot write itself: an enum by its value, bytes as UTF-8 text, a record
    as an object of its fields."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, Record):
        return value.field_values()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class JsonSchema(Schema[R]):
    """A Record as JSON (indented by one space, fields in the order they were set). The
    broker is told the record's Avro definition, with type JSON."""

    def __init__(self, record_cls: type[R]) -> None:
        check_record_class("record_cls", record_cls)
        super().__init__(record_cls, SchemaType.JSON, record_cls.schema(), "JSON")
        self._record = record_cls

    def encode(self, obj: R) -> bytes:
        self._validate_object_type(obj)
        return json.dumps(obj.field_values(), default=_json_value, indent=1).encode()

    def decode(self, data: bytes) -> R:
        values = json.loads(data)
        if not isinstance(values, dict):
            raise ValueError(
                f"a {self._record.__name__} payload must be a JSON object, "
                f"not {type(values).__name__}"
            )
        return self._record.from_dict(values)
