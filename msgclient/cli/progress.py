"""Progress on stderr (tqdm), for people watching a terminal, never for pipes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm

REDRAW_SECONDS = 0.5


def add_progress_argument(parser: argparse.ArgumentParser, auto: str) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show a progress bar on stderr (default: {auto})",
    )


def wanted(flag: bool | None, *, writes_stdout: bool) -> bool:
    """The ``--progress`` flag, or by default: when stderr is a terminal, and stdout too
    for a command that prints messages there (a bar on a pipe's other end helps nobody)."""
    if flag is not None:
        return flag
    if not _is_terminal(sys.stderr):
        return False
    return not writes_stdout or _is_terminal(sys.stdout)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


class Progress:
    """A message counter on stderr; does nothing when disabled. Made on the event loop:
    a task redraws it twice a second, so that the count shown catches up with the last
    updates (tqdm draws on updates only, at most every ``mininterval``)."""

    def __init__(self, enabled: bool, description: str, total: int | None = None) -> None:
        self._bar: tqdm[Any] | None = None
        self._ticker: asyncio.Task[None] | None = None
        if enabled:
            self._bar = tqdm(
                total=total,
                desc=description,
                unit="msg",
                file=sys.stderr,
                dynamic_ncols=True,
                mininterval=REDRAW_SECONDS,
            )
            self._ticker = asyncio.create_task(self._tick(self._bar))

    @staticmethod
    async def _tick(bar: tqdm[Any]) -> None:
        while True:
            await asyncio.sleep(REDRAW_SECONDS)
            if bar.n != bar.last_print_n:
                bar.refresh()

    def update(self, count: int) -> None:
        if self._bar is not None and count:
            self._bar.update(count)

    @contextlib.contextmanager
    def clear_for_stdout(self) -> Iterator[None]:
        """Clear the bar while messages are written to a terminal's stdout."""
        if self._bar is None:
            yield
            return
        with tqdm.external_write_mode(file=sys.stdout):
            yield

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
