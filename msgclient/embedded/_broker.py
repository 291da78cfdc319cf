"""What every embedded broker shares: a data directory, a port kept across restarts, a process."""

from __future__ import annotations

import abc
import os
import tempfile
from pathlib import Path
from typing import Self

from msgclient.embedded._process import BrokerProcess, free_loopback_port

DEFAULT_START_TIMEOUT_SECONDS = 10.0


class EmbeddedBroker(abc.ABC):
    """A broker binary run on 127.0.0.1; subclasses lay out its files and build its command."""

    name: str  # also names the log file and the temporary data directory

    def __init__(self, data_dir: Path | None = None, port: int | None = None) -> None:
        self._given_data_dir = data_dir
        self._temp_dir: tempfile.TemporaryDirectory[str] | None = None
        self._port = port
        self._process: BrokerProcess | None = None

    @property
    @abc.abstractmethod
    def service_url(self) -> str:
        """The URL clients connect to."""

    @abc.abstractmethod
    def _prepare(self, data_dir: Path, port: int) -> list[str]:
        """Write the files the broker reads at start and return its command line."""

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1; chosen at the first start and kept by restart()."""
        if self._port is None:
            raise RuntimeError(f"{self.name} has not been started, so it has no port yet")
        return self._port

    @property
    def data_dir(self) -> Path:
        """The broker's files: the given directory, or a temporary one made at start."""
        if self._given_data_dir is not None:
            return self._given_data_dir
        if self._temp_dir is None:
            raise RuntimeError(f"{self.name} has not been started, so it has no data dir yet")
        return Path(self._temp_dir.name)

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.name}.log"

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_SECONDS) -> None:
        """Start the broker and return once it accepts TCP connections."""
        if self.is_running:
            raise RuntimeError(f"{self.name} is already running")
        self._stop_process()  # reaps a broker that exited on its own
        if self._given_data_dir is None and self._temp_dir is None:
            self._temp_dir = tempfile.TemporaryDirectory(
                prefix=f"msgclient-{self.name}-", ignore_cleanup_errors=True
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._port is None:
            self._port = free_loopback_port()
        process = BrokerProcess(
            self.name,
            self._prepare(self.data_dir, self._port),
            port=self._port,
            log_path=self.log_path,
            cwd=self.data_dir,
            env=self._environment(),
        )
        process.start(timeout)
        self._process = process

    def stop(self) -> None:
        """Stop the broker; delete its data directory if it is a temporary one we made."""
        self._stop_process()
        if self._temp_dir is not None:
            self._temp_dir.cleanup()
            self._temp_dir = None

    def restart(self, timeout: float = DEFAULT_START_TIMEOUT_SECONDS) -> None:
        """Stop and start again on the same port and data directory, so clients reconnect."""
        self._stop_process()
        self.start(timeout)

    def _stop_process(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def _environment(self) -> dict[str, str]:
        # Plain-text logs: the log tail goes into error messages.
        return {**os.environ, "NO_COLOR": "1"}

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
