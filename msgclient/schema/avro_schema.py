"""AvroSchema: a Record (or a dict against a hand-written Avro schema) in Avro's binary
encoding, through fastavro (``pip install 'msgclient[avro]'``)."""

from __future__ import annotations

import enum
import io
from typing import TYPE_CHECKING, Any, TypeVar, overload

from msgclient.schema.record import Record, check_record_class
from msgclient.schema.schema import Schema
from msgclient.schema_info import SchemaType

if TYPE_CHECKING:
    from types import ModuleType

T = TypeVar("T")
R = TypeVar("R", bound=Record)


def _import_fastavro() -> ModuleType:
    try:
        import fastavro
    except ImportError as exc:
        raise ImportError(
            "AvroSchema needs fastavro: pip install 'msgclient[avro]' (or fastavro)"
        ) from exc
    return fastavro


def _avro_value(value: Any) -> Any:
    """A record's value as fastavro takes it: records as dicts, enums by symbol."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Record):
        return {name: _avro_value(v) for name, v in value.field_values().items()}
    if isinstance(value, list):
        return [_avro_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _avro_value(v) for key, v in value.items()}
    return value


class AvroSchema(Schema[T]):
    """Avro binary payloads (no header: the schemaless encoding the official client uses).

    ``AvroSchema(MyRecord)`` encodes and decodes MyRecord instances with the record's Avro
    definition; ``AvroSchema(None, schema_definition={...})`` encodes and decodes dicts with
    the given Avro schema. As in the official client, a given ``record_cls`` wins over a
    ``schema_definition``. Decoding uses this schema as the writer's: a topic whose writers
    used other versions of the schema is not resolved against them.
    """

    @overload
    def __init__(
        self: AvroSchema[R], record_cls: type[R], schema_definition: None = None
    ) -> None: ...

    @overload
    def __init__(
        self: AvroSchema[dict[str, Any]], record_cls: None, schema_definition: dict[str, Any]
    ) -> None: ...

    def __init__(
        self, record_cls: type[Any] | None, schema_definition: dict[str, Any] | None = None
    ) -> None:
        fastavro = _import_fastavro()
        definition: Any
        if record_cls is not None:
            check_record_class("record_cls", record_cls)
            definition = record_cls.schema()
        elif schema_definition is None:
            raise ValueError("AvroSchema needs a record_cls or a schema_definition")
        else:
            definition = schema_definition
        super().__init__(record_cls, SchemaType.AVRO, definition, "AVRO")
        self._record = record_cls
        try:
            self._parsed = fastavro.parse_schema(definition)
        except Exception as exc:  # fastavro's SchemaParseException and friends
            raise ValueError(f"not a valid Avro schema for AvroSchema: {exc}") from exc
        self._writer = fastavro.schemaless_writer
        self._reader = fastavro.schemaless_reader

    def encode(self, obj: T) -> bytes:
        if self._record is not None:
            self._validate_object_type(obj)
            datum = _avro_value(obj)
        elif isinstance(obj, dict):
            datum = obj
        else:
            raise ValueError(
                "If using the custom schema, the record data should be dict type "
                f"(got {type(obj).__name__})"
            )
        buffer = io.BytesIO()
        self._writer(buffer, self._parsed, datum)
        return buffer.getvalue()

    def decode(self, data: bytes) -> T:
        values = self._reader(io.BytesIO(data), self._parsed)
        if self._record is None:
            return values  # type: ignore[no-any-return]
        return self._record.from_dict(values)  # type: ignore[no-any-return]
