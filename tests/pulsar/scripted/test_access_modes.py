"""Producer access modes: the field in PRODUCER as the official client writes it, and the
broker's answers (ProducerBusy, ProducerFenced, a WaitForExclusive producer held past the
operation timeout, the topic epoch on reconnect).

pulsar-lite does not support access modes (brokers.md): it ignores the field, and two
Exclusive producers both register and send there (checked below, for the official client
too). The broker's answers are therefore scripted.
"""

from __future__ import annotations

import asyncio

import pulsar
import pytest

import msgclient
from msgclient import ProducerAccessMode, ProducerBusyError, ProducerFencedError
from msgclient.embedded import PulsarBroker
from tests.pulsar.helpers import WireTap, official_client, within
from tests.pulsar.scripted.conftest import NO_RETRY, MakeClient
from tests.pulsar.scripted.official_wire import official_command
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    close_producer,
    error,
    pb,
    producer_success,
)

TOPIC = "persistent://public/default/scripted-access-modes"
OFFICIAL = {mode: getattr(pulsar.ProducerAccessMode, mode.name) for mode in ProducerAccessMode}


def test_names_and_numbers_are_the_official_ones() -> None:
    assert {m.name: m.value for m in ProducerAccessMode} == {
        name: int(value) for name, value in pulsar.ProducerAccessMode.__members__.items()
    }
    assert {m.name: m.value for m in ProducerAccessMode} == dict(pb.ProducerAccessMode.items())


@pytest.mark.parametrize("mode", list(ProducerAccessMode), ids=lambda m: m.name)
async def test_producer_command_field_is_the_official_clients(
    server: ScriptedPulsarServer, make_client: MakeClient, mode: ProducerAccessMode
) -> None:
    theirs = await official_command(
        server, Type.PRODUCER, lambda c: c.create_producer(TOPIC, access_mode=OFFICIAL[mode])
    )
    async with asyncio.timeout(WAIT):
        await make_client(server.url).create_producer(TOPIC, access_mode=mode)
    ours = server.commands(Type.PRODUCER)[-1].command
    assert ours.producer.producer_access_mode == theirs.producer.producer_access_mode == mode.value


async def test_default_is_shared(pulsar_broker: PulsarBroker, topic: str, wire: WireTap) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        await client.create_producer(topic)
    (command,) = wire.of_type(pb.BaseCommand.PRODUCER)
    assert command.producer.producer_access_mode == pb.Shared


async def test_bad_mode_is_refused(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match=r"access_mode=1 .*Exclusive"):
            await client.create_producer(topic, access_mode=1)


async def test_pulsar_lite_ignores_the_mode(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    """brokers.md quirk: no access modes on pulsar-lite. Both clients get a second
    Exclusive producer there; the field still goes out on the wire."""
    url = pulsar_broker.service_url
    with official_client(url) as official:
        official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
        official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    async with msgclient.Client(url) as client:
        first = await client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        second = await client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        await within(first.send(b"one"))
        await within(second.send(b"two"))
    modes = [c.producer.producer_access_mode for c in wire.of_type(pb.BaseCommand.PRODUCER)]
    assert modes == [pb.Exclusive, pb.Exclusive]


async def test_exclusive_refused_while_another_producer_is_connected(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.PRODUCER] = lambda conn, cmd: conn.send(
        error(cmd.producer.request_id, pb.ProducerBusy, "Topic has an existing exclusive producer")
    )
    client = make_client(server.url, **NO_RETRY)
    with pytest.raises(ProducerBusyError, match="existing exclusive producer"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC, access_mode=ProducerAccessMode.Exclusive)
    assert len(server.commands(Type.PRODUCER)) == 1  # not retried: it cannot succeed


async def test_wait_for_exclusive_waits_past_the_operation_timeout(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    """PRODUCER_SUCCESS with producer_ready=false holds the creation (no operation timeout
    from then on) until the broker sends the second PRODUCER_SUCCESS."""
    held: list[tuple[ServerConnection, pb.BaseCommand]] = []

    def hold(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        waiting = producer_success(cmd.producer.request_id, "exclusive-1")
        waiting.producer_success.producer_ready = False
        conn.send(waiting)
        held.append((conn, cmd))

    server.handlers[Type.PRODUCER] = hold
    client = make_client(server.url, operation_timeout_seconds=0.3)
    creating = asyncio.ensure_future(
        client.create_producer(TOPIC, access_mode=ProducerAccessMode.WaitForExclusive)
    )
    await server.wait_for(Type.PRODUCER)
    await asyncio.sleep(1.0)  # over three operation timeouts
    assert not creating.done()
    conn, cmd = held[0]
    conn.send(producer_success(cmd.producer.request_id, "exclusive-1"))
    producer = await within(creating)
    assert producer.producer_name == "exclusive-1" and producer.is_connected()
    assert cmd.producer.producer_access_mode == pb.WaitForExclusive
    await within(producer.send(b"now exclusive"))


async def test_fenced_producer_fails_its_messages_and_closes(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    """An ExclusiveWithFencing producer elsewhere took the topic: the broker closes ours,
    and its re-registration is refused with ProducerFenced; what was pending fails with it,
    and the producer stays closed (not retried)."""
    registrations = 0

    def register_once(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal registrations
        registrations += 1
        if registrations == 1:
            answer = producer_success(cmd.producer.request_id, "fenced-soon")
            answer.producer_success.topic_epoch = 7
            conn.send(answer)
        else:
            conn.send(error(cmd.producer.request_id, pb.ProducerFenced, "fenced by epoch 8"))

    server.handlers[Type.PRODUCER] = register_once
    server.handlers[Type.SEND] = lambda conn, cmd: None  # unconfirmed when the fence comes
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(
            TOPIC, access_mode=ProducerAccessMode.Exclusive, batching_enabled=False
        )
        pending = await producer.send_async(b"never confirmed")
        await server.wait_for(Type.SEND)
        (first,) = server.commands(Type.PRODUCER)
        first.connection.send(close_producer(first.command.producer.producer_id))
        with pytest.raises(ProducerFencedError, match="fenced by epoch 8"):
            await pending
    second = server.commands(Type.PRODUCER)[1].command.producer
    assert second.topic_epoch == 7  # the epoch the broker gave, sent back on reconnect
    assert second.producer_access_mode == pb.Exclusive
    assert not first.command.producer.HasField("topic_epoch")
    assert not producer.is_connected()
    await asyncio.sleep(0.3)
    assert registrations == 2
