"""What the official client sends in PRODUCER and SUBSCRIBE commands is what our schemas'
``schema_info()`` says (type, name, definition bytes, properties), and msgclient, given it,
sends the same."""

from __future__ import annotations

import asyncio
import time

import pulsar
import pulsar.schema as official
import pytest
from google.protobuf import type_pb2

import msgclient
import msgclient.schema as ours
from msgclient.embedded import PulsarBroker
from msgclient.schema_info import SchemaInfo
from tests.pulsar.helpers import TIMEOUT, official_client
from tests.schema.twins import user_record
from tests.schema.wire_tap import SchemaTap

SCHEMAS = {
    "bytes": lambda m: m.BytesSchema(),
    "string": lambda m: m.StringSchema(),
    "json": lambda m: m.JsonSchema(user_record(m)),
    "avro": lambda m: m.AvroSchema(user_record(m)),
    "avro-definition": lambda m: m.AvroSchema(
        None,
        schema_definition={
            "type": "record",
            "name": "Reading",
            "fields": [{"name": "ünïcode", "type": "int"}],
        },
    ),
    "protobuf-native": lambda m: m.ProtobufNativeSchema(type_pb2.Type),
}


@pytest.mark.parametrize("kind", SCHEMAS)
def test_our_schema_info_is_what_the_official_client_sends(
    pulsar_broker: PulsarBroker, topic: str, kind: str
) -> None:
    their_schema = SCHEMAS[kind](official)
    with SchemaTap(pulsar_broker.port) as tap, official_client(tap.service_url) as client:
        client.create_producer(topic, schema=their_schema).close()
        client.subscribe(topic, "sub", schema=their_schema).close()
        client.create_reader(topic, pulsar.MessageId.earliest, schema=their_schema).close()
        sent = wait_for(tap, 3)

    expected: SchemaInfo | None = SCHEMAS[kind](ours).schema_info()
    assert sent == [("PRODUCER", expected), ("SUBSCRIBE", expected), ("SUBSCRIBE", expected)]
    if kind != "bytes":  # the official client sends no schema for bytes
        assert expected is not None and expected.definition


def wait_for(tap: SchemaTap, count: int) -> list[tuple[str, SchemaInfo | None]]:
    deadline = time.monotonic() + TIMEOUT
    while len(tap.schemas) < count:
        assert time.monotonic() < deadline, f"only {tap.schemas} were sent"
        time.sleep(0.01)
    return tap.schemas


@pytest.mark.parametrize("kind", SCHEMAS)
async def test_msgclient_sends_our_schema_info_as_the_official_client(
    pulsar_broker: PulsarBroker, topic: str, kind: str
) -> None:
    expected = SCHEMAS[kind](ours).schema_info()
    with SchemaTap(pulsar_broker.port) as tap:
        async with msgclient.Client(tap.service_url) as client:
            producer = await client.create_producer(topic, schema=expected)
            consumer = await client.subscribe(topic, "sub", schema=expected)
            reader = await client.create_reader(
                topic, msgclient.InitialPosition.Earliest, schema=expected
            )
            for member in (producer, consumer, reader):
                await asyncio.wait_for(member.close(), TIMEOUT)
        sent = await asyncio.to_thread(wait_for, tap, 3)

    assert sent == [("PRODUCER", expected), ("SUBSCRIBE", expected), ("SUBSCRIBE", expected)]
