"""The same Record class built in the official ``pulsar.schema`` and in ``msgclient.schema``.

A record is described once (``RecordSpec``), built in both modules by the same code (the
two modules have the same names), and filled with the same values; hypothesis strategies
draw random specs and values. The tests then compare what the two make of them.
"""

from __future__ import annotations

import enum
import functools
import string
import types
from collections.abc import Callable
from typing import Any

import attrs
import pulsar.schema as official
from hypothesis import strategies as st

import msgclient.schema as ours
from msgclient.schema_info import SchemaInfo, SchemaType

MODULES = {"official": official, "ours": ours}


class Color(enum.Enum):
    red = 1
    green = 2
    blue = 3


class Mood(enum.Enum):  # str values that are not the names
    happy = "HAPPY"
    sad = "SAD"


class Level(enum.IntEnum):
    low = 0
    high = 10


@functools.cache
def user_record(m: types.ModuleType) -> type:
    """A record of every field type, built in module ``m`` (official or ours); one class
    per module, so that schemas and values made apart fit together."""

    class Address(m.Record):
        _avro_namespace = "example.users"
        street = m.String(required=True)
        zip = m.Integer()

    class User(m.Record):
        _avro_namespace = "example.users"
        name = m.String(required=True, default="", required_default=True)
        age = m.Integer(default=0, required_default=True)
        score = m.Double()
        blob = m.Bytes()
        active = m.Boolean(required=True)
        color = Color
        home = Address()
        work = Address()
        tags = m.Array(m.String())
        attrs = m.Map(m.Long(), required=True)
        note = m.String(default="ünïcode ✓", required_default=True)

    return User


ENUMS: list[type[enum.Enum]] = [Color, Mood, Level]
PRIMITIVES = ["Integer", "Long", "Float", "Double", "String", "Bytes", "Boolean", "Null"]


@attrs.frozen
class Primitive:
    kind: str  # the field class's name


@attrs.frozen
class EnumType:
    enum_type: type[enum.Enum]
    as_class: bool  # declared as the Enum class itself rather than CustomEnum(it)


@attrs.frozen
class ArrayType:
    items: TypeSpec


@attrs.frozen
class MapType:
    values: TypeSpec


@attrs.frozen
class FieldSpec:
    name: str
    type: TypeSpec
    required: bool = False
    default: Any = None
    required_default: bool = False


@attrs.frozen
class RecordSpec:
    name: str
    fields: tuple[FieldSpec, ...]
    namespace: str | None = None
    sorted_fields: bool = False


TypeSpec = Primitive | EnumType | ArrayType | MapType | RecordSpec


class Builder:
    """Builds specs in one module; a record spec gives one class, however often it is used
    (record names are unique within a drawn spec)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self._classes: dict[str, type] = {}

    def record_class(self, spec: RecordSpec) -> type:
        if spec.name not in self._classes:
            body: dict[str, Any] = {f.name: self.field(f) for f in spec.fields}
            if spec.namespace is not None:
                body["_avro_namespace"] = spec.namespace
            if spec.sorted_fields:
                body["_sorted_fields"] = True
            self._classes[spec.name] = types.new_class(
                spec.name, (self.module.Record,), exec_body=lambda ns: ns.update(body)
            )
        return self._classes[spec.name]

    def field(self, spec: FieldSpec) -> Any:
        flags = {
            "default": self.value(spec.type, spec.default),
            "required": spec.required,
            "required_default": spec.required_default,
        }
        kind = spec.type
        plain = not (spec.required or spec.required_default) and spec.default is None
        if isinstance(kind, EnumType) and kind.as_class and plain:
            return kind.enum_type  # RecordMeta makes it a CustomEnum
        return self.element(kind, flags)

    def element(self, kind: TypeSpec, flags: dict[str, Any] | None = None) -> Any:
        flags = flags or {}
        if isinstance(kind, Primitive):
            return getattr(self.module, kind.kind)(**flags)
        if isinstance(kind, EnumType):
            return self.module.CustomEnum(kind.enum_type, **flags)
        if isinstance(kind, ArrayType):
            return self.module.Array(self.element(kind.items), **flags)
        if isinstance(kind, MapType):
            return self.module.Map(self.element(kind.values), **flags)
        return self.record_class(kind)(**flags)

    def value(self, kind: TypeSpec, plain: Any) -> Any:
        """A drawn value in this module's terms: records become instances of its classes
        (or stay dicts where a record is given as a dict, see ``RecordValue``)."""
        if isinstance(plain, RecordValue):
            assert isinstance(kind, RecordSpec)
            fields = {
                f.name: self.value(f.type, plain.fields[f.name])
                for f in kind.fields
                if f.name in plain.fields
            }
            return fields if plain.as_dict else self.record_class(kind)(**fields)
        if isinstance(kind, ArrayType) and isinstance(plain, list):
            return [self.value(kind.items, item) for item in plain]
        if isinstance(kind, MapType) and isinstance(plain, dict):
            return {k: self.value(kind.values, v) for k, v in plain.items()}
        return plain

    def instance(self, spec: RecordSpec, plain: RecordValue) -> Any:
        return self.value(spec, attrs.evolve(plain, as_dict=False))


@attrs.frozen
class RecordValue:
    """A drawn record: its given fields (others take their defaults), and whether it is
    given to its parent as a dict rather than as an instance."""

    fields: dict[str, Any]
    as_dict: bool = False


# -- strategies ---------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
RESERVED = {"default", "required", "required_default", "type", "schema", "schema_info"}
FIELD_NAMES = st.text(string.ascii_lowercase, min_size=1, max_size=6).filter(
    lambda n: n not in RESERVED and n not in {"from_dict", "field_values"}
)


def primitive_values(kind: str) -> st.SearchStrategy[Any]:
    return {
        "Integer": st.integers(-(2**31), 2**31 - 1),
        "Long": st.integers(-(2**63), 2**63 - 1),
        "Float": st.floats(width=32, allow_nan=False) | st.integers(-1000, 1000),
        "Double": st.floats(allow_nan=False) | st.integers(-(2**53), 2**53),
        "String": TEXT,
        # UTF-8 text: JSON writes bytes as text (both clients fail on other bytes alike)
        "Bytes": TEXT.map(str.encode) | TEXT,
        "Boolean": st.booleans(),
        "Null": st.none(),
    }[kind]


def enum_values(enum_type: type[enum.Enum], in_container: bool) -> st.SearchStrategy[Any]:
    """Members; as a field's value also names and int values (array items and map values
    are checked with isinstance, so there only members)."""
    members = list(enum_type)
    choices = st.sampled_from(members)
    if in_container:
        return choices
    choices = choices | st.sampled_from([m.name for m in members])
    if all(type(m.value) is int for m in members):
        choices = choices | st.sampled_from([m.value for m in members])
    return choices


def values(kind: TypeSpec, as_field: bool = True) -> st.SearchStrategy[Any]:
    """Values both modules accept for a non-nullable position of ``kind``: a field's
    (``as_field``) or an array item's or map value's."""
    if isinstance(kind, Primitive):
        return primitive_values(kind.kind)
    if isinstance(kind, EnumType):
        return enum_values(kind.enum_type, not as_field)
    if isinstance(kind, ArrayType):
        return st.lists(values(kind.items, False), max_size=3)
    if isinstance(kind, MapType):
        return st.dictionaries(TEXT, values(kind.values, False), max_size=3)
    return record_values(kind, as_field)


def record_values(spec: RecordSpec, as_dict_allowed: bool = False) -> st.SearchStrategy[Any]:
    """A record's values: a required field without a default is given a value (else the
    Avro encoding fails in both), other fields may be left out (taking their defaults) or,
    unless required, be None. A record may be given to its parent as a dict."""
    always = {f.name: values(f.type) for f in spec.fields if f.required and f.default is None}
    sometimes = {
        f.name: (values(f.type) if f.required else st.none() | values(f.type))
        for f in spec.fields
        if f.name not in always
    }
    return st.builds(
        RecordValue,
        st.fixed_dictionaries(always, optional=sometimes),
        st.booleans() if as_dict_allowed else st.just(False),
    )


def _leaf_types() -> st.SearchStrategy[TypeSpec]:
    return st.sampled_from(PRIMITIVES).map(Primitive) | st.builds(
        EnumType, st.sampled_from(ENUMS), st.booleans()
    )


def _types_at(level: int) -> st.SearchStrategy[TypeSpec]:
    """Primitives and enums, in arrays and maps up to ``level`` deep. Enums are rare in
    containers: the official definition of an enum item is "enum", no Avro schema (both
    clients then fail to encode Avro alike, which one case in eight still shows)."""
    leaves = _leaf_types()
    if level == 0:
        return leaves
    inner = _types_at(level - 1)
    rare_enums = st.integers(0, 7).flatmap(
        lambda n: inner if n == 0 else st.sampled_from(PRIMITIVES).map(Primitive)
    )
    return leaves | st.builds(ArrayType, rare_enums) | st.builds(MapType, rare_enums)


@st.composite
def record_specs(draw: st.DrawFn, depth: int = 2, name: str = "R") -> RecordSpec:
    """A record of up to 6 fields of any type, with records nested up to ``depth`` deep
    (as fields, array items or map values); every nested record has its own name."""
    fields = []
    for index, field_name in enumerate(draw(st.lists(FIELD_NAMES, max_size=6, unique=True))):
        kind: TypeSpec
        if depth > 0 and draw(st.integers(0, 3)) == 0:
            kind = draw(record_specs(depth - 1, f"{name}_{index}"))
            wrap = draw(st.sampled_from([None, ArrayType, MapType]))
            if wrap is not None:
                kind = wrap(kind)
        else:
            kind = draw(_types_at(1))
        fields.append(draw(field_specs(field_name, kind)))
    return RecordSpec(
        name,
        tuple(fields),
        draw(st.none() | st.sampled_from(["com.example", "x"])),
        draw(st.booleans()),
    )


@st.composite
def field_specs(draw: st.DrawFn, name: str, kind: TypeSpec) -> FieldSpec:
    null_type = isinstance(kind, Primitive) and kind.kind == "Null"
    required = not null_type and draw(st.booleans())
    default = None
    if not isinstance(kind, RecordSpec) and not null_type and draw(st.booleans()):
        default = draw(values(kind, False))
    # Bytes have no JSON form, so a default in the definition is for the other types; a
    # stated default of None for a required field is no valid Avro (mostly left out).
    stated = not (isinstance(kind, Primitive) and kind.kind == "Bytes") and draw(st.booleans())
    if stated and required and default is None:
        stated = draw(st.integers(0, 7)) == 0
    return FieldSpec(name, kind, required, default, stated)


def outcome(action: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("error", None): both clients must succeed alike or both fail."""
    try:
        return "ok", action()
    except Exception:
        return "error", None


def official_schema_info(schema: Any) -> SchemaInfo | None:
    """An official schema's ``schema_info()`` in msgclient's terms (None for BYTES, of
    which the official client sends no schema at all)."""
    info = schema.schema_info()
    if info.schema_type().name == "BYTES":
        return None
    return SchemaInfo(SchemaType[info.schema_type().name], info.name(), info.schema().encode())
