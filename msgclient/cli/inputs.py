"""What ``produce`` sends: records from the command line, from files, or from stdin.

Each source is an async iterator of lists of records (a list is what one read gave,
sent together). Ctrl-C ends a source: stdin stops being read, and what was read before
it is still given when ``drain`` says so (no rate limit holds it back).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from msgclient.cli.errors import CliError
from msgclient.cli.records import Record, parse_record
from msgclient.cli.running import Interrupt, Interrupted
from msgclient.cli.stdin import Splitter, StdinChunks

MESSAGE, FILE = "message", "file"  # kinds of command-line input, in the order given


def check_files(inputs: Sequence[tuple[str, str]]) -> None:
    """Fail before connecting if a ``--file`` cannot be read."""
    for kind, text in inputs:
        if kind == FILE and not Path(text).is_file():
            raise CliError(f"--file {text}: no such file")


async def argument_records(
    inputs: Sequence[tuple[str, str]], template: Record, interrupt: Interrupt
) -> AsyncIterator[list[Record]]:
    """``-m VALUE`` (its UTF-8 bytes) and ``--file PATH`` (the whole file), in order."""
    pending: list[Record] = []
    for kind, text in inputs:
        if interrupt.requested:
            break
        if kind == MESSAGE:
            pending.append(dataclasses.replace(template, value=text.encode("utf-8")))
            continue
        if pending:
            yield pending
            pending = []
        try:
            value = await asyncio.to_thread(Path(text).read_bytes)
        except OSError as error:
            raise CliError(f"--file {text}: {error.strerror or error}") from None
        yield [dataclasses.replace(template, value=value)]
    if pending and not interrupt.requested:
        yield pending


async def stdin_records(
    json_lines: bool,
    delimiter: bytes,
    template: Record,
    interrupt: Interrupt,
    drain: bool,
) -> AsyncIterator[list[Record]]:
    """Records of stdin: raw (split at ``delimiter``) or JSON lines. After Ctrl-C, the
    chunks read already are still cut into records when ``drain``; a last record whose
    delimiter has not come is not sent then (it may be cut short)."""
    chunks = StdinChunks()
    splitter = Splitter(b"\n" if json_lines else delimiter)
    line = 0
    while True:
        chunk: bytes | None
        if interrupt.requested:
            chunk = chunks.next_nowait() if drain else None
            if chunk is None:
                return
        else:
            try:
                chunk = await interrupt.race(chunks.next())
            except Interrupted:
                continue
        parts = splitter.feed(chunk) if chunk else splitter.finish()
        if json_lines:
            records = []
            for part in parts:
                line += 1
                if part.strip():
                    records.append(_merged(parse_record(part, f"stdin line {line}"), template))
        else:
            records = [dataclasses.replace(template, value=part) for part in parts]
        if records:
            yield records
        if not chunk:
            return


def _merged(record: Record, template: Record) -> Record:
    """A JSON record, with the command line's key, headers and partition where it has
    none."""
    return Record(
        record.value,
        record.key if record.key is not None else template.key,
        record.headers if record.headers is not None else template.headers,
        record.partition if record.partition is not None else template.partition,
        record.event_timestamp,
    )
