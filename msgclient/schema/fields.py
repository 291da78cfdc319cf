"""Record fields: what a field type is (``FieldType``, shared with a nested Record), and the
primitive ones: Null, Boolean, Integer, Long, Float, Double, Bytes and String, with the
official ``pulsar.schema`` module's validation and defaults.

The official module lets a Record instance stand where a Field goes (a nested record) and
duck-types the two; here both derive from ``FieldType``, so that the checks ("is this a
field?") and the Avro definition code have one type to speak of. A Record is still not a
``Field``, as in the official module.
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from typing import Any

# The Avro definition of a type: a name ("int", "Rec"), a union (list) or a complex type (dict).
AvroType = str | list[Any] | dict[str, Any]


def type_name(kind: object) -> str:
    """How error messages name a type (or a tuple of types)."""
    return getattr(kind, "__name__", None) or str(kind)


class FieldType:
    """A record field's type: it validates values and describes itself in Avro."""

    _required: bool  # not nullable: the Avro type is not wrapped in ["null", ...]

    @abstractmethod
    def type(self) -> str:
        """The Avro type name ("int", "record", ...) or the record's class name."""

    @abstractmethod
    def python_type(self) -> builtins.type | tuple[builtins.type, ...]:
        """What ``isinstance`` checks array items and map values against."""

    @abstractmethod
    def validate_type(self, name: str, val: Any) -> Any:
        """The value to store for field ``name``: ``val``, converted, or the default for None;
        TypeError naming the field if it does not fit."""

    @abstractmethod
    def default(self) -> Any:
        """The value a record gets when the field is not given."""

    @abstractmethod
    def required_default(self) -> bool:
        """Whether the Avro definition states the default."""

    @abstractmethod
    def schema_info(self, defined_names: set[str]) -> AvroType:
        """The Avro type; named types already in ``defined_names`` are given by name only."""

    def item_schema(self, defined_names: set[str]) -> AvroType:
        """The Avro type as an array's items or a map's values. The official module writes
        only the type name of a primitive or enum here (so an enum item reads "enum"), the
        full definition of arrays, maps and records: kept, for the same definition bytes."""
        return self.type()


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
