"""Argument checks with the official client's error: ValueError naming the argument."""

from __future__ import annotations


def check_type(kind: type | tuple[type, ...], value: object, name: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(
            f"Argument {name} is expected to be of type '{_names(kind)}' and not "
            f"'{type(value).__name__}'"
        )


def check_type_or_none(kind: type | tuple[type, ...], value: object, name: str) -> None:
    if value is not None:
        check_type(kind, value, name)


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return "' or '".join(k.__name__ for k in kinds)
