"""``msgclient embedded [pulsar|kafka|all]``: real brokers on 127.0.0.1 until Ctrl-C
(``python -m msgclient.embedded``, whose options it takes)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    subparsers.add_parser(
        "embedded",
        help="run pulsar-lite and/or tansu on 127.0.0.1 and print their URLs",
        add_help=False,  # its own parser answers --help (see main)
    )


def main(argv: list[str]) -> int:
    from msgclient.embedded.__main__ import main as embedded_main

    return embedded_main(argv)
