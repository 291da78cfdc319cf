"""The ``msgclient`` command: ``msgclient COMMAND ...`` (also ``python -m msgclient``).

Each command is a module with ``register(subparsers)``, which adds its parser and sets
``run`` (a function of the parsed arguments returning the exit code) and ``parser`` as
its defaults. Commands that are programs of their own (``embedded``, ``perf``) also have
``main(argv)``, which gets the rest of the command line as it is. Docs: docs/cli.md.

Exit codes: 0 ok, 1 an error (``msgclient: error: ...`` on stderr, no traceback), 2 a
usage error, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from msgclient._version import __version__
from msgclient.cli import consume, embedded, groups, perf, produce, topics
from msgclient.cli.errors import PROG, CliError, UsageError, report_error
from msgclient.errors import MsgClientError

COMMANDS = (produce, consume, topics, groups, embedded, perf)  # in the order --help lists them
PROGRAMS: dict[str, Callable[[list[str]], int]] = {
    "embedded": embedded.main,
    "perf": perf.main,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Produce and consume on Apache Pulsar (pulsar://) and Apache Kafka "
        "(kafka://) from the shell.",
        epilog="`msgclient COMMAND --help` tells more. Exit codes: 0 ok, 1 error, 2 usage, "
        "130 Ctrl-C.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in PROGRAMS:
        return PROGRAMS[arguments[0]](arguments[1:])
    # The library's warnings (a lost connection, a retry) go to stderr as our messages do.
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(message)s")
    args, unknown = parser().parse_known_args(arguments)
    try:
        if unknown:  # told with the command's usage, not the top parser's
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
        code: int = args.run(args)
    except UsageError as error:
        args.parser.error(str(error))  # exits with 2
    except (CliError, MsgClientError, OSError) as error:
        return report_error(error)
    return code
