"""Validators for attrs option classes and call arguments: each bad value raises
InvalidConfigurationError naming the option and what it accepts (a credential is named by
its type only, never its value)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import attrs

from msgclient.auth import Authentication
from msgclient.errors import InvalidConfigurationError

T = TypeVar("T")


def check(condition: bool, name: str, value: object, expected: str) -> None:
    if not condition:
        raise InvalidConfigurationError(f"option {name}={value!r} is invalid: expected {expected}")


def int_at_least(minimum: int) -> Callable[[Any, attrs.Attribute[int], int], None]:
    def validate(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
        check(
            isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
            attribute.name,
            value,
            f"an integer >= {minimum}",
        )

    return validate


def number_at_least(minimum: float) -> Callable[[Any, attrs.Attribute[float], float], None]:
    def validate(_: Any, attribute: attrs.Attribute[float], value: float) -> None:
        check(
            isinstance(value, int | float) and not isinstance(value, bool) and value >= minimum,
            attribute.name,
            value,
            f"a number >= {minimum}",
        )

    return validate


def member_of(kind: type[enum.Enum]) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def validate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        allowed = ", ".join(f"{kind.__name__}.{m.name}" for m in kind)
        check(isinstance(value, kind), attribute.name, value, f"one of {allowed}")

    return validate


def is_bool(_: Any, attribute: attrs.Attribute[bool], value: bool) -> None:
    check(isinstance(value, bool), attribute.name, value, "True or False")


def non_empty_str(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    check(isinstance(value, str) and bool(value), attribute.name, value, "a non-empty str")


def optional_secret(_: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    # A credential: the message names its type, never its value.
    if value is not None and not isinstance(value, str):
        raise InvalidConfigurationError(
            f"option {attribute.name} is invalid: expected a string or None, "
            f"not {type(value).__name__}"
        )


def optional_authentication(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # Names the type only: a token passed here by mistake must not reach the message.
    if value is not None and not isinstance(value, Authentication):
        raise InvalidConfigurationError(
            f"option {attribute.name} is invalid: expected an Authentication "
            "(AuthenticationToken, AuthenticationTLS, AuthenticationOauth2) or None, "
            f"not {type(value).__name__}"
        )


def optional_str(_: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    check(value is None or isinstance(value, str), attribute.name, value, "a string or None")


def optional_callable(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check(value is None or callable(value), attribute.name, value, "a callable or None")


def optional_instance(kind: type) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def validate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        expected = f"a {kind.__name__} or None"
        check(value is None or isinstance(value, kind), attribute.name, value, expected)

    return validate


def one_of(*allowed: object) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def validate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check(
            value in allowed and not isinstance(value, bool),
            attribute.name,
            value,
            "one of " + ", ".join(map(repr, allowed)),
        )

    return validate


def check_properties(name: str, value: Mapping[str, str] | None) -> None:
    """Message and producer properties are str -> str, as on the wire."""
    check(
        value is None
        or (
            isinstance(value, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ),
        name,
        value,
        "a mapping of str to str",
    )


def check_non_negative(name: str, value: int) -> None:
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        name,
        value,
        "an integer >= 0",
    )


def check_timeout(name: str, value: object) -> None:
    """A timeout argument in ms: an int >= 0 (TypeError for another type)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int (milliseconds), not {type(value).__name__}")
    if value < 0:
        raise InvalidConfigurationError(f"{name}={value} is invalid: expected >= 0")


def build(kind: type[T], what: str, options: Mapping[str, Any]) -> T:
    """Construct an options class from keyword arguments; unknown names are named."""
    known = {a.name for a in attrs.fields(cast(type[attrs.AttrsInstance], kind))}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidConfigurationError(
            f"unknown {what} option(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    return kind(**options)


def check_key(name: str, key: object) -> None:
    if type(key) is not str and type(key) is not bytes:
        raise TypeError(f"{name} must be str or bytes, not {type(key).__name__}")


def value_bytes(value: object) -> bytes:
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(
        "message value must be bytes, bytearray, memoryview or None (a null value), "
        f"not {type(value).__name__}"
        + (" (encode the str first, e.g. value.encode())" if isinstance(value, str) else "")
    )
