"""JsonSchema: a Record as a JSON object, byte for byte as the official client writes it."""

from __future__ import annotations

import enum
import json
from typing import Any, TypeVar

from msgclient.schema.record import Record
from msgclient.schema.schema import Schema
from msgclient.schema_info import SchemaType

R = TypeVar("R", bound=Record)


def check_record_class(argument: str, record_cls: object) -> None:
    if not (isinstance(record_cls, type) and issubclass(record_cls, Record)):
        raise TypeError(f"{argument} must be a Record subclass, not {record_cls!r}")


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
