"""argparse types shared by the commands: each raises ArgumentTypeError naming the value,
which argparse reports as a usage error (exit code 2)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected an integer > 0, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """``K=V`` (V may hold further '=')."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def delimiter(text: str) -> bytes:
    r"""A delimiter, with backslash escapes as in C and Python (``\n``, ``\t``, ``\0``,
    ``\x1e``); other characters stand for their UTF-8 bytes."""
    try:
        value = text.encode("utf-8").decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError) as error:
        raise argparse.ArgumentTypeError(f"bad delimiter {text!r}: {error}") from None
    if not value:
        raise argparse.ArgumentTypeError("the delimiter must not be empty")
    return value
