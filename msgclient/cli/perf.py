"""``msgclient perf ...``: the benchmarks against the official clients
(``python -m msgclient.perf``, whose arguments it takes)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    subparsers.add_parser(
        "perf",
        help="benchmark msgclient against the official clients",
        add_help=False,  # its own parser answers --help (see main)
    )


def main(argv: list[str]) -> int:
    from msgclient.perf.__main__ import main as perf_main  # imports the rivals: only now

    return perf_main(argv)
