"""PulsarConnection, the I/O half: the session's events acted on, driven by bytes over a
transport that keeps what is written (no socket)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from msgclient.errors import AuthenticationError, ConnectionClosedError, TopicNotFoundError
from protocols.pulsarwire.connection import AuthResponder, PulsarConnection
from protocols.pulsarwire.framing import FrameDecoder, encode_command
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.unit.fake_transport import FakeTransport, attach

ADDRESS = "broker-1:6650"
WAIT = 2.0
Type = pb.BaseCommand.Type


def wire(type_: int, **fields: Any) -> bytes:
    return encode_command(pb.BaseCommand(type=type_, **fields))  # type: ignore[arg-type]


CONNECTED = wire(
    Type.CONNECTED,
    connected=pb.CommandConnected(
        server_version="test", protocol_version=21, max_message_size=1024
    ),
)
CHALLENGE = wire(Type.AUTH_CHALLENGE, authChallenge=pb.CommandAuthChallenge())


def commands(transport: FakeTransport) -> list[pb.BaseCommand]:
    """The commands written so far."""
    return [frame.command for frame in FrameDecoder().feed(b"".join(transport.written))]


Open = Callable[..., Awaitable[tuple[PulsarConnection, FakeTransport]]]


@pytest.fixture
async def open_() -> AsyncIterator[Open]:
    """``await open_(auth_responder=None, operation_timeout=WAIT)``: a connection on a fake
    transport, closed at teardown."""
    opened: list[PulsarConnection] = []

    async def make(
        auth_responder: AuthResponder | None = None, operation_timeout: float = WAIT
    ) -> tuple[PulsarConnection, FakeTransport]:
        connection = PulsarConnection(
            address=ADDRESS,
            operation_timeout=operation_timeout,
            keepalive_interval=30.0,
            auth_responder=auth_responder,
        )
        opened.append(connection)
        return connection, attach(connection)

    yield make
    for connection in opened:
        connection.close()
        if not connection.connected.done():
            connection.connected.cancel()
        elif not connection.connected.cancelled():
            connection.connected.exception()  # retrieved: no "never retrieved" warning
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*(c.closed for c in opened))


async def test_connected_completes_the_handshake(open_: Open) -> None:
    connection, _ = await open_()
    assert not connection.connected.done()
    connection.data_received(CONNECTED)
    assert connection.connected.result().max_message_size == 1024
    assert connection.session.max_message_size == 1024


async def test_requests_are_written_and_answered_by_their_id(open_: Open) -> None:
    connection, transport = await open_()
    connection.data_received(CONNECTED)
    lookup = pb.CommandLookupTopic(topic="t", request_id=1)
    refused = connection.request(1, pb.BaseCommand(type=Type.LOOKUP, lookupTopic=lookup))
    unsubscribe = pb.CommandUnsubscribe(consumer_id=1, request_id=2)
    answered = connection.request(2, pb.BaseCommand(type=Type.UNSUBSCRIBE, unsubscribe=unsubscribe))
    assert [c.type for c in commands(transport)] == [Type.LOOKUP, Type.UNSUBSCRIBE]
    failed = pb.CommandLookupTopicResponse(
        request_id=1, response=pb.CommandLookupTopicResponse.Failed, error=pb.TopicNotFound
    )
    connection.data_received(
        wire(Type.SUCCESS, success=pb.CommandSuccess(request_id=2))
        + wire(Type.LOOKUP_RESPONSE, lookupTopicResponse=failed)
    )
    assert answered.result() == pb.CommandSuccess(request_id=2)
    with pytest.raises(TopicNotFoundError):
        refused.result()


async def test_a_producer_waiting_for_exclusive_access_is_not_timed_out(open_: Open) -> None:
    connection, _ = await open_(operation_timeout=0.05)
    connection.data_received(CONNECTED)
    producer = pb.CommandProducer(topic="t", producer_id=1, request_id=1)
    held = connection.request(1, pb.BaseCommand(type=Type.PRODUCER, producer=producer))
    success = pb.CommandProducerSuccess(request_id=1, producer_name="p", producer_ready=False)
    connection.data_received(wire(Type.PRODUCER_SUCCESS, producer_success=success))
    await asyncio.sleep(0.1)
    assert not held.done()
    success.producer_ready = True
    connection.data_received(wire(Type.PRODUCER_SUCCESS, producer_success=success))
    assert held.result().producer_name == "p"


async def test_ping_is_answered(open_: Open) -> None:
    connection, transport = await open_()
    connection.data_received(CONNECTED + wire(Type.PING, ping=pb.CommandPing()))
    assert [c.type for c in commands(transport)] == [Type.PONG]


async def test_a_refused_handshake_fails_and_closes(open_: Open) -> None:
    connection, transport = await open_()
    refusal = pb.CommandError(request_id=0, error=pb.AuthenticationError, message="bad token")
    connection.data_received(wire(Type.ERROR, error=refusal))
    with pytest.raises(AuthenticationError, match="bad token"):
        connection.connected.result()
    assert transport.closed


async def test_a_challenge_without_credentials_fails_the_handshake(open_: Open) -> None:
    connection, transport = await open_()
    connection.data_received(CHALLENGE)
    with pytest.raises(AuthenticationError, match="option authentication"):
        connection.connected.result()
    assert transport.closed


class Responder:
    """An auth responder the test lets answer."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def __call__(self) -> bytes:
        self.calls += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return b"answer %d" % self.calls


async def test_challenges_are_answered_once_at_a_time(open_: Open) -> None:
    responder = Responder()
    connection, transport = await open_(responder)
    connection.data_received(CHALLENGE + CHALLENGE)  # the second finds the first under way
    await asyncio.sleep(0)
    responder.release.set()
    connection.data_received(CONNECTED)
    async with asyncio.timeout(WAIT):
        await transport.wait_for(b"answer 1")
    assert connection.connected.done()
    connection.data_received(CHALLENGE)  # a refresh, once the first answer is written
    async with asyncio.timeout(WAIT):
        await transport.wait_for(b"answer 2")
    assert responder.calls == 2
    assert not transport.closed


async def test_a_failing_answer_fails_the_handshake_without_its_text(
    open_: Open, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="protocols.pulsarwire.connection")
    responder = Responder()
    responder.error = LookupError("secret-in-the-message")
    responder.release.set()
    connection, transport = await open_(responder)
    connection.data_received(CHALLENGE)
    async with asyncio.timeout(WAIT):
        with pytest.raises(LookupError):
            await connection.connected
    assert transport.closed
    (record,) = caplog.records
    assert record.getMessage() == (
        f"cannot answer the authentication challenge of {ADDRESS}: LookupError"
    )


async def test_a_failing_refresh_leaves_the_connection_to_the_broker(open_: Open) -> None:
    responder = Responder()
    responder.error = LookupError("expired")
    responder.release.set()
    connection, transport = await open_(responder)
    connection.data_received(CONNECTED + CHALLENGE)
    await asyncio.sleep(0.01)
    assert responder.calls == 1
    assert not transport.closed
    assert connection.connected.result().max_message_size == 1024


async def test_a_lost_connection_fails_the_handshake_and_drops_the_answer(open_: Open) -> None:
    responder = Responder()
    connection, transport = await open_(responder)
    connection.data_received(CHALLENGE)
    await asyncio.sleep(0)
    transport.close()
    async with asyncio.timeout(WAIT):
        with pytest.raises(ConnectionClosedError):
            await connection.connected
    responder.release.set()
    await asyncio.sleep(0.01)
    assert transport.written == []  # the answer was cancelled


async def test_frames_wait_in_order_while_the_socket_takes_no_writes(open_: Open) -> None:
    connection, transport = await open_()
    connection.write(b"first")
    assert transport.written == [b"first"]  # at once: nothing waits before it
    connection.pause_writing()
    connection.write(b"second")
    connection.write(b"third")
    await asyncio.sleep(0.01)
    assert transport.written == [b"first"]
    connection.resume_writing()
    await asyncio.sleep(0.01)
    assert transport.written == [b"first", b"second", b"third"]
