"""What goes on the wire for access modes, Key_Shared policies and schemas: the same calls
made with the official client and with pulsar_compat, seen through a proxy, send the same
PRODUCER and SUBSCRIBE fields."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pulsar
from google.protobuf.message import Message as ProtobufMessage

from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.compat.command_tap import CommandTap
from tests.compat.conftest import QUIET
from tests.schema.twins import user_record

ACCESS_MODES = ["Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing"]


def make_the_calls(module: ModuleType, service_url: str, topic: str) -> None:
    """An ordinary program's producers, consumers and reader, written once for both."""
    user = user_record(module.schema)
    client = module.Client(service_url, operation_timeout_seconds=10, logger=QUIET)
    try:
        for mode in ACCESS_MODES:
            client.create_producer(
                topic,
                schema=module.schema.JsonSchema(user),
                access_mode=getattr(module.ProducerAccessMode, mode),
            ).close()
        sticky = module.ConsumerKeySharedPolicy(
            module.KeySharedMode.Sticky, True, [(0, 99), (200, 65535)]
        )
        client.subscribe(
            topic,
            "sticky",
            consumer_type=module.ConsumerType.KeyShared,
            schema=module.schema.AvroSchema(user),
            key_shared_policy=sticky,
        ).close()
        client.subscribe(
            topic,
            "auto-split",
            consumer_type=module.ConsumerType.KeyShared,
            schema=module.schema.StringSchema(),
            key_shared_policy=module.ConsumerKeySharedPolicy(),
        ).close()
        # A policy on a Shared consumer: the official client ignores it.
        client.subscribe(
            topic, "shared", consumer_type=module.ConsumerType.Shared, key_shared_policy=sticky
        ).close()
        client.create_reader(
            topic, module.MessageId.earliest, schema=module.schema.JsonSchema(user)
        ).close()
    finally:
        client.close()


def sent_fields(module: ModuleType, pulsar_broker: PulsarBroker, topic: str) -> list[Any]:
    """The fields these options set, in every PRODUCER and SUBSCRIBE the module sent."""
    tap = CommandTap(pulsar_broker.port)
    with tap:
        make_the_calls(module, tap.service_url, topic)
        commands = tap.wait_for(len(ACCESS_MODES) + 4)
    return [fields_of(c) for c in commands]


def fields_of(command: pb.BaseCommand) -> tuple[Any, ...]:
    if command.type == pb.BaseCommand.PRODUCER:
        producer = command.producer
        return ("PRODUCER", producer.producer_access_mode, optional(producer, "schema"))
    subscribe = command.subscribe
    return (
        "SUBSCRIBE",
        subscribe.subType,
        optional(subscribe, "keySharedMeta"),
        optional(subscribe, "schema"),
    )


def optional(message: ProtobufMessage, field: str) -> bytes | None:
    if not message.HasField(field):
        return None
    serialized: bytes = getattr(message, field).SerializeToString(deterministic=True)
    return serialized


def test_compat_sends_what_the_official_client_sends(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    theirs = sent_fields(pulsar, pulsar_broker, f"{topic}-official")
    ours = sent_fields(pulsar_compat, pulsar_broker, f"{topic}-compat")
    assert ours == theirs
    producers, subscribes = theirs[: len(ACCESS_MODES)], theirs[len(ACCESS_MODES) :]
    assert [p[1] for p in producers] == [pb.ProducerAccessMode.Value(m) for m in ACCESS_MODES]
    assert all(p[2] for p in producers)  # the JSON schema
    sticky, auto_split, shared, reader = subscribes
    meta = pb.KeySharedMeta.FromString(sticky[2])
    assert meta.keySharedMode == pb.STICKY and meta.allowOutOfOrderDelivery
    assert [(r.start, r.end) for r in meta.hashRanges] == [(0, 99), (200, 65535)]
    assert pb.Schema.FromString(sticky[3]).type == pb.Schema.Avro
    assert pb.KeySharedMeta.FromString(auto_split[2]).keySharedMode == pb.AUTO_SPLIT
    assert pb.Schema.FromString(auto_split[3]).type == pb.Schema.String
    assert shared[1:] == (pb.CommandSubscribe.Shared, None, None)  # policy dropped, bytes
    assert pb.Schema.FromString(reader[3]).type == pb.Schema.Json
