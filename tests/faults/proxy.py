"""A TCP proxy for fault injection between msgclient and a real broker.

``FaultProxy`` listens on 127.0.0.1:0 and forwards every accepted connection to the broker.
Each connection (``ProxiedConnection``) can, on command:

- ``cut()``: abort both sides now; ``cut(after_bytes=N, direction=...)`` forwards N more
  bytes of that direction first, and ``cut_mid_frame(direction)`` forwards the next frame
  (of at least ``min_frame_size`` bytes) up to half its body, so that the cut lands inside
  a frame whatever the chunking. ``reset="client"`` (``"server"``, ``"both"``) sends that
  side a TCP RST instead of a FIN.
- ``stall()``: stop forwarding both ways; both sockets stay open and nothing more is read
  (beyond what the proxy's stream buffer already took: at most 128 KiB each way).
- ``drip(chunk, interval)``: forward one ``chunk``-byte piece per ``interval`` (both ways).
- ``half_close("client" | "server")``: shut the write side toward the client (it reads EOF)
  or toward the server; what flows the other way is still forwarded.
- ``blackhole("client" | "server")``: drop every byte toward that side, silently: a
  half-open connection, where one peer's writes vanish and it is never told.
- ``stop_reading_from_client()``: read nothing more from the client, so its socket buffers
  fill while the server side stays healthy (a broker that stops reading).
- ``resume()``: undo stall, drip and stop-reading (a half-close or black hole stays).

Both protocols here frame with a 4-byte big-endian size before each frame (Pulsar's
totalSize, Kafka's size), so the proxy follows frame boundaries in each direction: it knows
whether a cut landed mid-frame (``CutReport``).

The proxy moves bytes and never parses a command, unless it is given a frame rewriter
(``pulsar_proxy_rewriter``: LOOKUP answers, as a real Pulsar proxy gives them). Every wait
in it is bounded by the caller (``wait_for_connections`` takes a timeout); its tasks end at
``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Literal

import attrs

_SIZE = struct.Struct(">I")
_READ_SIZE = 64 * 1024

# Which sides of a cut get a TCP RST (SO_LINGER 0) instead of a FIN.
Reset = Literal["client", "server", "both"] | None

# Takes one whole frame (size prefix included) and returns the bytes to send instead.
FrameRewriter = Callable[[bytes], bytes]


class Direction(enum.Enum):
    TO_SERVER = "client->server"
    TO_CLIENT = "server->client"


@attrs.define
class CutReport:
    """Where a cut landed: the direction whose bytes it ended, and the frame it was in."""

    direction: Direction | None
    at: float  # time.monotonic() of the cut
    frame_size: int | None = None  # size of the frame that was cut (body, without the prefix)
    bytes_of_frame_sent: int = 0  # of that frame, prefix included, that went through

    @property
    def mid_frame(self) -> bool:
        return self.frame_size is not None and 0 < self.bytes_of_frame_sent < self.frame_size + 4


class FrameTracker:
    """Follows 4-byte-size-prefixed frames in one byte stream."""

    def __init__(self) -> None:
        self._header = bytearray()
        self.frame_size: int | None = None  # body size of the frame in progress
        self.frame_offset = 0  # bytes of the current frame seen, prefix included
        self.frames = 0  # complete frames seen

    def starts(self, data: bytes) -> list[tuple[int, int]]:
        """Feed ``data``; return (offset in data, body size) of every frame whose size prefix
        completes inside it. The tracker's state then stands at the end of ``data``."""
        found: list[tuple[int, int]] = []
        position = 0
        end = len(data)
        while position < end:
            if self.frame_size is None:
                need = 4 - len(self._header)
                piece = data[position : position + need]
                self._header += piece
                position += len(piece)
                if len(self._header) == 4:
                    (self.frame_size,) = _SIZE.unpack(self._header)
                    self._header.clear()
                    self.frame_offset = 4
                    found.append((position - 4, self.frame_size))
                    if self.frame_size == 0:
                        self._finish()
                else:
                    self.frame_offset = len(self._header)
                continue
            remaining = self.frame_size + 4 - self.frame_offset
            take = min(remaining, end - position)
            position += take
            self.frame_offset += take
            if self.frame_offset == self.frame_size + 4:
                self._finish()
        return found

    def _finish(self) -> None:
        self.frame_size = None
        self.frame_offset = 0
        self.frames += 1

    @property
    def in_frame(self) -> tuple[int | None, int]:
        """(body size, bytes seen) of the frame in progress; (None, n) between frames."""
        if self.frame_size is None:
            return None, len(self._header)
        return self.frame_size, self.frame_offset


@attrs.define
class _Plan:
    """A pending cut of one direction."""

    after_bytes: int | None = None  # forward this many more bytes, then cut
    min_frame_size: int | None = None  # or: cut half way into the next frame this big
    reset: Reset = None


def _rewrite_frames(held: bytearray, rewrite: FrameRewriter) -> bytes:
    """Take the complete frames off the front of ``held``; return them rewritten."""
    out: list[bytes] = []
    start = 0
    while len(held) - start >= 4:
        (size,) = _SIZE.unpack_from(held, start)
        if len(held) - start - 4 < size:
            break
        out.append(rewrite(bytes(held[start : start + 4 + size])))
        start += 4 + size
    del held[:start]
    return b"".join(out)


class _Gate:
    """Whether one direction may read and forward, and how fast."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.drip: tuple[int, float] | None = None  # (chunk bytes, interval seconds)
        self.shut = False  # write side toward the destination shut: drop what arrives


def _fin_first(sock: Any) -> None:
    """Make the close of ``sock`` start with a FIN. Closing a socket with unread bytes in
    its receive buffer sends a RST instead, and whether bytes are waiting is a race: a
    "FIN" cut must not turn into a reset (pulsar-lite keeps the consumer of a reset
    connection: test_pulsar_lite_may_keep_a_consumer_whose_connection_was_reset)."""
    # asyncio hands out a TransportSocket, without recv: work on a duplicate of its fd.
    with socket.fromfd(sock.fileno(), sock.family, sock.type) as raw:
        raw.setblocking(False)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while raw.recv(_READ_SIZE):
                pass
        raw.shutdown(socket.SHUT_WR)


class ProxiedConnection:
    """One client connection and its upstream twin, with the pumps between them."""

    def __init__(
        self,
        number: int,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        server_reader: asyncio.StreamReader,
        server_writer: asyncio.StreamWriter,
        rewrite_to_client: FrameRewriter | None = None,
    ) -> None:
        self.number = number
        # The client's port: names the client's socket that this connection serves.
        self.client_port: int = client_writer.get_extra_info("peername")[1]
        self._rewrites = {Direction.TO_CLIENT: rewrite_to_client} if rewrite_to_client else {}
        self._readers = {Direction.TO_SERVER: client_reader, Direction.TO_CLIENT: server_reader}
        self._writers = {Direction.TO_SERVER: server_writer, Direction.TO_CLIENT: client_writer}
        self._gates = {d: _Gate() for d in Direction}
        self._plans: dict[Direction, _Plan] = {}
        self.trackers = {d: FrameTracker() for d in Direction}
        self.bytes = dict.fromkeys(Direction, 0)
        # time.monotonic() of the last byte forwarded each way
        self.last_forwarded = dict.fromkeys(Direction, time.monotonic())
        self.opened_at = time.monotonic()
        self.closed_at: float | None = None
        self.cut_report: CutReport | None = None
        self.closed = asyncio.Event()
        self._tasks = [
            asyncio.ensure_future(self._pump(d), loop=asyncio.get_running_loop()) for d in Direction
        ]

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else "open"
        return f"<ProxiedConnection #{self.number} {state} bytes={self.bytes}>"

    @property
    def is_open(self) -> bool:
        return not self.closed.is_set()

    @property
    def last_forwarded_to_client(self) -> float:
        """time.monotonic() of the last byte forwarded to the client."""
        return self.last_forwarded[Direction.TO_CLIENT]

    # -- commands -----------------------------------------------------------------------

    def cut(
        self,
        *,
        after_bytes: int | None = None,
        direction: Direction = Direction.TO_CLIENT,
        reset: Reset = None,
    ) -> None:
        """Abort both sides now, or after ``after_bytes`` more bytes of ``direction``."""
        if after_bytes is None:
            self._abort(CutReport(None, time.monotonic()), reset)
        else:
            self._plans[direction] = _Plan(after_bytes=after_bytes, reset=reset)

    def cut_mid_frame(
        self, direction: Direction, *, min_frame_size: int = 0, reset: Reset = None
    ) -> None:
        """Forward the next frame of ``direction`` whose body is at least ``min_frame_size``
        bytes up to half its body, then abort both sides."""
        self._plans[direction] = _Plan(min_frame_size=min_frame_size, reset=reset)

    def stall(self) -> None:
        for gate in self._gates.values():
            gate.open.clear()

    def stop_reading_from_client(self) -> None:
        self._gates[Direction.TO_SERVER].open.clear()

    def drip(self, chunk: int = 1, interval: float = 0.05) -> None:
        for gate in self._gates.values():
            gate.drip = (chunk, interval)

    def half_close(self, toward: str) -> None:
        """Shut the write side toward ``"client"`` or ``"server"``: that peer reads EOF.

        What the other peer sends afterwards toward it is read and dropped, as a kernel
        would for a socket whose write side is shut.
        """
        direction = {"client": Direction.TO_CLIENT, "server": Direction.TO_SERVER}[toward]
        gate = self._gates[direction]
        gate.shut = True
        writer = self._writers[direction]
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof() and not writer.transport.is_closing():
                writer.write_eof()

    def blackhole(self, toward: str) -> None:
        """Read and drop, without a word, every byte toward ``"client"`` or ``"server"``."""
        direction = {"client": Direction.TO_CLIENT, "server": Direction.TO_SERVER}[toward]
        self._gates[direction].shut = True

    def resume(self) -> None:
        for gate in self._gates.values():
            gate.drip = None
            gate.open.set()

    # -- pumping ------------------------------------------------------------------------

    async def _pump(self, direction: Direction) -> None:
        reader = self._readers[direction]
        writer = self._writers[direction]
        gate = self._gates[direction]
        tracker = self.trackers[direction]
        rewrite = self._rewrites.get(direction)
        held = bytearray()  # with a rewriter: the unfinished frame, until it completes
        try:
            while True:
                await gate.open.wait()
                data = await reader.read(_READ_SIZE)
                if not data:  # the peer shut its write side: pass the EOF on
                    if not gate.shut and writer.can_write_eof():
                        with contextlib.suppress(OSError, RuntimeError):
                            writer.write_eof()
                    gate.shut = True
                    return
                if rewrite is not None:
                    held += data
                    data = _rewrite_frames(held, rewrite)
                while data:
                    await gate.open.wait()  # a stall holds what was read before it, too
                    if gate.shut:
                        break
                    piece = data[: gate.drip[0]] if gate.drip else data
                    data = data[len(piece) :]
                    if not await self._pass(direction, writer, tracker, piece):
                        return
                    if gate.drip:
                        await asyncio.sleep(gate.drip[1])
        except (ConnectionError, OSError):
            self._abort(None, None)
        finally:
            if gate.shut and all(g.shut for g in self._gates.values()):
                self._abort(None, None)

    async def _pass(
        self, direction: Direction, writer: asyncio.StreamWriter, tracker: FrameTracker, data: bytes
    ) -> bool:
        """Forward ``data``, or the part of it before a planned cut; False once cut."""
        plan = self._plans.get(direction)
        cut_at = self._cut_point(plan, tracker, data) if plan else None
        if cut_at is None:
            tracker.starts(data)
            await self._forward(direction, writer, data)
            return True
        before = data[:cut_at]
        tracker.starts(before)
        size, offset = tracker.in_frame
        await self._forward(direction, writer, before)
        assert plan is not None
        self._abort(CutReport(direction, time.monotonic(), size, offset), plan.reset)
        return False

    def _cut_point(self, plan: _Plan, tracker: FrameTracker, data: bytes) -> int | None:
        """Where in ``data`` the plan cuts, or None to forward all of it (updating the plan)."""
        if plan.after_bytes is not None:
            if plan.after_bytes >= len(data):
                plan.after_bytes -= len(data)
                return None if plan.after_bytes else len(data)
            return plan.after_bytes
        assert plan.min_frame_size is not None
        # Look at the frames starting in this chunk without moving the real tracker.
        probe = FrameTracker()
        probe._header = bytearray(tracker._header)
        probe.frame_size, probe.frame_offset = tracker.frame_size, tracker.frame_offset
        for offset, size in probe.starts(data):
            if size >= plan.min_frame_size:
                middle = offset + 4 + max(1, size // 2)
                if middle < len(data):
                    return middle
                # The middle lies in a later chunk: cut after that many more bytes.
                plan.after_bytes, plan.min_frame_size = middle - len(data), None
                return None
        return None

    async def _forward(
        self, direction: Direction, writer: asyncio.StreamWriter, data: bytes
    ) -> None:
        if not data:
            return
        writer.write(data)
        await writer.drain()
        self.bytes[direction] += len(data)
        self.last_forwarded[direction] = time.monotonic()

    def _abort(self, report: CutReport | None, reset: Reset) -> None:
        if self.closed.is_set():
            return
        if report is not None:
            self.cut_report = report
        resets = {
            Direction.TO_CLIENT: reset in ("client", "both"),
            Direction.TO_SERVER: reset in ("server", "both"),
        }
        for direction, writer in self._writers.items():
            transport = writer.transport
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    if resets[direction]:
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    elif not transport.get_write_buffer_size():
                        _fin_first(sock)  # (with bytes still to write, abort drops them)
            transport.abort()
        self.closed_at = time.monotonic()
        self.closed.set()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def close(self) -> None:
        self._abort(None, None)
        await asyncio.gather(*self._tasks, return_exceptions=True)


class FaultProxy:
    """Forwards 127.0.0.1:<port> to ``upstream``; commands act on its connections.

    Use ``async with FaultProxy(host, port) as proxy``; clients connect to ``proxy.port``.
    ``rewrite_to_client`` (if set) sees every whole frame the server sends and returns what
    the client gets instead (a Pulsar proxy's LOOKUP answers, see ``pulsar_proxy_rewriter``).
    ``on_connect`` (if set) is called with each new connection before it forwards a byte,
    so a fault can be armed on connections a client opens later.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        rewrite_to_client: FrameRewriter | None = None,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._rewrite_to_client = rewrite_to_client
        self.connections: list[ProxiedConnection] = []
        self.refused = 0  # clients accepted but not forwarded (the upstream was down)
        self.on_connect: Callable[[ProxiedConnection], None] | None = None
        self._server: asyncio.Server | None = None
        self._new_connection = asyncio.Condition()
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        assert self._server is not None, "start the proxy first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def live(self) -> list[ProxiedConnection]:
        return [c for c in self.connections if c.is_open]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for connection in self.connections:
                await connection.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def wait_for_connections(self, count: int, timeout: float) -> list[ProxiedConnection]:
        """Wait until ``count`` connections are open; they, oldest first."""
        async with asyncio.timeout(timeout), self._new_connection:
            await self._new_connection.wait_for(lambda: len(self.live) >= count)
        return self.live

    # -- commands on every open connection ----------------------------------------------

    def stall(self) -> None:
        for connection in self.live:
            connection.stall()

    def resume(self) -> None:
        for connection in self.live:
            connection.resume()

    def cut(self, *, reset: Reset = None) -> None:
        for connection in self.live:
            connection.cut(reset=reset)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            try:
                async with asyncio.timeout(5):
                    server_reader, server_writer = await asyncio.open_connection(*self.upstream)
            except (OSError, TimeoutError):
                self.refused += 1
                writer.transport.abort()
                return
            connection = ProxiedConnection(
                len(self.connections),
                reader,
                writer,
                server_reader,
                server_writer,
                self._rewrite_to_client,
            )
            if self.on_connect is not None:
                self.on_connect(connection)
            self.connections.append(connection)
            async with self._new_connection:
                self._new_connection.notify_all()
            await connection.closed.wait()
            async with self._new_connection:
                self._new_connection.notify_all()
        finally:
            self._handlers.discard(task)


def pulsar_proxy_rewriter() -> FrameRewriter:
    """Make LOOKUP answers say ``proxy_through_service_url``, as a Pulsar proxy does.

    pulsar-lite answers every LOOKUP with its own address (brokers.md), so a client that
    looked a topic up through this proxy would then connect to the broker directly, around
    the proxy. With the flag the client keeps its socket on the proxy and names the broker
    in CONNECT's ``proxy_to_broker_url`` (protocols/pulsarwire/lookup.py), which pulsar-lite
    ignores. Only payload-less frames are decoded; everything else passes byte for byte.
    """
    from protocols.pulsarwire.framing import encode_command
    from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

    def rewrite(frame: bytes) -> bytes:
        total_size, command_size = struct.unpack_from(">II", frame)
        if total_size != command_size + 4:  # a payload command (MESSAGE): never a LOOKUP answer
            return frame
        command = pb.BaseCommand.FromString(frame[8:])
        if command.type != pb.BaseCommand.LOOKUP_RESPONSE:
            return frame
        command.lookupTopicResponse.proxy_through_service_url = True
        return encode_command(command)

    return rewrite
