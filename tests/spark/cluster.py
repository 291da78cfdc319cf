"""A Spark standalone cluster on loopback from the pip-installed pyspark: a master and
workers, each a JVM of its own (``spark-class``), stopped (SIGTERM, then SIGKILL) on exit.

Every wait is bounded by ``START_TIMEOUT``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

import pyspark

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class StandaloneCluster:
    """``with StandaloneCluster(tmp, workers=2) as cluster: cluster.master_url``."""

    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1) -> None:
        self._work_dir = work_dir
        self._workers = workers
        self._cores = cores
        self._processes: list[subprocess.Popen[bytes]] = []
        self._port = free_port()
        self._ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self._port}"

    def __enter__(self) -> StandaloneCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start(self) -> None:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self._port),
            "--webui-port",
            str(self._ui_port),
        )
        self._wait(lambda state: True, "the master's web UI")
        for number in range(self._workers):
            work = self._work_dir / f"worker-{number}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker-{number}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self._cores),
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work),
                self.master_url,
            )
        self._wait(lambda state: state.get("aliveworkers") == self._workers, "the workers")

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        with (self._work_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [str(spark_class), main_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,  # its own process group: stopped with its children
            )
        self._processes.append(process)

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self._processes):
                raise RuntimeError(f"a cluster process exited; logs in {self._work_dir}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self._ui_port}/json/", timeout=2
                ) as answer:
                    state = json.load(answer)
                if ready(state):  # type: ignore[operator]
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{what} not ready within {START_TIMEOUT} s; logs in {self._work_dir}")

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        self._processes.clear()
