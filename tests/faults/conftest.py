"""Fixtures of the fault-injection tests: brokers behind a FaultProxy, and what to observe.

Every client here uses a short keepalive (``KEEPALIVE_S``) and operation timeout, so that a
fault is found in a second or two. ``Figures`` collects what each case measured (messages
lost and duplicated, detection times, memory growth); the session prints them at the end
(``-s`` or the terminal summary) and docs/reliability.md records one run.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from msgclient.core.network.connection import Connection
from msgclient.embedded import KafkaBroker, PulsarBroker
from msgclient.embedded._process import LOOPBACK, free_loopback_port
from msgclient.errors import ConnectionClosedError
from tests.faults.proxy import FaultProxy, ProxiedConnection, pulsar_proxy_rewriter
from tests.loop_lag import LoopLag, measuring

KEEPALIVE_S = 0.5
OPERATION_TIMEOUT_S = 3.0
# How late a timer may fire, and a callback run, on a loaded 2-core machine, beyond the
# lateness the test's own LoopLag saw (the loop_lag fixture).
LATE_S = 0.5
TIMEOUT = 20.0  # the bound of any single wait in these tests

FAST_CLIENT: dict[str, Any] = {
    "keep_alive_interval_seconds": KEEPALIVE_S,
    "operation_timeout_seconds": OPERATION_TIMEOUT_S,
    "connection_timeout_ms": 2_000,
    "initial_backoff_interval_ms": 50,
    "max_backoff_interval_ms": 500,
}


@pytest.fixture
async def loop_lag() -> AsyncIterator[LoopLag]:
    """How late the loop ran during the test (tests/loop_lag.py), with LATE_S as margin."""
    async with measuring(LATE_S) as lag:
        yield lag


# -- what the client's connections did -----------------------------------------------------


@attrs.frozen
class ClosedConnection:
    """One client connection that ended: when, its last byte received, and why."""

    address: str
    local_port: int  # of the client's socket (a proxy connection's client_port)
    closed_at: float  # loop.time(), which is time.monotonic()
    last_received: float
    error: ConnectionClosedError

    @property
    def silence(self) -> float:
        """Seconds from the last byte received to the close."""
        return self.closed_at - self.last_received


class ConnectionLog:
    """Every msgclient connection that closes during the test, in order; ``lag`` is how
    late the loop ran meanwhile."""

    def __init__(self, lag: LoopLag) -> None:
        self.closed: list[ClosedConnection] = []
        self.lag = lag
        self._changed = asyncio.Event()

    def add(self, closed: ClosedConnection) -> None:
        self.closed.append(closed)
        self._changed.set()

    async def _wait(self, condition: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def of(self, connection: ProxiedConnection) -> ClosedConnection | None:
        """The client's side of a proxied connection, if it closed."""
        return next((c for c in self.closed if c.local_port == connection.client_port), None)

    async def wait_for_closes(
        self, connections: list[ProxiedConnection], timeout: float
    ) -> list[ClosedConnection]:
        """Wait until the client closed its side of each of ``connections``."""
        await self._wait(lambda: all(self.of(c) is not None for c in connections), timeout)
        return [c for c in map(self.of, connections) if c is not None]

    def since(self, moment: float) -> list[ClosedConnection]:
        return [c for c in self.closed if c.closed_at >= moment]

    async def wait_for_close(self, after: float, timeout: float) -> ClosedConnection:
        """The first connection closed at or after ``after`` (time.monotonic())."""
        await self._wait(lambda: bool(self.since(after)), timeout)
        return self.since(after)[0]


@pytest.fixture
def connection_log(monkeypatch: pytest.MonkeyPatch, loop_lag: LoopLag) -> ConnectionLog:
    """Records each closing connection (wraps Connection.connection_lost)."""
    log = ConnectionLog(loop_lag)
    original = Connection.connection_lost

    def connection_lost(self: Connection[Any], exc: Exception | None) -> None:
        last = self._last_received
        transport = self._transport
        port = transport.get_extra_info("sockname")[1] if transport is not None else -1
        original(self, exc)
        error = self._close_error
        assert error is not None
        log.add(ClosedConnection(self.address, port, time.monotonic(), last, error))

    monkeypatch.setattr(Connection, "connection_lost", connection_lost)
    return log


# -- tasks ---------------------------------------------------------------------------------


def client_tasks() -> set[asyncio.Task[Any]]:
    """Tasks alive now, except the current one and the proxy's own."""
    current = asyncio.current_task()
    return {
        t
        for t in asyncio.all_tasks()
        if t is not current and not _task_name(t).startswith(("ProxiedConnection", "FaultProxy"))
    }


def _task_name(task: asyncio.Task[Any]) -> str:
    return str(getattr(task.get_coro(), "__qualname__", ""))


async def assert_no_leaked_tasks(before: set[asyncio.Task[Any]], timeout: float = 1.0) -> None:
    """Every task started since ``before`` ends within ``timeout`` (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        leaked = client_tasks() - before
        if not leaked:
            return
        if time.monotonic() > deadline:
            names = sorted(_task_name(t) for t in leaked)
            raise AssertionError(f"{len(leaked)} tasks outlived the client: {names}")
        await asyncio.sleep(0.02)


# -- brokers and proxies -------------------------------------------------------------------


@pytest.fixture
async def pulsar_proxy(pulsar_broker: PulsarBroker) -> AsyncIterator[FaultProxy]:
    """A proxy in front of the session's pulsar-lite, answering LOOKUPs as a Pulsar proxy."""
    async with FaultProxy(
        LOOPBACK, pulsar_broker.port, rewrite_to_client=pulsar_proxy_rewriter()
    ) as proxy:
        yield proxy


def pulsar_url(proxy: FaultProxy) -> str:
    return f"pulsar://{proxy.address}"


def kafka_url(proxy: FaultProxy) -> str:
    return f"kafka://{proxy.address}"


class ProxiedKafkaBroker(KafkaBroker):
    """A tansu broker whose Metadata answers name ``advertised_port`` (a proxy's) as its
    address, so that clients bootstrapped through the proxy stay on it.

    KafkaBroker always advertises its own listener; this overrides the private command line
    builder (the library change that would make it public: an ``advertised_port`` argument
    of KafkaBroker, used in ``_prepare`` for ``--advertised-listener-url``).
    """

    def __init__(self, advertised_port: int, port: int) -> None:
        super().__init__(port=port)
        self.advertised_port = advertised_port

    def _prepare(self, data_dir: Path, port: int) -> list[str]:
        argv = super()._prepare(data_dir, port)
        index = argv.index("--advertised-listener-url") + 1
        argv[index] = f"tcp://{LOOPBACK}:{self.advertised_port}"
        return argv


@attrs.define
class ProxiedKafka:
    broker: ProxiedKafkaBroker
    proxy: FaultProxy

    @property
    def url(self) -> str:
        return kafka_url(self.proxy)


@asynccontextmanager
async def start_proxied_kafka() -> AsyncIterator[ProxiedKafka]:
    """A tansu broker reachable (and advertised) only through a proxy; stopped on exit."""
    port = free_loopback_port()
    async with FaultProxy(LOOPBACK, port) as proxy:
        broker = ProxiedKafkaBroker(proxy.port, port)
        await asyncio.to_thread(broker.start)
        try:
            yield ProxiedKafka(broker, proxy)
        finally:
            await asyncio.to_thread(broker.stop)


@pytest.fixture
async def proxied_kafka() -> AsyncIterator[ProxiedKafka]:
    """A tansu broker of the test's own behind a proxy (start_proxied_kafka)."""
    async with start_proxied_kafka() as proxied:
        yield proxied


@attrs.frozen
class Target:
    protocol: str
    proxy: FaultProxy
    url: str
    producer_options: dict[str, Any]


@pytest.fixture(params=["pulsar", "kafka"])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    """A broker behind a proxy, of either protocol."""
    if request.param == "pulsar":
        broker: PulsarBroker = request.getfixturevalue("pulsar_broker")
        async with FaultProxy(
            LOOPBACK, broker.port, rewrite_to_client=pulsar_proxy_rewriter()
        ) as proxy:
            yield Target("pulsar", proxy, pulsar_url(proxy), {"batching_enabled": False})
    else:
        async with start_proxied_kafka() as kafka:
            yield Target("kafka", kafka.proxy, kafka.url, {"max_request_size": 2 * 1024 * 1024})


@pytest.fixture
def own_pulsar(make_pulsar_broker: Callable[..., PulsarBroker], tmp_path: Path) -> PulsarBroker:
    """A pulsar-lite of the test's own, with a data dir that survives a kill."""
    return make_pulsar_broker(data_dir=tmp_path / "pulsar")


async def kill_and_restart(broker: PulsarBroker | KafkaBroker, down_for: float = 0.3) -> None:
    """SIGKILL the broker's process group, reap it, and start it again on the same port."""
    pid = broker.pid
    assert pid is not None and broker.is_running
    os.killpg(pid, signal.SIGKILL)  # the broker runs in a session (and group) of its own
    deadline = time.monotonic() + 10
    while broker.is_running:  # is_running polls, which reaps the killed process
        assert time.monotonic() < deadline, "the killed broker did not exit"
        await asyncio.sleep(0.01)
    await asyncio.sleep(down_for)
    await asyncio.to_thread(broker.start)


# -- figures of the run --------------------------------------------------------------------


class Figures:
    """Lines of measured figures, printed at the end of the session."""

    lines: ClassVar[list[str]] = []

    @classmethod
    def add(cls, case: str, **values: object) -> None:
        shown = ", ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
        )
        cls.lines.append(f"{case}: {shown}")


@pytest.fixture(scope="session")
def figures() -> Iterator[type[Figures]]:
    yield Figures
    path = os.environ.get("FAULT_FIGURES")
    if path and Figures.lines:
        Path(path).write_text("\n".join(Figures.lines) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if Figures.lines:
        terminalreporter.section("fault figures")
        for line in Figures.lines:
            terminalreporter.write_line(line)


def assert_stall_detected(
    log: ConnectionLog, stalled: list[ProxiedConnection]
) -> list[tuple[float, float]]:
    """Each stalled connection was closed by the client within two keepalive intervals of
    the last byte it received, and not before a probe went unanswered for one interval
    (connection.py). Returns (client's view, proxy's view) of each silence, in seconds.

    Never early: a timer does not fire before its time, however busy the machine. The
    upper bound allows for the lateness of the two timers (probe, then close) as the
    test's LoopLag measured it."""
    views: list[tuple[float, float]] = []
    latest = 2 * KEEPALIVE_S + log.lag.allowance(timers=2)
    for connection in stalled:
        closed = log.of(connection)
        assert closed is not None, f"the client never closed {connection}"
        proxy_view = closed.closed_at - connection.last_forwarded_to_client
        assert 2 * KEEPALIVE_S - 0.05 <= closed.silence <= latest, (closed, log.lag.worst)
        assert proxy_view <= latest, (proxy_view, closed, log.lag.worst)
        views.append((closed.silence, proxy_view))
    return views


@pytest.fixture(autouse=True)
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Whatever reaches the event loop's exception handler during a test fails it: every
    failure must reach its caller as a typed error (a task's exception never retrieved, a
    callback that raised). Collected after a GC, which is when asyncio reports the former."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        yield errors
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert not errors, [f"{c.get('message')}: {c.get('exception')!r}" for c in errors]
