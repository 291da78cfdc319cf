"""Record: a class whose attributes declare typed fields, as in the official ``pulsar.schema``.

    class User(Record):
        name = String(required=True)
        age = Integer()
        tags = Array(String())

The class's Avro definition (``User.schema()``) is what JsonSchema and AvroSchema send to
the broker, and it is built exactly as the official module builds it, so that both clients
describe the same class with the same bytes.
"""

from __future__ import annotations

import builtins
import copy
import enum
from typing import Any, ClassVar, Self, cast

from msgclient.schema.containers import Array, CustomEnum, Map
from msgclient.schema.fields import AvroType, FieldType

# Instance attributes that are the record's own settings as a nested field, not fields.
RESERVED_ATTRIBUTES = frozenset({"_default", "_required", "_required_default"})


class RecordMeta(type):
    """Collects a Record class's declared fields, in declaration order.

    As in the official module, only the class body's own attributes are fields (a subclass
    of a record does not inherit its parent's fields); an Enum class becomes a CustomEnum
    and a Record class a nested record with its defaults.
    """

    def __new__(
        mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any
    ) -> RecordMeta:
        if any(isinstance(base, RecordMeta) for base in bases):  # not Record itself
            namespace["_fields"] = _declared_fields(namespace)
            namespace["_required"] = False
        return super().__new__(mcs, name, bases, namespace, **kwargs)


def _declared_fields(namespace: dict[str, Any]) -> dict[str, FieldType]:
    fields: dict[str, FieldType] = {}
    for name, value in namespace.items():
        if isinstance(value, enum.EnumMeta):
            value = CustomEnum(cast(type[enum.Enum], value))
        elif isinstance(value, RecordMeta):
            value = value()
        if isinstance(value, FieldType):
            fields[name] = value
    return fields


class Record(FieldType, metaclass=RecordMeta):
    """A typed record; subclass it and declare fields as class attributes.

    ``Rec(field=value, ...)`` validates each value against its field (TypeError naming the
    field); fields not given take their defaults; a nested record may be given as a dict.
    ``default``, ``required`` and ``required_default`` apply when the record itself is a
    field of another record.
    """

    _avro_namespace: ClassVar[str | None] = None  # the Avro definition's "namespace"
    _sorted_fields: ClassVar[bool] = False  # list the fields by name in the definition
    _fields: ClassVar[dict[str, FieldType]] = {}

    def __init__(
        self,
        default: Any = None,
        required_default: bool = False,
        required: bool = False,
        **fields: Any,
    ) -> None:
        self._required_default = required_default
        self._default = default
        self._required = required
        unknown = fields.keys() - self._fields.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        for name, field in self._fields.items():
            if name in fields:
                setattr(self, name, _from_plain(field, fields[name]))
            elif isinstance(field, Record):
                # The official module shares the declared record itself between all
                # records; a copy keeps a change to one from showing in the others.
                setattr(self, name, copy.deepcopy(field))
            else:  # the default is stored as declared, not validated again
                object.__setattr__(self, name, field.default())

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """The record of decoded values: nested dicts become records, and keys that are not
        fields (a newer writer's) are left out."""
        return cls(**{name: value for name, value in values.items() if name in cls._fields})

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in RESERVED_ATTRIBUTES:
            field = self._fields.get(key)
            if field is None:
                raise AttributeError(f"Cannot set undeclared field {key} on record")
            value = field.validate_type(key, value)
        object.__setattr__(self, key, value)

    def field_values(self) -> dict[str, Any]:
        """The fields' values, in the order they were first set (the JSON encoding's order)."""
        return {k: v for k, v in self.__dict__.items() if k not in RESERVED_ATTRIBUTES}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        missing = object()
        return all(getattr(self, name) == getattr(other, name, missing) for name in self._fields)

    def __str__(self) -> str:
        return str(self.__dict__)

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v!r}" for k, v in self.field_values().items())
        return f"{type(self).__name__}({values})"

    @classmethod
    def schema(cls) -> AvroType:
        """The Avro definition of this record, as a JSON-ready value."""
        return cls.schema_info(set())

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> AvroType:
        full_name = cls.__name__
        if cls._avro_namespace is not None:
            full_name = f"{cls._avro_namespace}.{full_name}"
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        definition: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            definition["namespace"] = cls._avro_namespace
        names = sorted(cls._fields) if cls._sorted_fields else list(cls._fields)
        definition["fields"] = [
            _field_definition(name, cls._fields[name], defined_names) for name in names
        ]
        return definition

    def type(self) -> str:
        return type(self).__name__

    def python_type(self) -> builtins.type:
        return type(self)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, type(self)):
            raise TypeError(
                f"Invalid type '{type(val)}' for sub-record field '{name}'. "
                f"Expected: {type(self).__name__}"
            )
        return val

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default

    def item_schema(self, defined_names: set[str]) -> AvroType:
        return self.schema_info(defined_names)


def check_record_class(argument: str, record_cls: object) -> None:
    """What JsonSchema and AvroSchema are given must be a Record class."""
    if not (isinstance(record_cls, type) and issubclass(record_cls, Record)):
        raise TypeError(f"{argument} must be a Record subclass, not {record_cls!r}")


def _field_definition(name: str, field: FieldType, defined_names: set[str]) -> dict[str, Any]:
    avro_type = field.schema_info(defined_names)
    if not field._required:
        avro_type = ["null", avro_type]
    if not field.required_default():
        return {"name": name, "type": avro_type}
    default = field.default()
    if isinstance(default, enum.Enum):
        default = default.name  # an Avro enum's default is its symbol
    return {"name": name, "default": default, "type": avro_type}


def _from_plain(field: FieldType, value: Any) -> Any:
    """Decoded values of records (dicts) as records, where the official module converts
    them: a record field, and the items of an array or map of records."""
    if isinstance(field, Record) and isinstance(value, dict):
        return field.from_dict(value)
    if isinstance(field, Array) and isinstance(value, list):
        items = field.array_type
        if isinstance(items, Record):
            return [items.from_dict(v) if isinstance(v, dict) else v for v in value]
    if isinstance(field, Map) and isinstance(value, dict):
        values = field.value_type
        if isinstance(values, Record):
            return {k: values.from_dict(v) if isinstance(v, dict) else v for k, v in value.items()}
    return value
