"""Where ``consume`` writes messages: stdout's bytes, flushed once per batch.

A reader that goes away (``consume ... | head``) ends the command quietly, with exit code
0, as for a reader that had enough: ``OutputClosed`` is raised, and stdout is pointed at
/dev/null so that the interpreter's last flush does not complain. A pipe's reader that
goes away while nothing is written is noticed too (``watch_reader``): an idle consumer
does not wait for its next message to learn it.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO

from msgclient.cli.records import json_line
from msgclient.message import Message


class OutputClosed(Exception):
    """stdout's reader is gone (a broken pipe)."""


class Output:
    def __init__(self, json_lines: bool, delimiter: bytes, stream: BinaryIO | None = None) -> None:
        self._json = json_lines
        self._delimiter = delimiter
        self._stream = sys.stdout.buffer if stream is None else stream

    def encode(self, messages: Sequence[Message]) -> bytes:
        if self._json:
            return b"".join(map(json_line, messages))
        delimiter = self._delimiter
        return b"".join(message.data() + delimiter for message in messages)

    def write(self, messages: Sequence[Message]) -> None:
        """Write and flush ``messages``; OutputClosed when the reader is gone."""
        if not messages:
            return
        try:
            self._stream.write(self.encode(messages))
            self._stream.flush()
        except BrokenPipeError:
            _silence_stdout()
            raise OutputClosed from None


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def watch_reader(on_gone: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_gone`` once stdout's reader is gone, when stdout is a pipe (its write end
    reports an error to epoll/poll then, which the loop's selector gives as readable);
    returns what stops the watch."""
    try:
        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return _nothing
    except (OSError, ValueError):
        return _nothing
    loop = asyncio.get_running_loop()

    def gone() -> None:
        loop.remove_reader(fd)
        on_gone()

    try:
        loop.add_reader(fd, gone)
    except (OSError, ValueError):
        return _nothing

    def unwatch() -> None:
        loop.remove_reader(fd)

    return unwatch


def _nothing() -> None:
    pass
