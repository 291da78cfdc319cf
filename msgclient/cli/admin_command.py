"""What the admin commands (``topics``, ``groups``) share: URL and ``--timeout`` without
a topic, running an admin call with a clean Ctrl-C, per-item failures on stderr, and
output as an aligned table or JSON lines (``--format``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from msgclient.admin import Admin, ItemResults
from msgclient.cli import running
from msgclient.cli.connection import add_url_arguments, closing, new_client
from msgclient.cli.errors import FAILED, OK, report
from msgclient.cli.running import Interrupt, Interrupted
from msgclient.errors import MsgClientError

K = TypeVar("K")
Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_action(
    actions: SubParsers, name: str, help_text: str, action: Action, *, output: bool = False
) -> argparse.ArgumentParser:
    """A subcommand ``name`` with URL and ``--timeout`` (and ``--format`` if it prints
    records) that runs ``action`` on the client's admin API."""
    parser = actions.add_parser(name, help=help_text, description=help_text)
    add_url_arguments(parser)
    if output:
        parser.add_argument(
            "--format",
            choices=("table", "json"),
            default="table",
            help="an aligned table (default) or JSON lines",
        )
    parser.set_defaults(run=lambda args: running.run(_command(action, args)), parser=parser)
    return parser


def _command(action: Action, args: argparse.Namespace) -> running.Command:
    async def command(interrupt: Interrupt) -> int:
        async with closing(new_client(args)) as client:
            try:
                return await interrupt.race(action(client.admin(), args))
            except Interrupted:
                return OK  # running.run answers 130 for an interrupted command

    return command


def failures(
    results: ItemResults[K, Any],
    ignored: type[MsgClientError] | tuple[type[MsgClientError], ...] = (),
) -> int:
    """Report each failed item on stderr (except ``ignored`` errors): FAILED if any."""
    code = OK
    for item, error in results.failed.items():
        if isinstance(error, ignored):
            continue
        report(f"error: {_name(item)}: {error}")
        code = FAILED
    return code


def _name(item: object) -> str:
    if isinstance(item, tuple) and len(item) == 2:
        return f"{item[0]}/{item[1]}"
    return str(item)


def write_records(
    args: argparse.Namespace, headers: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Rows under ``headers``: a table padded to the widest cell of each column (lists
    joined by commas, mappings as k=v), or one JSON object a row (``--format json``, keys
    the headers in lower case)."""
    rows = list(rows)
    if args.format == "json":
        keys = [h.lower().replace(" ", "_") for h in headers]
        for row in rows:
            print(json.dumps(dict(zip(keys, row, strict=True))))
        sys.stdout.flush()
        return
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    sys.stdout.flush()


def _cell(value: object) -> str:
    if isinstance(value, Mapping):
        value = [f"{k}={v}" for k, v in sorted(value.items())]
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    return "-" if value is None or value == "" else str(value)
