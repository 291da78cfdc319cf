"""The event loop of the benchmark's asyncio clients (msgclient, aiokafka): asyncio's own,
or uvloop (``--loop uvloop``, the ``uvloop`` extra).

One choice per benchmark process, made once by the command line before any run.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LOOPS = ("uvloop", "asyncio")

_loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None


def choose(name: str) -> str:
    """Use the loop ``name`` (one of LOOPS) from now on; returns what it is, for the output."""
    global _loop_factory
    if name == "asyncio":
        _loop_factory = None
        return "asyncio (selector loop)"
    # Imported by name: uvloop is optional, and untyped for mypy when absent.
    _loop_factory = importlib.import_module("uvloop").new_event_loop
    return f"uvloop {importlib.metadata.version('uvloop')}"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop."""
    with asyncio.Runner(loop_factory=_loop_factory) as runner:
        return runner.run(coroutine)
