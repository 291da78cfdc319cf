"""ConnectionPool: one connection attempt per key at a time, eviction, close."""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

import pytest

from msgclient.core.network import connection_pool
from msgclient.core.network.connection import Connection
from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.errors import AlreadyClosedError, ConnectError, ConnectionClosedError

WAIT = 1.0


class FakeConnection:
    """What the pool uses of a Connection: ``closed``, ``is_open``, ``close``."""

    def __init__(self, logical: str, physical: str) -> None:
        self.logical = logical
        self.physical = physical
        self.closed: asyncio.Future[ConnectionClosedError] = (
            asyncio.get_running_loop().create_future()
        )

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    def close(self) -> None:
        if not self.closed.done():
            self.closed.set_result(ConnectionClosedError("closed"))


class Connector:
    """A scripted connector: counts calls; can be held at a gate or made to fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.opened: list[FakeConnection] = []
        self.gate: asyncio.Event | None = None
        self.fail_with: BaseException | None = None

    async def __call__(self, logical: str, physical: str) -> Connection[Any]:
        self.calls.append((logical, physical))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        connection = FakeConnection(logical, physical)
        self.opened.append(connection)
        return cast(Connection[Any], connection)


def make_pool(per_broker: int = 1) -> tuple[ConnectionPool[Any], Connector]:
    connector = Connector()
    return ConnectionPool(connector, per_broker), connector


async def get(pool: ConnectionPool[Any], logical: str, physical: str | None = None) -> Any:
    async with asyncio.timeout(WAIT):
        return await pool.get_connection(logical, physical)


async def test_concurrent_callers_share_one_connection_attempt() -> None:
    pool, connector = make_pool()
    connector.gate = asyncio.Event()
    callers = [asyncio.ensure_future(get(pool, "pulsar://a:6650")) for _ in range(10)]
    await asyncio.sleep(0)
    connector.gate.set()
    connections = await asyncio.gather(*callers)
    assert len(connector.calls) == 1
    assert all(c is connections[0] for c in connections)
    assert len(pool) == 1
    assert await get(pool, "pulsar://a:6650") is connections[0]  # and later callers reuse it
    assert len(connector.calls) == 1


async def test_keys_are_logical_and_physical_address() -> None:
    pool, connector = make_pool()
    direct = await get(pool, "pulsar://a:6650")
    assert (direct.logical, direct.physical) == ("pulsar://a:6650", "pulsar://a:6650")
    other = await get(pool, "pulsar://b:6650")
    # Through a proxy: same socket address, another broker named in the handshake.
    proxied = await get(pool, "pulsar://b:6650", "pulsar://proxy:6650")
    assert len({id(direct), id(other), id(proxied)}) == 3
    assert connector.calls == [
        ("pulsar://a:6650", "pulsar://a:6650"),
        ("pulsar://b:6650", "pulsar://b:6650"),
        ("pulsar://b:6650", "pulsar://proxy:6650"),
    ]


async def test_closed_connection_is_evicted_and_reopened() -> None:
    pool, connector = make_pool()
    first = await get(pool, "pulsar://a:6650")
    first.close()
    # Even before the eviction callback runs, a closed connection is not handed out.
    second = await get(pool, "pulsar://a:6650")
    assert second is not first and second.is_open
    assert len(connector.calls) == 2
    await asyncio.sleep(0)  # the old connection's eviction must not remove the new one
    assert await get(pool, "pulsar://a:6650") is second
    assert len(pool) == 1


async def test_closed_connection_leaves_the_pool() -> None:
    pool, _ = make_pool()
    connection = await get(pool, "pulsar://a:6650")
    connection.close()
    await asyncio.sleep(0)
    assert len(pool) == 0


async def test_several_connections_per_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_pool, "random", random.Random(7))
    pool, connector = make_pool(per_broker=3)
    got = [await get(pool, "pulsar://a:6650") for _ in range(60)]
    assert len(connector.calls) == 3  # never more than connections_per_broker
    assert len({id(c) for c in got}) == 3  # and the load is spread over all of them
    assert len(pool) == 3


async def test_failing_connector_reaches_every_waiter_and_the_next_call_retries() -> None:
    pool, connector = make_pool()
    connector.gate = asyncio.Event()
    connector.fail_with = ConnectError("cannot connect to a:6650: refused")
    callers = [asyncio.ensure_future(get(pool, "pulsar://a:6650")) for _ in range(3)]
    await asyncio.sleep(0)
    connector.gate.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(r is connector.fail_with for r in results)
    assert len(connector.calls) == 1
    assert len(pool) == 0

    connector.fail_with = None
    connection = await get(pool, "pulsar://a:6650")
    assert connection.is_open
    assert len(connector.calls) == 2


async def test_a_caller_giving_up_does_not_cancel_the_attempt_of_the_others() -> None:
    pool, connector = make_pool()
    connector.gate = asyncio.Event()
    impatient = asyncio.ensure_future(pool.get_connection("pulsar://a:6650"))
    patient = asyncio.ensure_future(get(pool, "pulsar://a:6650"))
    await asyncio.sleep(0)
    impatient.cancel()
    await asyncio.sleep(0)
    connector.gate.set()
    connection = await patient
    assert connection.is_open
    assert impatient.cancelled()
    assert len(connector.calls) == 1


async def test_close_closes_every_connection_and_refuses_later_calls() -> None:
    pool, connector = make_pool()
    a = await get(pool, "pulsar://a:6650")
    b = await get(pool, "pulsar://b:6650")
    async with asyncio.timeout(WAIT):
        await pool.close()
    assert not a.is_open and not b.is_open
    assert len(pool) == 0
    with pytest.raises(AlreadyClosedError):
        await get(pool, "pulsar://a:6650")
    assert len(connector.calls) == 2


async def test_close_during_a_connection_attempt_fails_the_caller_as_closed() -> None:
    pool, connector = make_pool()
    connector.gate = asyncio.Event()
    caller = asyncio.ensure_future(get(pool, "pulsar://a:6650"))
    await asyncio.sleep(0)
    async with asyncio.timeout(WAIT):
        await pool.close()
    # The caller was not cancelled: the pool was closed under it, and it must say so.
    with pytest.raises(AlreadyClosedError):
        await caller
    assert not caller.cancelled()
