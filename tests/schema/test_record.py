"""Record and field behaviour, case by case, against the official ``pulsar.schema``: the
same defaults, conversions, refusals (same exception types) and Avro definitions; then the
few places where msgclient deliberately differs."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pulsar.schema as official
import pytest

import msgclient.schema as ours
from tests.schema.twins import Color, Mood

MODULES = [official, ours]


def in_both(action: Callable[[types.ModuleType], Any]) -> tuple[str, Any]:
    """What ``action`` gives with each module: the same value or the same exception type."""
    results = []
    for module in MODULES:
        try:
            results.append(("ok", action(module)))
        except Exception as exc:
            results.append(("raised", type(exc)))
    assert results[0] == results[1], results
    return results[1]


def record(module: types.ModuleType, **fields: Any) -> type:
    return types.new_class("Rec", (module.Record,), exec_body=lambda ns: ns.update(fields))


def sample(m: types.ModuleType) -> type:
    class Sub(m.Record):
        x = m.Integer()

    class Sample(m.Record):
        flag = m.Boolean()
        count = m.Integer()
        big = m.Long(default=7)
        ratio = m.Float()
        precise = m.Double(default=0.5)
        name = m.String(default="anon")
        blob = m.Bytes(default="text")
        nothing = m.Null()
        color = Color
        tags = m.Array(m.String())
        attrs = m.Map(m.Integer())
        sub = Sub

    return Sample


def values(value: Any) -> Any:
    """A record of either module as nested dicts of its fields' values."""
    if hasattr(value, "_fields"):
        return {name: values(getattr(value, name)) for name in value._fields}
    if isinstance(value, list):
        return [values(item) for item in value]
    if isinstance(value, dict):
        return {key: values(item) for key, item in value.items()}
    return value


def test_defaults_are_the_official_ones() -> None:
    assert in_both(lambda m: values(sample(m)()))[1] == {
        "flag": False,
        "count": None,
        "big": 7,
        "ratio": None,
        "precise": 0.5,
        "name": "anon",
        "blob": b"text",
        "nothing": None,
        "color": None,
        "tags": None,
        "attrs": None,
        "sub": {"x": None},
    }


@pytest.mark.parametrize(
    ("field", "value", "stored"),
    [
        ("name", b"bytes", "bytes"),  # String decodes bytes
        ("blob", "text", b"text"),  # Bytes encodes str
        ("color", "green", Color.green),  # an enum by name
        ("color", 3, Color.blue),  # an enum by value
        ("ratio", 2, 2),  # Float takes ints
        ("count", True, True),  # bool is an int
        ("name", None, "anon"),  # None is the default
        ("blob", None, None),  # except for Bytes
        ("tags", ["a", b"b"], ["a", b"b"]),  # array items are checked, not converted
    ],
)
def test_values_are_converted_as_official(field: str, value: Any, stored: Any) -> None:
    assert in_both(lambda m: getattr(sample(m)(**{field: value}), field)) == ("ok", stored)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count", "1"),
        ("count", 1.5),
        ("ratio", "x"),
        ("name", 5),
        ("nothing", 0),
        ("flag", 1),
        ("color", "purple"),
        ("color", 9),
        ("color", Mood.sad),
        ("tags", "abc"),
        ("tags", ["a", 1]),
        ("attrs", {"a": "1"}),
        ("attrs", {1: 1}),
        ("attrs", [1]),
        ("sub", 5),
    ],
)
def test_wrong_values_are_refused_as_official(field: str, value: Any) -> None:
    assert in_both(lambda m: sample(m)(**{field: value})) == ("raised", TypeError)


def test_assignment_validates_and_undeclared_fields_are_refused() -> None:
    def assign(m: types.ModuleType, name: str, value: Any) -> Any:
        rec = sample(m)()
        setattr(rec, name, value)
        return getattr(rec, name)

    assert in_both(lambda m: assign(m, "count", 3)) == ("ok", 3)
    assert in_both(lambda m: assign(m, "count", "3")) == ("raised", TypeError)
    assert in_both(lambda m: assign(m, "undeclared", 1)) == ("raised", AttributeError)


def test_required_fields_refuse_none() -> None:
    assert in_both(lambda m: record(m, a=m.Integer(required=True))(a=None)) == (
        "raised",
        TypeError,
    )


def test_wrong_defaults_fail_when_the_class_is_defined() -> None:
    assert in_both(lambda m: m.Integer(default="1")) == ("raised", TypeError)
    assert in_both(lambda m: m.Array(m.Integer(), default=["1"])) == ("raised", TypeError)


def test_equality_compares_the_fields() -> None:
    def compare(m: types.ModuleType) -> tuple[bool, bool]:
        cls = sample(m)
        return cls(count=1) == cls(count=1), cls(count=1) != cls(count=2)

    assert in_both(compare) == ("ok", (True, True))


def test_nested_records_from_dicts() -> None:
    def build(m: types.ModuleType) -> Any:
        class Point(m.Record):
            x = m.Integer()
            y = m.Integer()

        class Shape(m.Record):
            center = Point()
            corners = m.Array(Point())
            named = m.Map(Point())

        shape = Shape(
            center={"x": 1, "y": 2},
            corners=[{"x": 3}, {"y": 4}],
            named={"a": {"x": 5, "y": 6}},
        )
        assert isinstance(shape.center, Point)
        assert all(isinstance(c, Point) for c in shape.corners)
        assert isinstance(shape.named["a"], Point)
        return values(shape)

    assert in_both(build) == (
        "ok",
        {
            "center": {"x": 1, "y": 2},
            "corners": [{"x": 3, "y": None}, {"x": None, "y": 4}],
            "named": {"a": {"x": 5, "y": 6}},
        },
    )


def test_avro_definitions_name_repeated_types_once() -> None:
    def definition(m: types.ModuleType) -> Any:
        class Inner(m.Record):
            _avro_namespace = "inner.ns"
            color = Color

        class Outer(m.Record):
            _avro_namespace = "outer.ns"
            _sorted_fields = True
            second = Inner()
            first = Inner(required=True)
            colors = m.Array(m.CustomEnum(Color))
            favourite = m.CustomEnum(Color, default=Color.red, required_default=True)
            weights = m.Map(m.Array(m.Double()), required=True)
            label = m.String(default="x", required=True, required_default=True)

        return Outer.schema()

    result = in_both(definition)
    assert result[0] == "ok"
    fields = {f["name"]: f for f in result[1]["fields"]}
    assert list(fields) == sorted(fields)  # _sorted_fields
    assert fields["first"]["type"]["name"] == "Inner"  # defined at its first use ...
    assert fields["second"]["type"] == ["null", "inner.ns.Inner"]  # ... then named
    # An enum as array items is written "enum" (the official quirk, kept for the same
    # bytes), so Color is defined in full at "favourite", with its default by symbol ...
    assert fields["colors"]["type"] == ["null", {"type": "array", "items": "enum"}]
    assert fields["favourite"] == {
        "name": "favourite",
        "default": "red",
        "type": ["null", {"type": "enum", "name": "Color", "symbols": ["red", "green", "blue"]}],
    }
    # ... and named in Inner, defined after it
    assert fields["first"]["type"]["fields"] == [{"name": "color", "type": ["null", "Color"]}]


def test_a_subclass_has_only_its_own_fields_as_official() -> None:
    def fields(m: types.ModuleType) -> Any:
        class Base(m.Record):
            a = m.Integer()

        class Derived(Base):
            b = m.Integer()

        return list(Derived._fields), Derived.schema()

    assert in_both(fields)[1][0] == ["b"]


# -- where msgclient differs on purpose ----------------------------------------------------


def test_unknown_constructor_fields_are_refused() -> None:
    # The official constructor ignores them (a typo goes unnoticed); decoders still drop
    # the fields a newer writer added, see test_decoders_ignore_unknown_fields.
    with pytest.raises(TypeError, match=r"no field\(s\) \['nmae'\]"):
        sample(ours)(nmae="x")


def test_decoders_ignore_unknown_fields() -> None:
    cls = record(ours, a=ours.Integer())
    assert ours.JsonSchema(cls).decode(b'{"a": 1, "added_later": 2}') == cls(a=1)


def test_bytes_fields_refuse_what_is_not_bytes_or_str() -> None:
    with pytest.raises(TypeError, match="field 'blob'"):
        sample(ours)(blob=5)


def test_str_valued_enums_decode_from_json() -> None:
    cls = record(ours, mood=Mood)
    schema = ours.JsonSchema(cls)
    payload = schema.encode(cls(mood=Mood.happy))
    their_class = record(official, mood=Mood)
    assert payload == official.JsonSchema(their_class).encode(their_class(mood=Mood.happy))
    assert schema.decode(payload).mood is Mood.happy  # the official raises TypeError here


def test_nested_record_defaults_are_not_shared() -> None:
    cls = sample(ours)
    first = cls()
    first.sub.x = 5
    assert cls().sub.x is None  # the official shares one nested record between all


def test_field_classes_in_place_of_instances_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match=r"array_type .* \(an instance, e\.g\. String\(\)"):
        ours.Array(ours.String)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="enum_type must be an Enum class"):
        ours.CustomEnum(int)  # type: ignore[arg-type]
