"""ConnectionPool: share connections per broker, open each at most once at a time.

Keyed by (logical address, physical address): through a proxy many logical brokers share
one physical address, and each still needs its own connection (the handshake names the
broker). ``connections_per_broker`` connections per key spread load over sockets.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from msgclient.core.network.connection import Connection
from msgclient.errors import AlreadyClosedError, ConnectionClosedError

C = TypeVar("C", bound=Connection[Any])  # a protocol's connection class
Connector = Callable[[str, str], Awaitable[C]]
PoolKey = tuple[str, str, int]
CLOSE_GRACE_SECONDS = 1.0  # how long close() lets connections flush what they buffered


class ConnectionPool(Generic[C]):
    """Connections by broker; a dead connection is evicted and the next caller reopens it.

    ``connector(logical, physical)`` opens a connection and runs the protocol handshake;
    concurrent callers for the same key wait on the same attempt.
    """

    def __init__(self, connector: Connector[C], connections_per_broker: int = 1) -> None:
        self._connector = connector
        self._per_broker = connections_per_broker
        self._connections: dict[PoolKey, asyncio.Task[C]] = {}
        self._closed = False
        self.opened = 0  # connections opened (handshake done) since the pool was made

    def __len__(self) -> int:
        return len(self._connections)

    @property
    def open_count(self) -> int:
        """Connections open now (not those still opening)."""
        tasks = self._connections.values()
        return sum(1 for t in tasks if t.done() and _open_connection(t) is not None)

    async def get_connection(self, logical: str, physical: str | None = None) -> C:
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        key = (logical, physical or logical, random.randrange(self._per_broker))
        task = self._connections.get(key)
        if task is None or (task.done() and _open_connection(task) is None):
            task = asyncio.ensure_future(self._open(key))
            self._connections[key] = task
        # shield: one caller giving up must not cancel the attempt the others wait on
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # close() cancels attempts in flight: their callers were not cancelled, the pool
            # was closed under them. A caller that is itself being cancelled re-raises.
            current = asyncio.current_task()
            if task.cancelled() and self._closed and not (current and current.cancelling()):
                raise AlreadyClosedError("the client is closed") from None
            raise

    async def _open(self, key: PoolKey) -> C:
        try:
            connection = await self._connector(key[0], key[1])
        except BaseException:
            if self._connections.get(key) is asyncio.current_task():  # not a newer attempt
                del self._connections[key]
            raise
        connection.closed.add_done_callback(lambda _: self._evict(key, connection))
        self.opened += 1
        return connection

    def _evict(self, key: PoolKey, connection: C) -> None:
        task = self._connections.get(key)
        if task is not None and task.done() and _result(task) is connection:
            del self._connections[key]

    def drop_all(self, reason: str) -> None:
        """Drop every connection, open or still opening, and stay usable: the next caller
        opens a new one. Their producers and consumers see the connection lost and
        reconnect (a cluster switch sends them all through a lookup on the new cluster).

        Dropped at once, not flushed: what they buffered is resent after the reconnect,
        and a cluster that is unreachable would never take the flush."""
        tasks, self._connections = list(self._connections.values()), {}
        error = ConnectionClosedError(reason)
        for task in tasks:
            # One still opening was asked for before the switch: drop it once it opens.
            task.add_done_callback(lambda done: _abort(done, error))

    async def close(self) -> None:
        """Close every connection; later ``get_connection`` calls fail with AlreadyClosedError."""
        self._closed = True
        tasks, self._connections = list(self._connections.values()), {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        connections = [c for c in map(_result, tasks) if c is not None]
        for connection in connections:
            connection.close()  # flushes what is buffered, then closes
        closing = [asyncio.shield(c.closed) for c in connections]
        if closing:
            # All together, briefly: a peer that stopped reading never takes the rest of
            # the buffer, and must not hold the client's close (nor keep the socket).
            _, still_open = await asyncio.wait(closing, timeout=CLOSE_GRACE_SECONDS)
            for connection in connections:
                if not connection.closed.done():
                    connection.abort(AlreadyClosedError("the client closed"))
            if still_open:
                await asyncio.wait(still_open, timeout=CLOSE_GRACE_SECONDS)


def _result(task: asyncio.Task[C]) -> C | None:
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()


def _abort(task: asyncio.Task[C], error: ConnectionClosedError) -> None:
    connection = _result(task)
    if connection is not None:
        connection.abort(error)


def _open_connection(task: asyncio.Task[C]) -> C | None:
    connection = _result(task)
    return connection if connection is not None and connection.is_open else None
