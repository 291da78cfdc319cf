"""What a record field is: the common shape of the field classes and of a nested Record.

The official ``pulsar.schema`` lets a Record instance stand where a Field goes (a nested
record), and duck-types the two; here both derive from ``FieldType`` so that the checks
("is this a field?") and the Avro definition code have one type to speak of. A Record is
still not a ``Field``, as in the official module.
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
