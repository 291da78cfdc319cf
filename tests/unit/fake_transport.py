"""A transport that keeps what is written: a Connection driven by bytes, without a socket."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast

from msgclient.core.network.connection import Connection

C = TypeVar("C", bound=Connection[Any])


class FakeTransport:
    """What a Connection uses of an asyncio transport; closing it loses the connection on
    the next loop turn, as asyncio's transports do."""

    def __init__(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol
        self.written: list[bytes] = []
        self.closed = False
        self._wrote = asyncio.Event()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes | memoryview) -> None:
        self.written.append(bytes(data))
        self._wrote.set()

    async def wait_for(self, data: bytes) -> None:
        """Until ``data`` is written (as one write)."""
        while data not in self.written:
            self._wrote.clear()
            await self._wrote.wait()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    abort = close


def attach(connection: C) -> FakeTransport:
    """Connect ``connection`` to a FakeTransport."""
    transport = FakeTransport(connection)
    connection.connection_made(cast(asyncio.Transport, transport))
    return transport
