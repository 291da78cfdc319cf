"""Producing against a scripted broker: registration errors, broker-initiated closes,
connection loss, silence."""

from __future__ import annotations

import asyncio

import pytest

from msgclient import (
    BrokerError,
    OperationTimeoutError,
    ProducerBusyError,
    ProducerFencedError,
    SendTimeoutError,
)
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.pulsar.scripted.conftest import NO_RETRY, MakeClient
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    close_producer,
    error,
    never_answer,
    pb,
    producer_success,
)

TOPIC = "persistent://public/default/scripted-producer"


async def test_produce_and_receipt(server: ScriptedPulsarServer, make_client: MakeClient) -> None:
    server.last_sequence_id = 41
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        first = await producer.send(b"one", properties={"k": "v"})
        second = await producer.send(b"two")
    (registration,) = server.commands(Type.PRODUCER)
    assert producer.producer_name == f"broker-{registration.command.producer.producer_id}"
    assert (first, second) == (PulsarMessageId(1, 0, -1), PulsarMessageId(1, 1, -1))
    sends = server.commands(Type.SEND)
    assert [r.command.send.sequence_id for r in sends] == [42, 43]  # after the broker's last
    assert [r.payload for r in sends] == [b"one", b"two"]
    assert sends[0].metadata is not None
    assert [(p.key, p.value) for p in sends[0].metadata.properties] == [("k", "v")]
    assert producer.last_sequence_id == 43


async def test_broker_closing_the_producer_makes_it_register_again_and_resend(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    sends = 0

    def close_instead_of_the_first_receipt(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal sends
        sends += 1
        if sends <= 2:  # the broker unloads the topic with both messages unconfirmed
            if sends == 2:
                conn.send(close_producer(cmd.send.producer_id))
        else:
            server.answer_send(conn, cmd)

    server.handlers[Type.SEND] = close_instead_of_the_first_receipt
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        futures = [await producer.send_async(b"a"), await producer.send_async(b"b")]
        ids = await asyncio.gather(*futures)
    assert ids == [PulsarMessageId(1, 0, -1), PulsarMessageId(1, 1, -1)]

    registrations = [r.command.producer for r in server.commands(Type.PRODUCER)]
    assert len(registrations) == 2
    assert registrations[0].producer_id == registrations[1].producer_id
    # keeps the name it was given
    assert registrations[1].producer_name == f"broker-{registrations[0].producer_id}"
    assert registrations[1].epoch > registrations[0].epoch
    sent = [(r.command.send.sequence_id, r.payload) for r in server.commands(Type.SEND)]
    assert sent == [(0, b"a"), (1, b"b"), (0, b"a"), (1, b"b")]  # resent in order
    assert len(server.connections) == 1  # the connection itself stayed up


async def test_broker_closing_the_producer_right_after_registering_it(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    # The broker answers the re-registration and closes the producer again in the same
    # packet: the producer must notice the second close too, not think it is registered.
    registrations = 0

    def register(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal registrations
        registrations += 1
        producer = cmd.producer
        answer = producer_success(producer.request_id, f"broker-{producer.producer_id}")
        if registrations == 2:
            conn.send(answer, close_producer(producer.producer_id))
        else:
            conn.send(answer)

    sends = 0

    def close_on_first_send(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal sends
        sends += 1
        if sends == 1:
            conn.send(close_producer(cmd.send.producer_id))
        else:
            server.answer_send(conn, cmd)

    server.handlers[Type.PRODUCER] = register
    server.handlers[Type.SEND] = close_on_first_send
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        message_id = await producer.send(b"x")
    assert message_id == PulsarMessageId(1, 0, -1)
    assert registrations == 3


async def test_connection_loss_with_messages_pending_resends_them(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    sends = 0

    def hang_up_on_the_first_send(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal sends
        sends += 1
        if sends == 1:
            conn.abort()
        else:
            server.answer_send(conn, cmd)

    server.handlers[Type.SEND] = hang_up_on_the_first_send
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        assert await producer.send(b"again") == PulsarMessageId(1, 0, -1)
    assert len(server.connections) == 2
    assert [r.connection.index for r in server.commands(Type.PRODUCER)] == [0, 1]


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (pb.ProducerBusy, ProducerBusyError),
        (pb.ProducerFenced, ProducerFencedError),
        (pb.ServiceNotReady, BrokerError),
    ],
)
async def test_error_answer_to_producer_raises_the_typed_error(
    server: ScriptedPulsarServer,
    make_client: MakeClient,
    code: pb.ServerError,
    error_type: type[BrokerError],
) -> None:
    server.handlers[Type.PRODUCER] = lambda conn, cmd: conn.send(
        error(cmd.producer.request_id, code, "refused by script")
    )
    name = pb.ServerError.Name(code)
    with pytest.raises(error_type, match=f"{name}: refused by script") as caught:
        async with asyncio.timeout(WAIT):
            await make_client(server.url, **NO_RETRY).create_producer(TOPIC, producer_name="fixed")
    assert caught.value.code == name
    assert caught.value.broker_message == "refused by script"


async def test_transient_error_answer_to_producer_is_retried(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    refusals = 0

    def refuse_once(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal refusals
        if refusals == 0:
            refusals += 1
            conn.send(error(cmd.producer.request_id, pb.ServiceNotReady, "loading the topic"))
        else:
            server.answer_producer(conn, cmd)

    server.handlers[Type.PRODUCER] = refuse_once
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"after a retry")
    assert len(server.commands(Type.PRODUCER)) == 2


async def test_unanswered_registration_times_out(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.PRODUCER] = never_answer
    client = make_client(server.url, operation_timeout_seconds=0.1)
    with pytest.raises(OperationTimeoutError, match=r"within 0\.1s"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)


async def test_unconfirmed_send_fails_with_send_timeout(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.SEND] = never_answer
    client = make_client(server.url)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, send_timeout_millis=50)
        with pytest.raises(SendTimeoutError, match="50 ms"):
            await producer.send(b"lost")
    assert client.memory_used == 0
    assert producer.pending_count == 0


async def test_silent_broker_is_dropped_after_an_unanswered_ping(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.PING] = never_answer
    server.handlers[Type.SEND] = never_answer
    client = make_client(server.url, keep_alive_interval_seconds=0.05)
    async with asyncio.timeout(WAIT):
        # (A short send timeout: closing flushes until then, and nothing is ever confirmed.)
        producer = await client.create_producer(
            TOPIC, batching_enabled=False, send_timeout_millis=500
        )
        await producer.send_async(b"unanswered")
        # The first connection gets a probe, then is closed; the producer registers again
        # on a new connection and resends there.
        await server.wait_for(Type.PRODUCER, count=2)
        resent = await server.wait_for(Type.SEND, count=2)
    pings = server.commands(Type.PING)
    assert pings and pings[0].connection is server.connections[0]
    assert resent[1].connection is server.connections[1]
    assert resent[1].payload == b"unanswered"


async def test_close_unregisters_the_producer(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC)
        await producer.close()
    (closed,) = server.commands(Type.CLOSE_PRODUCER)
    (registered,) = server.commands(Type.PRODUCER)
    assert closed.command.close_producer.producer_id == registered.command.producer.producer_id


async def test_initial_subscription_name_travels_with_the_registration(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    async with asyncio.timeout(WAIT):
        await make_client(server.url).create_producer(TOPIC, initial_subscription_name="dlq-sub")
    (registration,) = server.commands(Type.PRODUCER)
    assert registration.command.producer.initial_subscription_name == "dlq-sub"
