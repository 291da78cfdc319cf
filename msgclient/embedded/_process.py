"""Run one broker binary as a child process that listens on a loopback port.

No broker may outlive us: every process started here is stopped at interpreter exit (which
also covers Ctrl-C), and on Linux the kernel sends it SIGTERM if Python dies without exiting
cleanly (SIGKILL, ``os._exit``).
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from msgclient.errors import MsgClientError

LOOPBACK = "127.0.0.1"
STOP_GRACE_SECONDS = 5.0
_POLL_INTERVAL_SECONDS = 0.02
_LOG_TAIL_BYTES = 4000
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

# The kernel sends the parent-death signal when the *thread* that forked the child ends, so
# every broker is forked from this one long-lived thread, never from a short-lived caller's.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="msgclient-broker-spawner")
_running: set[BrokerProcess] = set()


class BrokerStartError(MsgClientError, RuntimeError):
    """A broker could not start: its port is taken, it exited, or it never accepted a connection.

    The message ends with the tail of the broker's log.
    """


def free_loopback_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def executable(path: Path) -> Path:
    """Return ``path``, adding the execute bits if a wheel install dropped them."""
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


class BrokerProcess:
    """One broker child process: own process group, output appended to ``log_path``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        port: int,
        log_path: Path,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.port = port
        self.log_path = log_path
        self._argv = list(argv)
        self._cwd = cwd
        self._env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self, timeout: float) -> None:
        """Start the process and return once its port accepts a TCP connection."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._raise_if_port_taken()
        _install_exit_hook()
        with self.log_path.open("ab") as log:
            self._popen = _spawner.submit(
                subprocess.Popen,
                _dying_with_parent(self._argv),
                cwd=self._cwd,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            ).result()
        _running.add(self)
        try:
            self._wait_until_accepting(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, and reap it."""
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGTERM)
            try:
                popen.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
        # Forgotten only once reaped: if a Ctrl-C interrupts the wait, the exit hook retries.
        self._popen = None
        _running.discard(self)

    def _raise_if_port_taken(self) -> None:
        # SO_REUSEADDR: connections of a previous run in TIME_WAIT must not count as taken.
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((LOOPBACK, self.port))
            except OSError as exc:
                raise BrokerStartError(
                    f"{self.name} cannot listen on {LOOPBACK}:{self.port}: {exc.strerror}"
                ) from exc

    def _wait_until_accepting(self, timeout: float) -> None:
        assert self._popen is not None
        deadline = time.monotonic() + timeout
        while True:
            exit_code = self._popen.poll()
            if exit_code is not None:
                raise self._start_error(
                    f"exited with code {exit_code} before accepting connections"
                )
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise self._start_error(f"did not accept connections within {timeout:g} s")
            time.sleep(_POLL_INTERVAL_SECONDS)

    def _start_error(self, what: str) -> BrokerStartError:
        return BrokerStartError(
            f"{self.name} on {LOOPBACK}:{self.port} {what}.\n"
            f"Command: {' '.join(self._argv)}\n"
            f"Last lines of {self.log_path}:\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        with self.log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            return log.read().decode(errors="replace")


@functools.cache
def _install_exit_hook() -> None:
    # Registered on first start, after any temporary directory of the broker exists: atexit
    # runs hooks last-in first-out, so brokers stop before their temp dirs are deleted.
    atexit.register(_stop_all)


def _stop_all() -> None:
    for process in list(_running):
        process.stop()


# The parent-death signal is set by a small Python launcher that then execs the broker
# (same pid; the signal survives exec), not by a preexec_fn: a fork with a preexec_fn from
# a thread other than the main one made PySpark's py4j gateway answer the main thread from
# a new JVM thread afterwards, one with no active SparkSession, where writeStream could no
# longer find a Python data source (measured with Spark 4.3 and both embedded brokers).
_LAUNCHER = f"""
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl({_PR_SET_PDEATHSIG}, signal.SIGTERM)
if os.getppid() != int(sys.argv[1]):  # the parent died before prctl took effect
    os._exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def _dying_with_parent(argv: list[str]) -> list[str]:
    if sys.platform != "linux":
        return argv
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), *argv]
