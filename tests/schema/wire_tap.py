"""A TCP proxy in front of pulsar-lite that records the schema of every PRODUCER and
SUBSCRIBE command a client sends: what the official client really puts on the wire.

pulsar-lite answers lookups with its own address, so a client would leave the proxy after
the first lookup; the proxy sets ``proxy_through_service_url`` in the answers, which keeps
every command on the proxied connection.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

from msgclient.schema_info import SchemaInfo, SchemaType
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

FRAME_HEADER = struct.Struct(">II")  # total size, command size


class FrameSplitter:
    """Cuts a byte stream into frames; hands each command (and the bytes after it) on."""

    def __init__(self, on_frame: Callable[[pb.BaseCommand, bytes], bytes]) -> None:
        self._buffer = b""
        self._on_frame = on_frame

    def feed(self, data: bytes) -> bytes:
        """The frames completed by ``data``, as ``on_frame`` returns them."""
        self._buffer += data
        out = []
        while len(self._buffer) >= 4:
            total = struct.unpack_from(">I", self._buffer)[0]
            if len(self._buffer) < 4 + total:
                break
            frame, self._buffer = self._buffer[4 : 4 + total], self._buffer[4 + total :]
            size = struct.unpack_from(">I", frame)[0]
            command = pb.BaseCommand()
            command.ParseFromString(frame[4 : 4 + size])
            out.append(self._on_frame(command, frame[4 + size :]))
        return b"".join(out)


def frame(command: pb.BaseCommand, rest: bytes) -> bytes:
    body = command.SerializeToString()
    return FRAME_HEADER.pack(4 + len(body) + len(rest), len(body)) + body + rest


class SchemaTap:
    """``with SchemaTap(broker_port) as tap``: connect clients to ``tap.service_url``; each
    PRODUCER or SUBSCRIBE command adds (command name, its SchemaInfo or None) to
    ``tap.schemas``, in the order they were sent."""

    def __init__(self, broker_port: int) -> None:
        self._broker_port = broker_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.service_url = f"pulsar://127.0.0.1:{self._listener.getsockname()[1]}"
        self.schemas: list[tuple[str, SchemaInfo | None]] = []
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def __enter__(self) -> SchemaTap:
        self._threads[0].start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # shutdown, not just close: it wakes the threads blocked in accept and recv
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):  # already shut by the peer
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)
            assert not thread.is_alive(), "a proxy thread did not end"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed by __exit__
                return
            broker = socket.create_connection(("127.0.0.1", self._broker_port), timeout=5)
            broker.settimeout(None)
            self._sockets += [client, broker]
            for source, target, splitter in (
                (client, broker, FrameSplitter(self._record)),
                (broker, client, FrameSplitter(_proxy_lookups)),
            ):
                thread = threading.Thread(
                    target=_pump, args=(source, target, splitter), daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _record(self, command: pb.BaseCommand, rest: bytes) -> bytes:
        if command.type == pb.BaseCommand.PRODUCER:
            self.schemas.append(("PRODUCER", _schema_info(command.producer)))
        elif command.type == pb.BaseCommand.SUBSCRIBE:
            self.schemas.append(("SUBSCRIBE", _schema_info(command.subscribe)))
        return frame(command, rest)


def _schema_info(command: pb.CommandProducer | pb.CommandSubscribe) -> SchemaInfo | None:
    if not command.HasField("schema"):
        return None
    schema = command.schema
    return SchemaInfo(
        SchemaType(schema.type),
        schema.name,
        schema.schema_data,
        {p.key: p.value for p in schema.properties},
    )


def _proxy_lookups(command: pb.BaseCommand, rest: bytes) -> bytes:
    if command.type == pb.BaseCommand.LOOKUP_RESPONSE:
        command.lookupTopicResponse.proxy_through_service_url = True
    return frame(command, rest)


def _pump(source: socket.socket, target: socket.socket, splitter: FrameSplitter) -> None:
    while True:
        try:
            data = source.recv(65536)
            if not data:
                return
            target.sendall(splitter.feed(data))
        except OSError:
            return
