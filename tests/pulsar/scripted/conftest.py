"""Fixtures of the scripted-server tests: servers and clients that are cleaned up after."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from msgclient import Client
from tests.pulsar.scripted.server import ScriptedPulsarServer

# Fast failures and reconnects: every scripted exchange takes milliseconds.
FAST_CLIENT = {
    "operation_timeout_seconds": 2.0,
    "connection_timeout_ms": 2000,
    "initial_backoff_interval_ms": 10,
    "max_backoff_interval_ms": 100,
}

# A first backoff longer than the operation timeout: create_producer gives up at the first
# failure instead of retrying it, for tests that look at that failure.
NO_RETRY = {"initial_backoff_interval_ms": 60_000, "max_backoff_interval_ms": 60_000}

MakeServer = Callable[..., Awaitable[ScriptedPulsarServer]]
MakeClient = Callable[..., Client]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    """``await make_server(ssl_context=None, name="broker")``: a started scripted server."""
    servers: list[ScriptedPulsarServer] = []

    async def make(ssl_context: ssl.SSLContext | None = None, name: str = "broker") -> Any:
        server = await ScriptedPulsarServer(ssl_context, name).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.stop()


@pytest.fixture
async def server(make_server: MakeServer) -> ScriptedPulsarServer:
    return await make_server()


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """``make_client(url, **options)``: a Client with fast timeouts; closed at teardown."""
    clients: list[Client] = []

    def make(url: str, **options: Any) -> Client:
        client = Client(url, **{**FAST_CLIENT, **options})
        clients.append(client)
        return client

    yield make
    async with asyncio.timeout(5):
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
