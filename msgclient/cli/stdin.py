"""stdin as chunks of bytes on the event loop, and chunks cut into records.

A daemon thread reads the file descriptor with ``os.read`` (it holds no lock of Python's
stdin object, so the program can exit while it is blocked on a terminal) and hands each
chunk to the loop through a small queue, which holds the reading back when the producer
is slower than the input.
"""

from __future__ import annotations

import asyncio
import os
import threading

CHUNK_BYTES = 64 * 1024
QUEUED_CHUNKS = 4
STDIN_FD = 0


class StdinChunks:
    """Chunks of stdin, in order; ``b""`` once at its end."""

    def __init__(self, fd: int | None = None) -> None:
        self._fd = STDIN_FD if fd is None else fd  # not sys.stdin: it may be None
        self._queue: asyncio.Queue[bytes | OSError] = asyncio.Queue(QUEUED_CHUNKS)
        self._loop = asyncio.get_running_loop()
        self._ended = False
        threading.Thread(target=self._read, name="msgclient-stdin", daemon=True).start()

    def _read(self) -> None:
        while True:
            item: bytes | OSError
            try:
                item = os.read(self._fd, CHUNK_BYTES)
            except OSError as error:
                item = error
            try:
                asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop).result()
            except (RuntimeError, asyncio.CancelledError):
                return  # the loop is closed: the program is exiting
            if not item or isinstance(item, OSError):
                return

    async def next(self) -> bytes:
        """The next chunk (``b""``: the end); OSError if reading failed."""
        if self._ended:
            return b""
        return self._took(await self._queue.get())

    def next_nowait(self) -> bytes | None:
        """The next chunk read already, or None when none is waiting."""
        if self._ended:
            return b""
        try:
            return self._took(self._queue.get_nowait())
        except asyncio.QueueEmpty:
            return None

    def _took(self, item: bytes | OSError) -> bytes:
        if isinstance(item, OSError):
            self._ended = True
            raise item
        if not item:
            self._ended = True
        return item


class Splitter:
    """Cuts a stream into records at a delimiter (not part of the records): each delimiter
    ends a record, so empty lines are empty records; what follows the last delimiter is a
    last record, if there is any."""

    def __init__(self, delimiter: bytes) -> None:
        self._delimiter = delimiter
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The records that ``chunk`` completes."""
        buffer = self._buffer
        start = max(0, len(buffer) - len(self._delimiter) + 1)
        buffer += chunk
        if buffer.find(self._delimiter, start) < 0:
            return []  # no copy of a long record while it grows
        records = bytes(buffer).split(self._delimiter)
        self._buffer = bytearray(records.pop())
        return records

    def finish(self) -> list[bytes]:
        """The last record, if the stream did not end with a delimiter."""
        rest, self._buffer = bytes(self._buffer), bytearray()
        return [rest] if rest else []
