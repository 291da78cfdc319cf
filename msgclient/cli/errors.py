"""The command line's exit codes, errors, and how an error is reported on stderr."""

from __future__ import annotations

import sys

OK = 0
FAILED = 1  # an error: the message names it
USAGE = 2  # a bad command line (argparse's own code)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports a command it interrupted
PROG = "msgclient"


class CliError(Exception):
    """An expected failure of a command (bad input, a failed send): reported on stderr as
    ``msgclient: error: <message>``, exit code 1, no traceback."""


class UsageError(CliError):
    """A command line that parses but cannot run (an option the broker has no use for,
    a bad ``--from``): reported as argparse reports its own errors, exit code 2."""


def report(message: str) -> None:
    """Tell the user on stderr, prefixed with the program's name."""
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def report_error(error: BaseException | str) -> int:
    """Report an error as ``msgclient: error: ...`` and return the exit code 1."""
    report(f"error: {error}")
    return FAILED
