"""The primitive field types of a Record: Null, Boolean, Integer, Long, Float, Double, Bytes
and String, with the official ``pulsar.schema`` module's validation and defaults."""

from __future__ import annotations

import builtins
from typing import Any

from msgclient.schema.field_type import AvroType, FieldType, type_name


class Field(FieldType):
    """A record field. ``default`` is what a record gets when the field is not given (and
    what None becomes); ``required`` makes the field non-nullable in the Avro definition;
    ``required_default`` writes the default into the definition."""

    def __init__(
        self, default: Any = None, required: bool = False, required_default: bool = False
    ) -> None:
        self._required = required
        if default is not None:
            default = self.validate_type("default", default)
        self._default = default
        self._required_default = required_default

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()):
            raise TypeError(
                f"Invalid type '{type(val)}' for field '{name}'. "
                f"Expected: {type_name(self.python_type())}"
            )
        return val

    def schema(self) -> AvroType:
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> AvroType:
        return self.type()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default


class Null(Field):
    def type(self) -> str:
        return "null"

    def python_type(self) -> builtins.type:
        return type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise TypeError(f"Field {name} is set to be None")
        return val


class Boolean(Field):
    def type(self) -> str:
        return "boolean"

    def python_type(self) -> builtins.type:
        return bool

    def default(self) -> Any:
        return False if self._default is None else self._default


class Integer(Field):
    """A 32-bit Avro int (the range is checked by the Avro encoder, not here)."""

    def type(self) -> str:
        return "int"

    def python_type(self) -> builtins.type:
        return int


class Long(Field):
    def type(self) -> str:
        return "long"

    def python_type(self) -> builtins.type:
        return int


class Float(Field):
    def type(self) -> str:
        return "float"

    def python_type(self) -> tuple[builtins.type, ...]:
        return (float, int)


class Double(Field):
    def type(self) -> str:
        return "double"

    def python_type(self) -> tuple[builtins.type, ...]:
        return (float, int)


class Bytes(Field):
    """Bytes; a str is stored UTF-8 encoded. None is stored as None, not as the default (as
    the official module does)."""

    def type(self) -> str:
        return "bytes"

    def python_type(self) -> tuple[builtins.type, ...]:
        return (bytes, str)

    def validate_type(self, name: str, val: Any) -> Any:
        if isinstance(val, str):
            return val.encode()
        # The official module stores any value here unchecked; a non-bytes value could only
        # fail later, in the encoder, so it is refused now.
        if val is not None and not isinstance(val, bytes):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: bytes")
        return val


class String(Field):
    """Text; bytes are stored decoded from UTF-8."""

    def type(self) -> str:
        return "string"

    def python_type(self) -> tuple[builtins.type, ...]:
        return (str, bytes)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, str | bytes):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected a string")
        return val.decode() if isinstance(val, bytes) else val
