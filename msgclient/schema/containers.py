"""The complex field types of a Record: CustomEnum, Array and Map."""

from __future__ import annotations

import builtins
import enum
from typing import Any

from msgclient.schema.fields import AvroType, Field, FieldType, type_name


def _check_element_type(argument: str, value: object) -> FieldType:
    if isinstance(value, FieldType):
        return value
    hint = " (an instance, e.g. String(), not the class)" if isinstance(value, type) else ""
    raise TypeError(f"{argument} must be a Field or a Record{hint}, not {value!r}")


class CustomEnum(Field):
    """A Python Enum as an Avro enum: the symbols are the members' names. A Record field
    declared as the Enum class itself becomes a CustomEnum of it.

    A value is a member, a member's name, or a member's value (an int, or a str that is not
    a name: the official module takes ints only, so its JSON encoding of a str-valued enum
    does not decode; here it does)."""

    def __init__(
        self,
        enum_type: type[enum.Enum],
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        if not (isinstance(enum_type, type) and issubclass(enum_type, enum.Enum)):
            raise TypeError(f"enum_type must be an Enum class, not {enum_type!r}")
        self.enum_type = enum_type
        self.values: dict[Any, enum.Enum] = {m.value: m for m in enum_type.__members__.values()}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> builtins.type:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        if type(val) is str and val in self.enum_type.__members__:
            return self.enum_type.__members__[val]
        if type(val) is str or type(val) is int:
            if val in self.values:
                return self.values[val]
            raise TypeError(
                f"Invalid enum value '{val}' for field '{name}'. "
                f"Expected one of: {list(self.enum_type.__members__)}"
            )
        if not isinstance(val, self.enum_type):
            raise TypeError(
                f"Invalid type '{type(val)}' for field '{name}'. "
                f"Expected: {type_name(self.enum_type)}"
            )
        return val

    def schema_info(self, defined_names: set[str]) -> AvroType:
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [member.name for member in self.enum_type]}


class Array(Field):
    """A list whose items are all of ``array_type`` (a field or a Record instance)."""

    def __init__(
        self,
        array_type: FieldType,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        self.array_type = _check_element_type("array_type", array_type)
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> builtins.type:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        item_type = self.array_type.python_type()
        if not all(isinstance(item, item_type) for item in val):
            raise TypeError(
                f"Array field {name} items should all be of type {self.array_type.type()}"
            )
        return val

    def schema_info(self, defined_names: set[str]) -> AvroType:
        return {"type": "array", "items": self.array_type.item_schema(defined_names)}

    def item_schema(self, defined_names: set[str]) -> AvroType:
        return self.schema_info(defined_names)


class Map(Field):
    """A dict from str to values all of ``value_type`` (a field or a Record instance)."""

    def __init__(
        self,
        value_type: FieldType,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        self.value_type = _check_element_type("value_type", value_type)
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> builtins.type:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        value_type = self.value_type.python_type()
        for key, value in val.items():
            if not isinstance(key, str):
                raise TypeError(f"Map keys for field {name} should all be strings")
            if not isinstance(value, value_type):
                raise TypeError(
                    f"Map values for field {name} should all be of type {type_name(value_type)}"
                )
        return val

    def schema_info(self, defined_names: set[str]) -> AvroType:
        return {"type": "map", "values": self.value_type.item_schema(defined_names)}

    def item_schema(self, defined_names: set[str]) -> AvroType:
        return self.schema_info(defined_names)
