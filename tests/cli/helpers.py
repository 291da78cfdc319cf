"""Running the ``msgclient`` command in subprocesses, each with a timeout."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLI = (sys.executable, "-m", "msgclient")
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0  # the longest any one command may take
WAIT_SECONDS = 10.0


@dataclass
class Result:
    code: int
    out: bytes
    err: str

    def lines(self) -> list[bytes]:
        return self.out.splitlines()

    def records(self) -> list[dict[str, Any]]:
        """stdout as JSON lines."""
        return [json.loads(line) for line in self.out.splitlines()]


def command(*args: str) -> list[str]:
    return [*CLI, *args]


def start(*args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command(*args), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )


def finish(
    process: subprocess.Popen[bytes], stdin: bytes | None = None, timeout: float = TIMEOUT
) -> Result:
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        stderr = err.decode(errors="replace")
        raise AssertionError(f"{process.args!r} took over {timeout} s; stderr: {stderr}") from None
    return Result(process.returncode, out, err.decode(errors="replace"))


def run(*args: str, stdin: bytes = b"", timeout: float = TIMEOUT) -> Result:
    """``msgclient *args`` with ``stdin`` (a pipe, closed at its end)."""
    return finish(start(*args), stdin, timeout)


def run_all(commands: Sequence[Sequence[str]], stdin: bytes = b"") -> list[Result]:
    """Several commands at once (each costs an interpreter start): their results in order.
    Each gets ``stdin`` in turn, so a command that waits for another's output comes after."""
    processes = [start(*args) for args in commands]
    return [finish(process, stdin) for process in processes]


def start_shell(script: str) -> subprocess.Popen[bytes]:
    """A bash pipeline (``pipefail`` on); ``msgclient`` in it is this interpreter's CLI."""
    return subprocess.Popen(
        ["bash", "-c", f'set -o pipefail; msgclient() {{ {shlex.join(CLI)} "$@"; }}; {script}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )


def shell(script: str, timeout: float = TIMEOUT) -> Result:
    return finish(start_shell(script), None, timeout)


def wait_until(condition: Callable[[], bool], what: str, seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)
