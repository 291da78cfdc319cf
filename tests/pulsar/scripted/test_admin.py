"""The admin API on Pulsar against the scripted server: list_topics (GET_TOPICS_OF_NAMESPACE)
on the wire, its refusals, and describe_topics of a topic the broker does not know."""

from __future__ import annotations

import asyncio
import time

import pytest

from msgclient import (
    BrokerError,
    InvalidConfigurationError,
    OperationTimeoutError,
    TopicNotFoundError,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.scripted.conftest import MakeClient
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    Type,
    never_answer,
    partitioned_metadata,
    topics_of_namespace_response,
)

Mode = pb.CommandGetTopicsOfNamespace


async def test_list_topics_asks_for_every_domain_of_public_default_and_folds_partitions(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics = [
        "persistent://public/default/plain",
        # A partitioned topic is listed by its partitions, as a broker stores it.
        "persistent://public/default/orders-partition-1",
        "persistent://public/default/orders-partition-0",
        "persistent://public/default/orders-partition-2",
        "non-persistent://public/default/events-partition-0",
        "non-persistent://public/default/ticks",
        # Not a partition: the suffix is not a number.
        "persistent://public/default/odd-partition-x",
        "persistent://other/ns/elsewhere",  # another namespace: the server leaves it out
    ]
    async with asyncio.timeout(WAIT):
        listed = await make_client(server.url).admin().list_topics()
    assert listed == [
        "non-persistent://public/default/events",
        "non-persistent://public/default/ticks",
        "persistent://public/default/odd-partition-x",
        "persistent://public/default/orders",
        "persistent://public/default/plain",
    ]
    (sent,) = server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    request = sent.command.getTopicsOfNamespace
    assert request.namespace == "public/default"
    assert request.mode == Mode.ALL  # persistent and non-persistent, as pulsar-admin lists
    assert not request.HasField("topics_pattern")
    assert not request.HasField("topics_hash")


async def test_list_topics_of_another_namespace(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics = ["persistent://acme/orders/t", "persistent://public/default/u"]
    async with asyncio.timeout(WAIT):
        listed = await make_client(server.url).admin().list_topics("acme/orders")
    assert listed == ["persistent://acme/orders/t"]
    (sent,) = server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    assert sent.command.getTopicsOfNamespace.namespace == "acme/orders"


async def test_list_topics_of_an_empty_namespace(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    async with asyncio.timeout(WAIT):
        assert await make_client(server.url).admin().list_topics("acme/empty") == []


async def test_include_internal_changes_nothing_on_pulsar(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics = ["persistent://public/default/t"]
    admin = make_client(server.url).admin()
    async with asyncio.timeout(WAIT):
        with_internal = await admin.list_topics(include_internal=True)
        without = await admin.list_topics()
    assert with_internal == without == ["persistent://public/default/t"]
    modes = [
        r.command.getTopicsOfNamespace.mode for r in server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    ]
    assert modes == [Mode.ALL, Mode.ALL]


@pytest.mark.parametrize(
    "namespace",
    ["default", "public/default/extra", "", "public/", "/default", "persistent://public/default"],
)
async def test_a_bad_namespace_is_refused_before_sending(
    server: ScriptedPulsarServer, make_client: MakeClient, namespace: str
) -> None:
    admin = make_client(server.url).admin()
    with pytest.raises(InvalidConfigurationError, match="tenant/namespace") as caught:
        await admin.list_topics(namespace)
    assert repr(namespace) in str(caught.value)
    assert server.commands(Type.GET_TOPICS_OF_NAMESPACE) == []


async def test_an_error_answer_raises_a_typed_error_naming_the_namespace(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics_error = (pb.AuthorizationError, "Client is not authorized")
    admin = make_client(server.url).admin()
    with pytest.raises(BrokerError, match="acme/orders") as caught:
        async with asyncio.timeout(WAIT):
            await admin.list_topics("acme/orders")
    assert caught.value.code == "AuthorizationError"
    assert "Client is not authorized" in str(caught.value)
    # The refusal was one request's: the connection serves the next.
    server.namespace_topics_error = None
    server.namespace_topics = ["persistent://acme/orders/t"]
    async with asyncio.timeout(WAIT):
        assert await admin.list_topics("acme/orders") == ["persistent://acme/orders/t"]
    assert len(server.connections) == 1


async def test_no_answer_times_out_with_the_operation_timeout(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.GET_TOPICS_OF_NAMESPACE] = never_answer
    admin = make_client(server.url, operation_timeout_seconds=0.3).admin()
    started = time.monotonic()
    with pytest.raises(OperationTimeoutError, match="GET_TOPICS_OF_NAMESPACE") as caught:
        async with asyncio.timeout(WAIT):
            await admin.list_topics()
    assert 0.25 < time.monotonic() - started < 1.5
    assert "'public/default'" in str(caught.value)


async def test_topics_of_namespace_sends_a_pattern_and_hash_and_reads_the_filtered_answer(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    # The shape pattern subscriptions need: the broker filters, and answers "unchanged"
    # to the hash of the list the client has.
    server.handlers[Type.GET_TOPICS_OF_NAMESPACE] = lambda conn, cmd: conn.send(
        topics_of_namespace_response(
            cmd.getTopicsOfNamespace.request_id, [], filtered=True, topics_hash="h1", changed=False
        )
    )
    client = make_client(server.url)
    lookup = client._backend.lookup  # type: ignore[attr-defined]
    async with asyncio.timeout(WAIT):
        answer = await lookup.topics_of_namespace(
            "public/default",
            "non-persistent",
            pattern="persistent://public/default/a.*",
            topics_hash="h0",
        )
    assert (answer.topics, answer.filtered, answer.topics_hash, answer.changed) == (
        (),
        True,
        "h1",
        False,
    )
    (sent,) = server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    request = sent.command.getTopicsOfNamespace
    assert request.mode == Mode.NON_PERSISTENT
    assert request.topics_pattern == "persistent://public/default/a.*"
    assert request.topics_hash == "h0"


async def test_an_unfiltered_answer_has_no_hash(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics = ["persistent://public/default/t-partition-0"]
    lookup = make_client(server.url)._backend.lookup  # type: ignore[attr-defined]
    async with asyncio.timeout(WAIT):
        answer = await lookup.topics_of_namespace("public/default", pattern="t.*")
    # An old broker ignores the pattern (filtered False): the caller filters the
    # partitions' names itself.
    assert answer.topics == ("persistent://public/default/t-partition-0",)
    assert (answer.filtered, answer.topics_hash, answer.changed) == (False, None, True)
    (sent,) = server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    assert sent.command.getTopicsOfNamespace.mode == Mode.PERSISTENT  # the default


async def test_describe_topics_of_a_topic_the_broker_does_not_have(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    # A broker with topic auto-creation off refuses the partition metadata of a missing topic.
    server.handlers[Type.PARTITIONED_METADATA] = lambda conn, cmd: conn.send(
        pb.BaseCommand(
            type=Type.PARTITIONED_METADATA_RESPONSE,
            partitionMetadataResponse=pb.CommandPartitionedTopicMetadataResponse(
                request_id=cmd.partitionMetadata.request_id,
                response=pb.CommandPartitionedTopicMetadataResponse.Failed,
                error=pb.TopicNotFound,
                message="Topic not found",
            ),
        )
        if cmd.partitionMetadata.topic.endswith("/missing")
        else partitioned_metadata(cmd.partitionMetadata.request_id, 2)
    )
    async with asyncio.timeout(WAIT):
        described = await make_client(server.url).admin().describe_topics(["missing", "there"])
    missing = "persistent://public/default/missing"
    there = "persistent://public/default/there"
    assert isinstance(described.failed[missing], TopicNotFoundError)
    description = described.result(there)
    assert description.partitioned
    assert [(p.partition, p.leader) for p in description.partitions] == [
        (0, server.host_port),
        (1, server.host_port),
    ]
