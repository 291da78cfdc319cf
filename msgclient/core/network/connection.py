"""One broker connection: bytes to an adapter session, requests correlated to futures.

The connection owns the socket, the request table and the timers (request timeouts and
keepalive); it knows nothing of any protocol. The adapter's ``ProtocolSession`` is sans-IO,
as h11 is: it turns the bytes received into events (``core/network/events.py``: answer,
refuse or hold a request, write bytes back) and routes everything else to the producers
and consumers registered on it; the connection acts on the events. An adapter subclasses
the connection for what is its own (a handshake, requests built from its messages). When
the socket dies, for any reason, every pending request fails at once with
ConnectionClosedError.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, cast

from msgclient.core.network.events import Answer, Hold, Refusal, Write
from msgclient.errors import (
    ConnectError,
    ConnectionClosedError,
    OperationTimeoutError,
    ProtocolError,
)

log = logging.getLogger(__name__)

WRITE_BUFFER_HIGH = 128 * 1024
# The most handed to the transport at once. asyncio (3.11) copies what the socket does not
# take into its own buffer; the rest waits in the connection's backlog by reference (its
# owner keeps it for a resend anyway), so a stuck peer costs at most the high mark plus
# one chunk of copies, however big the frames.
WRITE_CHUNK = 64 * 1024


class ProtocolSession(Protocol):
    """The adapter's sans-IO half of a connection: no socket, no loop, no futures."""

    def receive_data(self, data: bytes) -> Iterable[object]:
        """Decode and route; the events for the connection, produced as it iterates (so
        the answers before a bad frame still complete). ProtocolError on bytes that break
        the protocol."""

    def receive_eof(self) -> None:
        """The peer closed its side; raise TruncatedFrameError if a frame was cut short."""

    def keepalive_probe(self) -> bytes:
        """Bytes that make the peer answer (a ping), sent when the line has been quiet."""

    def connection_lost(self, error: ConnectionClosedError) -> None:
        """Tell every producer and consumer on this connection that it is gone."""


S = TypeVar("S", bound=ProtocolSession)
C_co = TypeVar("C_co", bound="Connection[Any]", covariant=True)
C = TypeVar("C", bound="Connection[Any]")


class ConnectionFactory(Protocol[C_co]):
    """Builds the connection ``open_connection`` connects: the class, or a function that
    adds a protocol's own arguments."""

    def __call__(
        self, *, address: str, operation_timeout: float, keepalive_interval: float
    ) -> C_co: ...


class Connection(asyncio.Protocol, Generic[S]):
    """An asyncio protocol for one socket. Build it with ``open_connection``."""

    def __init__(
        self,
        session: S,
        *,
        address: str,
        operation_timeout: float,
        keepalive_interval: float,
    ) -> None:
        self.session = session
        self.address = address
        self.operation_timeout = operation_timeout
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._request_ids = itertools.count()
        self._requests: dict[int, asyncio.Future[Any]] = {}
        # (deadline, request id) in the order sent; with one timeout for all requests the
        # deadlines are sorted, so one timer at the head checks them all.
        self._deadlines: deque[tuple[float, int]] = deque()
        self._timeout_timer: asyncio.TimerHandle | None = None
        # Requests the broker may rightly hold (a Kafka JoinGroup): while one is out, a
        # broker that answers in order cannot answer a probe either, and its caller bounds
        # the wait, so silence is not a stall.
        self._untimed: set[int] = set()
        self.writable = True  # False while the socket's buffer is above its high mark
        self._backlog: deque[bytes | memoryview] = deque()  # non-empty only while paused
        self._writable_listeners: list[Callable[[], None]] = []
        self._keepalive_interval = keepalive_interval
        self._keepalive_timer: asyncio.TimerHandle | None = None
        self._last_received = self._loop.time()
        self._probe_sent_at: float | None = None
        self._close_error: ConnectionClosedError | None = None
        self.closed: asyncio.Future[ConnectionClosedError] = self._loop.create_future()

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's are not subclasses of asyncio.Transport but behave
        # alike, so no isinstance check.
        self._transport = stream = cast(asyncio.Transport, transport)
        # Bytes wait in the senders (bounded by the memory limit), not in an unbounded
        # socket buffer, while the peer does not read.
        stream.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._last_received = self._loop.time()
        self._keepalive_timer = self._loop.call_later(self._keepalive_interval, self._keepalive)

    def data_received(self, data: bytes) -> None:
        self._last_received = self._loop.time()
        try:
            for event in self.session.receive_data(data):
                self._on_event(event)
        except ProtocolError as error:
            _log_protocol_error(self.address, error)
            self.abort(error)
        except Exception as error:
            # A bug while handling the bytes: the stream's state is unknown, so end it as
            # after a protocol error. Everything on it learns of it as a typed error; the
            # exception must not vanish into the event loop.
            log.exception("closing connection to %s: failed handling its data", self.address)
            failure = ProtocolError(f"failed handling data from {self.address}: {error!r}")
            failure.__cause__ = error
            self.abort(failure)

    def eof_received(self) -> bool | None:
        try:
            self.session.receive_eof()
        except ProtocolError as error:
            _log_protocol_error(self.address, error)
            self._close_error = _closed_by(self.address, error)
        return None  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        error = self._close_error or _closed_by(self.address, exc)
        self._close_error = error
        self._transport = None
        self._backlog.clear()
        for timer in (self._keepalive_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        requests, self._requests = self._requests, {}
        self._deadlines.clear()
        for future in requests.values():
            if not future.done():
                future.set_exception(error)
        self._on_closed(error)
        if not self.closed.done():
            self.closed.set_result(error)

    # -- the session's events -----------------------------------------------------------

    def _on_event(self, event: object) -> None:
        """Act on an event of the session; a protocol's subclass handles its own first."""
        if isinstance(event, Answer):
            if not self.resolve(event.request_id, event.result):
                log.debug(
                    "late or unknown answer to request %d from %s", event.request_id, self.address
                )
        elif isinstance(event, Refusal):
            self.reject(event.request_id, event.error)
        elif isinstance(event, Hold):
            self.hold(event.request_id)
        elif isinstance(event, Write):
            self.write(event.data)
        else:  # a bug: data_received ends the connection as after a protocol error
            raise TypeError(f"{self.address}: no handler for the session event {event!r}")

    def _on_closed(self, error: ConnectionClosedError) -> None:
        """The connection is gone (pending requests failed already, ``closed`` resolves
        next): the session tells its producers and consumers; a protocol's subclass drops
        its own I/O (a handshake under way) first."""
        self.session.connection_lost(error)

    # -- writing and requests -----------------------------------------------------------

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        # Not now: this runs inside the transport's own write handler, and a write from
        # here that fails makes asyncio (3.11) close the transport twice.
        self._loop.call_soon(self._resumed)

    def _resumed(self) -> None:
        if not self.writable:
            return
        self._write_backlog()
        if self.writable:
            for listener in list(self._writable_listeners):
                listener()

    def on_writable(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever the socket takes writes again after a pause."""
        self._writable_listeners.append(listener)

    @property
    def is_open(self) -> bool:
        return self._transport is not None and self._close_error is None

    def write(self, data: bytes | list[bytes]) -> None:
        """Queue bytes (or the pieces of one frame, in order: no join, no copy) for the
        socket; a closed connection drops them (the owner resends)."""
        if self._transport is None:
            return
        if isinstance(data, list):
            self._backlog.extend(data)
        else:
            self._backlog.append(data)
        if self.writable:
            self._write_backlog()

    def _write_backlog(self) -> None:
        backlog = self._backlog
        # A write that takes the transport's buffer over its high mark calls pause_writing
        # at once: the loop stops there, and resume_writing carries on.
        while backlog and self.writable and self._transport is not None:
            piece = backlog.popleft()
            if len(piece) > WRITE_CHUNK:
                view = memoryview(piece)
                backlog.appendleft(view[WRITE_CHUNK:])
                piece = view[:WRITE_CHUNK]
            self._transport.write(piece)

    def new_request_id(self) -> int:
        return next(self._request_ids)

    def send_request(
        self, request_id: int, data: bytes | list[bytes], *, timed: bool = True
    ) -> asyncio.Future[Any]:
        """Send ``data`` and return a future for the answer with ``request_id``.

        It fails with OperationTimeoutError after ``operation_timeout`` (unless ``timed`` is
        False: a request the broker may rightly hold longer, whose caller bounds the wait)
        and with ConnectionClosedError if the connection dies first.
        """
        future: asyncio.Future[Any] = self._loop.create_future()
        if not self.is_open:
            future.set_exception(self._close_error or ConnectionClosedError(self.address))
            return future
        self._requests[request_id] = future
        if timed:
            self._deadlines.append((self._loop.time() + self.operation_timeout, request_id))
            if self._timeout_timer is None:
                self._schedule_timeout_check()
        else:
            self._untimed.add(request_id)
            future.add_done_callback(lambda _: self._untimed.discard(request_id))
        self.write(data)
        return future

    def resolve(self, request_id: int, result: object) -> bool:
        """Complete a request; False if no such request is pending (late or unknown)."""
        future = self._requests.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True

    def hold(self, request_id: int) -> None:
        """The broker said it holds this request (a producer waiting for exclusive access):
        it waits for the answer from now on with no operation timeout (as the Java client)."""
        future = self._requests.get(request_id)
        if future is not None and request_id not in self._untimed:
            self._untimed.add(request_id)
            future.add_done_callback(lambda _: self._untimed.discard(request_id))

    def reject(self, request_id: int, error: BaseException) -> bool:
        future = self._requests.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_exception(error)
        return True

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self, error: BaseException) -> None:
        """Drop the socket at once (after a protocol error); pending requests fail."""
        self._close_error = _closed_by(self.address, error)
        if self._transport is not None:
            self._transport.abort()

    # -- timers -------------------------------------------------------------------------

    def _schedule_timeout_check(self) -> None:
        self._timeout_timer = None
        while self._deadlines and self._deadlines[0][1] not in self._requests:
            self._deadlines.popleft()  # answered already
        if self._deadlines:
            self._timeout_timer = self._loop.call_at(self._deadlines[0][0], self._check_timeouts)

    def _check_timeouts(self) -> None:
        now = self._loop.time()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, request_id = self._deadlines.popleft()
            if request_id in self._untimed:
                continue  # held by the broker since it was sent
            self.reject(
                request_id,
                OperationTimeoutError(
                    f"no answer from {self.address} within {self.operation_timeout:g}s "
                    f"(request {request_id})"
                ),
            )
        self._schedule_timeout_check()

    def _keepalive(self) -> None:
        """Probe after one quiet interval since the last byte received; abort when the
        probe is unanswered one interval later: a stall is found within two intervals of
        the last byte (timed from that byte, not from a grid since connect)."""
        if not self.is_open:
            return
        now = self._loop.time()
        interval = self._keepalive_interval
        if self._untimed:  # a request the broker may hold: its silence is no stall
            self._last_received = now
        probe = self._probe_sent_at
        if probe is not None and self._last_received < probe:
            if now - probe >= interval:
                self.abort(
                    ConnectionClosedError(
                        f"{self.address} did not answer a keepalive probe within {interval:g}s"
                    )
                )
                return
            wake = probe + interval
        elif now - self._last_received >= interval:
            self._probe_sent_at = now
            self.write(self.session.keepalive_probe())
            wake = now + interval
        else:
            self._probe_sent_at = None
            wake = self._last_received + interval
        self._keepalive_timer = self._loop.call_at(wake, self._keepalive)


def _log_protocol_error(address: str, error: ProtocolError) -> None:
    log.warning("closing connection to %s: %s: %s", address, type(error).__name__, error)


def _closed_by(address: str, cause: BaseException | None) -> ConnectionClosedError:
    if isinstance(cause, ConnectionClosedError):
        return cause
    reason = f": {cause}" if cause else ""
    error = ConnectionClosedError(f"connection to {address} closed{reason}")
    error.__cause__ = cause
    return error


async def open_connection(
    factory: ConnectionFactory[C],
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None = None,
    connect_timeout: float,
    operation_timeout: float,
    keepalive_interval: float,
) -> C:
    """Open a TCP (or TLS) connection to ``host:port`` within ``connect_timeout``."""
    loop = asyncio.get_running_loop()
    address = f"{host}:{port}"
    try:
        async with asyncio.timeout(connect_timeout):
            _, connection = await loop.create_connection(
                lambda: factory(
                    address=address,
                    operation_timeout=operation_timeout,
                    keepalive_interval=keepalive_interval,
                ),
                host,
                port,
                ssl=ssl_context,
                server_hostname=server_hostname if ssl_context else None,
            )
    except TimeoutError as error:
        raise ConnectError(
            f"cannot connect to {address}: timed out after {connect_timeout:g}s"
        ) from error
    except OSError as error:  # refused, unreachable, TLS handshake failure (ssl.SSLError)
        raise ConnectError(f"cannot connect to {address}: {error}") from error
    return connection
