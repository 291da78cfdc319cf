"""Connection: requests, timeouts, keepalive and failures, against a scripted loopback peer;
what it does with its session's events, with bytes over a transport that keeps what is
written (no socket).

The connection is protocol-agnostic, so these tests drive it with a toy line protocol:
the client sends ``REQ <id> <text>``; the peer answers ``ANS <id> <TEXT>`` (upper case)
and ``PONG`` to ``PING``. The request text can ask the peer to misbehave instead. The
session also reads a refusal (``ERR <id> <TEXT>``), a request held (``HOLD <id>``) and a
``PING`` (answered ``PONG`` by itself): the tests without a socket feed those.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from msgclient.core.network.connection import Connection, open_connection
from msgclient.core.network.events import Answer, Hold, Refusal, Write
from msgclient.errors import (
    BrokerError,
    ConnectError,
    ConnectionClosedError,
    MalformedFrameError,
    OperationTimeoutError,
    ProtocolError,
    TruncatedFrameError,
)
from tests.loop_lag import LoopLag
from tests.unit.fake_transport import FakeTransport, attach

WAIT = 2.0  # no wait in these tests should come close


class ToySession:
    """The client half of the toy protocol (a sans-IO ``ProtocolSession``)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.pongs = 0
        self.lost: list[ConnectionClosedError] = []

    def receive_data(self, data: bytes) -> Iterator[object]:
        self.buffer += data
        while b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
            kind, _, rest = line.partition(b" ")
            if kind == b"ANS":
                request_id, _, text = rest.partition(b" ")
                yield Answer(int(request_id), text.decode())
            elif kind == b"ERR":
                request_id, _, text = rest.partition(b" ")
                yield Refusal(int(request_id), BrokerError("Refused", text.decode()))
            elif kind == b"HOLD":
                yield Hold(int(rest))
            elif kind == b"PING":
                yield Write(b"PONG\n")
            elif kind == b"PONG":
                self.pongs += 1
            else:
                raise MalformedFrameError(f"unknown line {line!r}")

    def receive_eof(self) -> None:
        if self.buffer:
            raise TruncatedFrameError(f"stream ended inside a line: {self.buffer!r}")

    def keepalive_probe(self) -> bytes:
        return b"PING\n"

    def connection_lost(self, error: ConnectionClosedError) -> None:
        self.lost.append(error)


def toy_connection(
    *, address: str, operation_timeout: float, keepalive_interval: float
) -> Connection[ToySession]:
    return Connection(
        ToySession(),
        address=address,
        operation_timeout=operation_timeout,
        keepalive_interval=keepalive_interval,
    )


def request(connection: Connection[ToySession], text: str) -> asyncio.Future[Any]:
    request_id = connection.new_request_id()
    return connection.send_request(request_id, f"REQ {request_id} {text}\n".encode())


class Peer:
    """A loopback server playing the toy protocol's other half.

    The request text scripts the answer: ``slow`` answers after ``slow_delay``,
    ``silence`` never answers, ``hangup`` closes the socket, ``garbage`` sends a line the
    client cannot parse, ``truncate`` sends half an answer and closes; anything else is
    answered at once. ``answer_pings=False`` makes the peer ignore keepalive probes.
    """

    def __init__(self) -> None:
        self.answer_pings = True
        self.slow_delay = 0.2
        self.received: list[tuple[int, bytes]] = []  # (connection index, line)
        self.writers: list[asyncio.StreamWriter] = []
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self.writers:
            writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def wait_for_line(self, line: bytes, count: int = 1) -> None:
        async with asyncio.timeout(WAIT):
            while sum(1 for _, got in self.received if got == line) < count:
                self._changed.clear()
                await self._changed.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.writers)
        self.writers.append(writer)
        while line := (await reader.readline()).rstrip(b"\n"):
            self.received.append((index, line))
            self._changed.set()
            self._answer(line, writer)

    def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        if line == b"PING":
            if self.answer_pings:
                writer.write(b"PONG\n")
            return
        _, request_id, text = line.decode().split(" ", 2)
        answer = f"ANS {request_id} {text.upper()}\n".encode()
        if text == "silence":
            return
        if text == "hangup":
            writer.close()
        elif text == "garbage":
            writer.write(b"NONSENSE\n")
        elif text == "crash":  # well framed, but the session's handler fails on it
            writer.write(b"ANS not-a-number CRASH\n")
        elif text == "truncate":
            writer.write(answer[:5])
            writer.close()
        elif text == "slow":
            task = asyncio.ensure_future(self._later(writer, answer))
            self._tasks.add(task)
        else:
            writer.write(answer)

    async def _later(self, writer: asyncio.StreamWriter, answer: bytes) -> None:
        await asyncio.sleep(self.slow_delay)
        writer.write(answer)


Connect = Callable[..., Awaitable[Connection[ToySession]]]


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    peer = Peer()
    await peer.start()
    yield peer
    await peer.stop()


@pytest.fixture
async def connect(peer: Peer) -> AsyncIterator[Connect]:
    """Open connections to the peer (keyword arguments: timeouts); closed at teardown."""
    opened: list[Connection[ToySession]] = []

    async def open_(
        operation_timeout: float = WAIT, keepalive_interval: float = 30.0
    ) -> Connection[ToySession]:
        connection = await open_connection(
            toy_connection,
            "127.0.0.1",
            peer.port,
            ssl_context=None,
            connect_timeout=WAIT,
            operation_timeout=operation_timeout,
            keepalive_interval=keepalive_interval,
        )
        opened.append(connection)
        return connection

    yield open_
    for connection in opened:
        connection.close()
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*(c.closed for c in opened))


async def test_requests_are_resolved_by_their_answers(connect: Connect, peer: Peer) -> None:
    peer.slow_delay = 0.02
    connection = await connect()
    assert connection.is_open
    assert connection.address.startswith("127.0.0.1:")
    async with asyncio.timeout(WAIT):
        results = await asyncio.gather(
            request(connection, "hello"), request(connection, "slow"), request(connection, "bye")
        )
    assert list(results) == ["HELLO", "SLOW", "BYE"]  # the slow one answered last, still matched


async def test_request_times_out_and_the_connection_stays_usable(connect: Connect) -> None:
    connection = await connect(operation_timeout=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(OperationTimeoutError, match=r"no answer from 127\.0\.0\.1:\d+ within"):
        async with asyncio.timeout(WAIT):
            await request(connection, "silence")
    assert loop.time() - started >= 0.05 - 0.002
    assert connection.is_open
    async with asyncio.timeout(WAIT):
        assert await request(connection, "still there") == "STILL THERE"


async def test_late_answer_after_a_timeout_is_dropped(
    connect: Connect, peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="msgclient.core.network.connection")
    peer.slow_delay = 0.15
    connection = await connect(operation_timeout=0.05)
    slow = request(connection, "slow")
    with pytest.raises(OperationTimeoutError):
        async with asyncio.timeout(WAIT):
            await slow

    def late() -> list[str]:
        return [r.getMessage() for r in caplog.records if "late or unknown" in r.getMessage()]

    async with asyncio.timeout(WAIT):
        while not late():
            assert await request(connection, "tick") == "TICK"
    assert late() == [f"late or unknown answer to request 0 from {connection.address}"]
    assert connection.is_open


async def test_each_request_times_out_on_its_own_deadline(connect: Connect) -> None:
    connection = await connect(operation_timeout=0.1)
    loop = asyncio.get_running_loop()
    first = request(connection, "silence")
    first_sent = loop.time()
    await asyncio.sleep(0.05)
    second = request(connection, "silence")
    second_sent = loop.time()
    answered = request(connection, "quick")
    async with asyncio.timeout(WAIT):
        assert await answered == "QUICK"
        with pytest.raises(OperationTimeoutError):
            await first
        first_failed = loop.time()
        assert not second.done()  # its own deadline is later
        with pytest.raises(OperationTimeoutError):
            await second
    assert first_failed - first_sent >= 0.1 - 0.002
    assert loop.time() - second_sent >= 0.1 - 0.002


async def test_peer_closing_fails_every_pending_request_at_once(
    connect: Connect, peer: Peer
) -> None:
    connection = await connect()
    pending = [request(connection, "silence") for _ in range(3)]
    await peer.wait_for_line(b"REQ 2 silence")
    pending.append(request(connection, "hangup"))
    async with asyncio.timeout(WAIT):
        error = await connection.closed
    assert isinstance(error, ConnectionClosedError)
    assert all(f.done() for f in pending)  # failed together, before closed resolved
    for future in pending:
        assert future.exception() is error
    assert connection.session.lost == [error]
    assert not connection.is_open
    late = request(connection, "after")
    assert late.done() and late.exception() is error


async def test_close_fails_pending_requests(connect: Connect) -> None:
    connection = await connect()
    pending = request(connection, "silence")
    connection.close()
    with pytest.raises(ConnectionClosedError, match="closed"):
        async with asyncio.timeout(WAIT):
            await pending
    assert connection.closed.done()


async def test_silent_peer_gets_a_probe_then_is_dropped(connect: Connect, peer: Peer) -> None:
    peer.answer_pings = False
    interval = 0.1
    loop = asyncio.get_running_loop()
    connection = await connect(keepalive_interval=interval)
    opened = loop.time()
    pending = request(connection, "silence")
    await peer.wait_for_line(b"PING")
    probed = loop.time()
    assert probed - opened >= interval - 0.002
    async with asyncio.timeout(WAIT):
        error = await connection.closed
    # One silent interval brings only a probe: the drop comes a whole interval after it
    # (a lower bound: a timer never fires early, so no load makes this fail; whether the
    # connection is still open at some instant after the probe depends on the machine).
    assert loop.time() - opened >= 2 * interval - 0.002
    assert "keepalive" in str(error)
    assert pending.exception() is error
    assert [line for _, line in peer.received].count(b"PING") == 1


async def test_a_request_the_broker_may_hold_suspends_the_keepalive(
    connect: Connect, peer: Peer
) -> None:
    """A Kafka JoinGroup may be held for minutes, and the broker answers nothing else on
    that connection meanwhile: silence then is not a stall (the caller bounds the wait)."""
    peer.answer_pings = False
    interval = 0.05
    connection = await connect(keepalive_interval=interval)
    request_id = connection.new_request_id()
    held = connection.send_request(request_id, f"REQ {request_id} silence\n".encode(), timed=False)
    await asyncio.sleep(5 * interval)
    assert connection.is_open
    held.cancel()  # the caller gave up: silence counts again
    async with asyncio.timeout(WAIT):
        error = await connection.closed
    assert "keepalive" in str(error)


async def test_a_stall_is_found_within_two_intervals_of_the_last_byte(
    connect: Connect, peer: Peer
) -> None:
    """Timed from the last byte received, not from a grid since connect: a line that goes
    quiet just after a probe round is still dropped two intervals after its last byte."""
    peer.answer_pings = False
    interval = 0.2
    loop = asyncio.get_running_loop()
    lag = LoopLag(margin=0.05)
    try:
        connection = await connect(keepalive_interval=interval)
        await asyncio.sleep(interval * 0.7)
        await asyncio.wait_for(request(connection, "last words"), WAIT)  # the last byte
        last_byte = loop.time()
        async with asyncio.timeout(WAIT):
            await connection.closed
        stalled_for = loop.time() - last_byte
    finally:
        lag.stop()
    # Never early; late by at most what the loop itself ran late (two timers: the probe,
    # then the drop), plus a margin: a busy machine delays every timer on this loop.
    assert 2 * interval - 0.01 <= stalled_for <= 2 * interval + lag.allowance(timers=2)


async def test_answered_probes_keep_the_connection_open(connect: Connect, peer: Peer) -> None:
    connection = await connect(keepalive_interval=0.03)
    await peer.wait_for_line(b"PING", count=3)  # each answered: probing goes on
    assert connection.is_open
    assert connection.session.pongs >= 2


async def test_protocol_error_aborts_only_that_connection(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    broken = await connect()
    healthy = await connect()
    pending = request(broken, "silence")
    caplog.set_level(logging.WARNING, logger="msgclient.core.network.connection")
    trigger = request(broken, "garbage")
    with pytest.raises(ConnectionClosedError) as caught:
        async with asyncio.timeout(WAIT):
            await pending
    assert trigger.exception() is caught.value
    assert isinstance(caught.value.__cause__, MalformedFrameError)
    assert "NONSENSE" in str(caught.value)
    assert not broken.is_open
    assert any(
        "MalformedFrameError" in r.getMessage() and broken.address in r.getMessage()
        for r in caplog.records
    )
    assert healthy.is_open
    async with asyncio.timeout(WAIT):
        assert await request(healthy, "fine") == "FINE"


async def test_a_failing_handler_ends_the_connection_with_a_typed_error(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception other than ProtocolError while handling bytes (a bug) must not vanish
    into the event loop: the connection ends and what waited on it fails typed."""
    loop = asyncio.get_running_loop()
    loop_errors: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: loop_errors.append(context))
    try:
        connection = await connect()
        pending = request(connection, "silence")
        trigger = request(connection, "crash")
        with pytest.raises(ConnectionClosedError) as caught:
            async with asyncio.timeout(WAIT):
                await pending
        assert trigger.exception() is caught.value
    finally:
        loop.set_exception_handler(previous)
    assert isinstance(caught.value.__cause__, ProtocolError)
    assert isinstance(caught.value.__cause__.__cause__, ValueError)
    assert not connection.is_open
    assert loop_errors == []
    assert any("failed handling its data" in r.getMessage() for r in caplog.records)


async def test_stream_ending_inside_a_frame_fails_with_a_truncation_cause(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    connection = await connect()
    caplog.set_level(logging.WARNING, logger="msgclient.core.network.connection")
    with pytest.raises(ConnectionClosedError) as caught:
        async with asyncio.timeout(WAIT):
            await request(connection, "truncate")
    assert isinstance(caught.value.__cause__, TruncatedFrameError)
    assert any("TruncatedFrameError" in r.getMessage() for r in caplog.records)


async def test_refused_connection_raises_connect_error() -> None:
    # Bind a port, then free it: nothing listens there any more.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectError, match=rf"cannot connect to 127\.0\.0\.1:{port}"):
        await open_connection(
            toy_connection,
            "127.0.0.1",
            port,
            ssl_context=None,
            connect_timeout=WAIT,
            operation_timeout=WAIT,
            keepalive_interval=30,
        )


# -- the session's events, without a socket ------------------------------------------------


@pytest.fixture
async def attached() -> AsyncIterator[tuple[Connection[ToySession], FakeTransport]]:
    """A connection on a transport that keeps what is written; closed at teardown."""
    connection = toy_connection(address="peer:1", operation_timeout=0.05, keepalive_interval=30)
    transport = attach(connection)
    yield connection, transport
    connection.close()
    async with asyncio.timeout(WAIT):
        await connection.closed


Attached = tuple[Connection[ToySession], FakeTransport]


async def test_answers_complete_their_requests_in_any_order(
    attached: Attached, caplog: pytest.LogCaptureFixture
) -> None:
    connection, transport = attached
    caplog.set_level(logging.DEBUG, logger="msgclient.core.network.connection")
    first, second = request(connection, "one"), request(connection, "two")
    assert transport.written == [b"REQ 0 one\n", b"REQ 1 two\n"]
    connection.data_received(b"ANS 1 TWO\nANS 0 ONE\nANS 7 LATE\n")
    assert (first.result(), second.result()) == ("ONE", "TWO")
    assert "late or unknown answer to request 7 from peer:1" in caplog.text
    assert connection.is_open


async def test_a_refusal_fails_its_request(attached: Attached) -> None:
    connection, _ = attached
    refused = request(connection, "no")
    connection.data_received(b"ERR 0 NOT YOU\n")
    with pytest.raises(BrokerError, match="NOT YOU"):
        refused.result()
    assert connection.is_open


async def test_a_held_request_waits_past_the_operation_timeout(attached: Attached) -> None:
    connection, _ = attached
    held, timed = request(connection, "hold"), request(connection, "timed")
    connection.data_received(b"HOLD 0\n")
    await asyncio.sleep(0.1)  # twice the operation timeout
    with pytest.raises(OperationTimeoutError):
        timed.result()
    assert not held.done()
    connection.data_received(b"ANS 0 HOLD\n")
    assert held.result() == "HOLD"


async def test_bytes_the_session_answers_with_are_written(attached: Attached) -> None:
    connection, transport = attached
    connection.data_received(b"PING\nPING\n")
    assert transport.written == [b"PONG\n", b"PONG\n"]


async def test_answers_before_a_bad_line_complete_before_the_connection_ends(
    attached: Attached,
) -> None:
    """The session's events come as it decodes: an answer read together with bytes that
    break the protocol still completes its request."""
    connection, transport = attached
    answered, pending = request(connection, "one"), request(connection, "two")
    connection.data_received(b"ANS 0 ONE\nNONSENSE\nANS 1 TWO\n")
    assert answered.result() == "ONE"
    assert transport.closed
    async with asyncio.timeout(WAIT):
        await connection.closed
    with pytest.raises(ConnectionClosedError) as caught:
        pending.result()
    assert isinstance(caught.value.__cause__, MalformedFrameError)
