"""Interop on the embedded broker: what the official client produces with a schema, our
schemas decode (and encode to the same payload bytes), and what we encode, the official
consumer decodes with its schema.

pulsar-lite ignores schemas (brokers.md), so both directions meet on payload bytes:
msgclient's side sends and receives raw bytes, encoded and decoded with msgclient.schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pulsar
import pulsar.schema as official
import pytest
from google.protobuf import struct_pb2

import msgclient
import msgclient.schema as ours
from msgclient.embedded import PulsarBroker
from tests.pulsar.consume_helpers import produce, receive_n
from tests.pulsar.helpers import SHARED_FROM_EARLIEST, TIMEOUT, official_client
from tests.schema.test_matches_official import field_values
from tests.schema.twins import Color, user_record


def users(m: Any) -> list[Any]:
    """The same twelve users in module ``m``: every field type, set, unset and None."""
    user = user_record(m)
    address = type(user._fields["home"])
    return [
        user(
            name=f"user-{i}",
            age=20 + i,
            score=None if i % 3 == 0 else i / 7,
            blob=None if i % 2 else f"blob {i} ✓".encode(),
            active=i % 2 == 0,
            color=[Color.red, "green", 3, None][i % 4],
            home={"street": f"{i} Main St", "zip": 10_000 + i},
            work=None if i % 2 else address(street="Office Rd"),
            tags=[f"t{j}" for j in range(i % 4)],
            attrs={f"k{j}": j * 2**40 for j in range(i % 3)},
            **({"note": "ナ" * i} if i % 5 else {}),
        )
        for i in range(12)
    ]


TEXTS = ["", "plain", "ünïcödé ✓", "😀" * 50]
STRUCTS = [struct_pb2.Struct(fields={"n": struct_pb2.Value(number_value=i)}) for i in range(3)]

# kind -> (the schema in module m, the values in module m)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Sequence[Any]]]] = {
    "json": (lambda m: m.JsonSchema(user_record(m)), users),
    "avro": (lambda m: m.AvroSchema(user_record(m)), users),
    "string": (lambda m: m.StringSchema(), lambda m: TEXTS),
    "protobuf-native": (lambda m: m.ProtobufNativeSchema(struct_pb2.Struct), lambda m: STRUCTS),
}


def comparable(value: Any) -> Any:
    return field_values(value) if hasattr(value, "_fields") else value


def official_produce_blocking(url: str, topic: str, schema: Any, values: Sequence[Any]) -> None:
    with official_client(url) as client:
        producer = client.create_producer(topic, schema=schema)
        for value in values:
            producer.send(value)
        producer.close()


@pytest.mark.parametrize("kind", CASES)
async def test_the_official_producer_s_values_decode_with_our_schema(
    pulsar_broker: PulsarBroker, topic: str, kind: str
) -> None:
    make_schema, make_values = CASES[kind]
    their_values, our_values = make_values(official), make_values(ours)
    our_schema = make_schema(ours)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(topic, "ours", **SHARED_FROM_EARLIEST)
        await asyncio.wait_for(
            asyncio.to_thread(
                official_produce_blocking,
                pulsar_broker.service_url,
                topic,
                make_schema(official),
                their_values,
            ),
            TIMEOUT,
        )
        payloads = [m.data() for m in await receive_n(consumer, len(their_values))]

    assert payloads == [our_schema.encode(v) for v in our_values]  # byte for byte
    decoded = [our_schema.decode(p) for p in payloads]
    assert [comparable(v) for v in decoded] == [comparable(v) for v in their_values]
    assert decoded == list(our_values)


@pytest.mark.parametrize("kind", CASES)
async def test_our_encoded_values_decode_with_the_official_schema(
    pulsar_broker: PulsarBroker, topic: str, kind: str
) -> None:
    make_schema, make_values = CASES[kind]
    their_values, our_values = make_values(official), make_values(ours)
    their_schema, our_schema = make_schema(official), make_schema(ours)
    with official_client(pulsar_broker.service_url) as official_side:
        consumer = official_side.subscribe(
            topic,
            "theirs",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            schema=their_schema,
        )
        async with msgclient.Client(pulsar_broker.service_url) as client:
            await produce(client, topic, [our_schema.encode(v) for v in our_values])
        messages = await asyncio.wait_for(
            asyncio.to_thread(receive_blocking, consumer, len(our_values)), 2 * TIMEOUT
        )

    if kind == "avro":
        # msg.value() of an official Avro consumer first asks the broker for the writer's
        # schema; pulsar-lite never answers (no schema registry), so after the operation
        # timeout it decodes with its own schema, as this does without the wait.
        decoded = [their_schema.decode(m.data()) for m in messages]
    else:
        decoded = [m.value() for m in messages]
    assert [comparable(v) for v in decoded] == [comparable(v) for v in their_values]


def receive_blocking(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    messages = []
    for _ in range(count):
        message = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        consumer.acknowledge(message)
        messages.append(message)
    return messages
