"""Schemas on the wire: ``schema=SchemaInfo(...)`` goes in PRODUCER and SUBSCRIBE byte for
byte as the official client writes it (captured on a scripted server), nothing for raw
bytes, and the schema version the broker answers goes in every message's metadata.

pulsar-lite does not support schemas (brokers.md): it accepts the field and ignores it
(checked below), and answers no schema version, so that part is scripted.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, BytesSchema, Integer, JsonSchema, Record, String
from pulsar.schema import StringSchema as OfficialStringSchema

import msgclient
from msgclient.embedded import PulsarBroker
from msgclient.schema_info import SchemaInfo, SchemaType
from protocols.pulsarwire.framing import encode_payload_command
from tests.pulsar.helpers import SHARED_FROM_EARLIEST, WireTap, within
from tests.pulsar.scripted.conftest import MakeClient
from tests.pulsar.scripted.official_wire import official_command
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    pb,
    producer_success,
)

TOPIC = "persistent://public/default/scripted-schemas"


class Example(Record):
    name = String()
    count = Integer()


OFFICIAL_SCHEMAS = {
    "string": OfficialStringSchema(),
    "json": JsonSchema(Example),
    "avro": AvroSchema(Example),
}


def as_schema_info(official: Any) -> SchemaInfo:
    """The official schema object's own description, as a SchemaInfo."""
    info = official.schema_info()
    return SchemaInfo(SchemaType[info.schema_type().name], info.name(), info.schema().encode())


def same_bytes(ours: pb.Schema, theirs: pb.Schema) -> bool:
    return ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("kind", list(OFFICIAL_SCHEMAS))
async def test_producer_schema_is_the_official_clients(
    server: ScriptedPulsarServer, make_client: MakeClient, kind: str
) -> None:
    official = OFFICIAL_SCHEMAS[kind]
    theirs = await official_command(
        server, Type.PRODUCER, lambda c: c.create_producer(TOPIC, schema=official)
    )
    async with asyncio.timeout(WAIT):
        await make_client(server.url).create_producer(TOPIC, schema=as_schema_info(official))
    ours = server.commands(Type.PRODUCER)[-1].command.producer
    assert theirs.producer.HasField("schema") and ours.HasField("schema")
    assert same_bytes(ours.schema, theirs.producer.schema)


@pytest.mark.parametrize("kind", list(OFFICIAL_SCHEMAS))
async def test_subscribe_and_reader_schema_are_the_official_clients(
    server: ScriptedPulsarServer, kind: str
) -> None:
    official = OFFICIAL_SCHEMAS[kind]
    theirs_sub = await official_command(
        server, Type.SUBSCRIBE, lambda c: c.subscribe(TOPIC, "sub", schema=official)
    )
    theirs_reader = await official_command(
        server,
        Type.SUBSCRIBE,
        lambda c: c.create_reader(TOPIC, pulsar.MessageId.earliest, schema=official),
    )
    async with msgclient.Client(server.url, operation_timeout_seconds=WAIT) as client:
        await client.subscribe(TOPIC, "sub", schema=as_schema_info(official))
        await client.create_reader(
            TOPIC, msgclient.InitialPosition.Earliest, schema=as_schema_info(official)
        )
    ours_sub, ours_reader = (r.command.subscribe for r in server.commands(Type.SUBSCRIBE)[-2:])
    assert same_bytes(ours_sub.schema, theirs_sub.subscribe.schema)
    assert same_bytes(ours_reader.schema, theirs_reader.subscribe.schema)


@pytest.mark.parametrize("schema", [None, SchemaInfo(SchemaType.NONE)], ids=["none", "NONE"])
async def test_raw_bytes_send_no_schema_as_the_official_bytes_schema(
    server: ScriptedPulsarServer, make_client: MakeClient, schema: SchemaInfo | None
) -> None:
    theirs = await official_command(
        server, Type.PRODUCER, lambda c: c.create_producer(TOPIC, schema=BytesSchema())
    )
    client = make_client(server.url)
    async with asyncio.timeout(WAIT):
        await client.create_producer(TOPIC, schema=schema)
        await client.subscribe(TOPIC, "sub", schema=schema)
    assert not theirs.producer.HasField("schema")
    assert not server.commands(Type.PRODUCER)[-1].command.producer.HasField("schema")
    assert not server.commands(Type.SUBSCRIBE)[-1].command.subscribe.HasField("schema")


async def test_schema_properties_go_on_the_wire(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    info = SchemaInfo(SchemaType.KEY_VALUE, "KeyValue", b"kv", {"key.schema.type": "STRING"})
    async with asyncio.timeout(WAIT):
        await make_client(server.url).create_producer(TOPIC, schema=info)
    schema = server.commands(Type.PRODUCER)[-1].command.producer.schema
    assert (schema.name, schema.schema_data, schema.type) == ("KeyValue", b"kv", pb.Schema.KeyValue)
    assert [(p.key, p.value) for p in schema.properties] == [("key.schema.type", "STRING")]


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_schema_version_from_the_broker_goes_in_every_message(
    server: ScriptedPulsarServer, make_client: MakeClient, batching: bool
) -> None:
    version = b"\x00\x00\x00\x00\x00\x00\x00\x03"  # an Apache broker's 8-byte version

    def with_version(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        answer = producer_success(cmd.producer.request_id, "versioned")
        answer.producer_success.schema_version = version
        conn.send(answer)

    server.handlers[Type.PRODUCER] = with_version
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(
            TOPIC, schema=as_schema_info(OFFICIAL_SCHEMAS["json"]), batching_enabled=batching
        )
        futures = [await producer.send_async(b'{"name": "a"}') for _ in range(3)]
        await asyncio.gather(*futures)
    sends = server.commands(Type.SEND)
    assert sends and all(s.metadata is not None for s in sends)
    assert {s.metadata.schema_version for s in sends if s.metadata is not None} == {version}


async def test_no_schema_version_without_one_from_the_broker(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"x")
    (send,) = server.commands(Type.SEND)
    assert send.metadata is not None and not send.metadata.HasField("schema_version")


async def test_pulsar_lite_accepts_and_ignores_schemas(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    """brokers.md: no schemas on pulsar-lite. The field goes out, and the broker neither
    refuses it nor answers a schema version; messages flow as raw bytes."""
    info = as_schema_info(OFFICIAL_SCHEMAS["avro"])
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(topic, "sub", schema=info, **SHARED_FROM_EARLIEST)
        producer = await client.create_producer(topic, schema=info)
        await within(producer.send(b"avro bytes"))
        message = await within(consumer.receive())
    assert message.data() == b"avro bytes"
    # pulsar-lite answers an empty schema version: none, so the message carries none
    assert message.schema_version() is None
    (producer_command,) = wire.of_type(pb.BaseCommand.PRODUCER)
    (subscribe_command,) = wire.of_type(pb.BaseCommand.SUBSCRIBE)
    assert producer_command.producer.schema.type == pb.Schema.Avro
    assert subscribe_command.subscribe.schema.schema_data == info.definition


async def test_schema_must_be_a_schema_info(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match=r"schema=.*SchemaInfo"):
            await client.create_producer(topic, schema="string")
        with pytest.raises(msgclient.InvalidConfigurationError, match=r"schema=.*SchemaInfo"):
            await client.subscribe(topic, "sub", schema=OFFICIAL_SCHEMAS["string"])


def dispatch(consumer_id: int, entry_id: int, values: list[bytes], version: bytes) -> bytes:
    """A MESSAGE frame of one entry whose metadata carries a schema version."""
    command = pb.BaseCommand(
        type=Type.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=consumer_id, message_id=pb.MessageIdData(ledgerId=1, entryId=entry_id)
        ),
    )
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, schema_version=version
    )
    if len(values) == 1:
        return encode_payload_command(command, metadata.SerializeToString(), values[0])
    metadata.num_messages_in_batch = len(values)
    records = b""
    for value in values:
        single = pb.SingleMessageMetadata(payload_size=len(value)).SerializeToString()
        records += struct.pack(">I", len(single)) + single + value
    return encode_payload_command(command, metadata.SerializeToString(), records)


async def test_received_messages_carry_their_entrys_schema_version(
    server: ScriptedPulsarServer,
) -> None:
    async with msgclient.Client(server.url, operation_timeout_seconds=WAIT) as client:
        consumer = await client.subscribe(TOPIC, "sub")
        (subscribe,) = server.commands(Type.SUBSCRIBE)
        consumer_id = subscribe.command.subscribe.consumer_id
        subscribe.connection.write(
            dispatch(consumer_id, 0, [b"alone"], b"\x00\x01")
            + dispatch(consumer_id, 1, [b"b0", b"b1"], b"\x00\x02")
        )
        messages = [await within(consumer.receive()) for _ in range(3)]
    assert [(m.data(), m.schema_version()) for m in messages] == [
        (b"alone", b"\x00\x01"),
        (b"b0", b"\x00\x02"),
        (b"b1", b"\x00\x02"),
    ]
