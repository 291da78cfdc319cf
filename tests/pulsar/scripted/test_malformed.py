"""A server sending bytes that break the protocol: the error is typed and logged, pending
requests fail with ConnectionClosedError caused by it, and only that connection closes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from msgclient import (
    ChecksumMismatchError,
    ConnectionClosedError,
    FrameTooLargeError,
    MalformedFrameError,
    ProtocolError,
    TruncatedFrameError,
)
from tests.pulsar.scripted.conftest import NO_RETRY, MakeClient, MakeServer
from tests.pulsar.scripted.server import (
    GARBAGE,
    OVERSIZED_HEADER,
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    bad_checksum,
    lookup_connect,
    pb,
    truncated,
)

HEALTHY = "persistent://public/default/healthy"
BROKEN = "persistent://public/default/broken"

Misbehaviour = Callable[[ServerConnection, int], None]  # (connection, request id)


def send_garbage(conn: ServerConnection, _: int) -> None:
    conn.write(GARBAGE)


def send_bad_checksum(conn: ServerConnection, request_id: int) -> None:
    conn.write(bad_checksum(lookup_connect(request_id, "pulsar://x:1")))


def send_truncated_then_close(conn: ServerConnection, request_id: int) -> None:
    conn.write(truncated(lookup_connect(request_id, "pulsar://x:1")))
    conn.close()


def send_oversized_header(conn: ServerConnection, _: int) -> None:
    conn.write(OVERSIZED_HEADER)


MISBEHAVIOURS = [
    pytest.param(send_garbage, MalformedFrameError, "exceeds total_size", id="garbage"),
    pytest.param(send_bad_checksum, ChecksumMismatchError, "CRC32C mismatch", id="checksum"),
    pytest.param(send_truncated_then_close, TruncatedFrameError, "stream ended", id="truncated"),
    pytest.param(send_oversized_header, FrameTooLargeError, "exceeds the maximum", id="oversized"),
]


@pytest.mark.parametrize(("misbehave", "error_type", "text"), MISBEHAVIOURS)
async def test_protocol_error_closes_only_that_connection(
    make_server: MakeServer,
    make_client: MakeClient,
    caplog: pytest.LogCaptureFixture,
    misbehave: Misbehaviour,
    error_type: type[ProtocolError],
    text: str,
) -> None:
    service = await make_server(name="service")
    owner = await make_server(name="owner")

    def lookup(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        request_id = cmd.lookupTopic.request_id
        if cmd.lookupTopic.topic == BROKEN:
            misbehave(conn, request_id)
        else:
            conn.send(lookup_connect(request_id, owner.url))

    service.handlers[Type.LOOKUP] = lookup
    client = make_client(service.url, **NO_RETRY)
    async with asyncio.timeout(WAIT):
        healthy = await client.create_producer(HEALTHY, batching_enabled=False)

    caplog.set_level(logging.WARNING, logger="msgclient.core.network.connection")
    with pytest.raises(ConnectionClosedError) as caught:
        async with asyncio.timeout(WAIT):
            await client.create_producer(BROKEN)
    cause = caught.value.__cause__
    assert type(cause) is error_type
    assert text in str(cause)
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"{service.host_port}: {error_type.__name__}: " in m and text in m for m in logged
    ), logged

    # The producer's connection to the other broker was not touched...
    async with asyncio.timeout(WAIT):
        await healthy.send(b"still fine")
    assert len(owner.connections) == 1
    assert [r.payload for r in owner.commands(Type.SEND)] == [b"still fine"]
    # ... and the broken connection is replaced by a new one on the next use.
    async with asyncio.timeout(WAIT):
        await client.create_producer(HEALTHY + "-2")
    assert len(service.connections) == 2


async def test_another_client_keeps_working_while_one_connection_breaks(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    bad = await make_server(name="bad")
    good = await make_server(name="good")
    bad.handlers[Type.LOOKUP] = lambda conn, cmd: send_garbage(conn, 0)
    good_producer_client = make_client(good.url)
    async with asyncio.timeout(WAIT):
        good_producer = await good_producer_client.create_producer(HEALTHY, batching_enabled=False)
        with pytest.raises(ConnectionClosedError):
            await make_client(bad.url, **NO_RETRY).create_producer(BROKEN)
        await good_producer.send(b"unaffected")
    assert [r.payload for r in good.commands(Type.SEND)] == [b"unaffected"]


async def test_producer_survives_a_protocol_error_on_its_connection(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    sends = 0

    def first_receipt_is_garbage(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal sends
        sends += 1
        if sends == 1:
            conn.write(GARBAGE)
        else:
            server.answer_send(conn, cmd)

    server.handlers[Type.SEND] = first_receipt_is_garbage
    client = make_client(server.url)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(HEALTHY, batching_enabled=False)
        message_id = await producer.send(b"resent")
    assert message_id is not None
    sent = server.commands(Type.SEND)
    assert [r.payload for r in sent] == [b"resent", b"resent"]  # resent after reconnecting
    assert sent[0].connection is not sent[1].connection
    producers = server.commands(Type.PRODUCER)
    first, again = (r.command.producer.producer_id for r in producers)
    assert first == again  # the same producer registered again
