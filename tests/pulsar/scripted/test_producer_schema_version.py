"""``Producer.schema_version``: the version the broker gave the producer's schema in
PRODUCER_SUCCESS, taken again at every registration; None when the broker gives none
(pulsar-lite answers an empty one: brokers.md, no schemas). The official Python client's
producer has no such accessor: this one is msgclient's own."""

from __future__ import annotations

import asyncio

import msgclient
from msgclient.embedded import PulsarBroker
from msgclient.schema_info import SchemaInfo, SchemaType
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.helpers import within
from tests.pulsar.scripted.conftest import MakeClient
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    producer_success,
)

TOPIC = "persistent://public/default/scripted-schema-version"
SCHEMA = SchemaInfo(SchemaType.STRING, "text")
V1, V2 = (b"\x00\x00\x00\x00\x00\x00\x00" + bytes((n,)) for n in (1, 2))  # Apache's 8 bytes


def answer_versions(server: ScriptedPulsarServer, versions: list[bytes]) -> None:
    """PRODUCER_SUCCESS with the next of ``versions`` at each registration."""

    def answer(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        reply = producer_success(cmd.producer.request_id, "versioned")
        reply.producer_success.schema_version = versions.pop(0)
        conn.send(reply)

    server.handlers[Type.PRODUCER] = answer


async def test_the_brokers_schema_version_is_exposed_and_renewed_on_reconnect(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    answer_versions(server, [V1, V2])
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, schema=SCHEMA)
        assert producer.schema_version == V1
        server.connections[0].abort()  # the producer registers again, on a new connection
        await producer.send(b"x")  # written once the producer is registered again
    assert producer.schema_version == V2


async def test_none_when_the_broker_gives_no_schema_version(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC)
    assert producer.schema_version is None


async def test_pulsar_lites_empty_schema_version_is_none(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await within(client.create_producer(topic, schema=SCHEMA))
        assert producer.schema_version is None
