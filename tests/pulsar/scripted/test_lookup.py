"""Topic lookup against scripted brokers: redirects, the redirect limit, proxies, failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import msgclient
from msgclient import InvalidConfigurationError, TopicLookupError, TopicNotFoundError, pulsar_compat
from tests.pulsar.scripted.conftest import MakeClient, MakeServer
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    lookup_connect,
    lookup_failed,
    lookup_redirect,
    pb,
)

TOPIC = "persistent://public/default/scripted"


async def test_redirect_is_followed_to_the_serving_broker(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    service = await make_server(name="service")
    owner = await make_server(name="owner")
    service.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_redirect(cmd.lookupTopic.request_id, owner.url, authoritative=True)
    )
    client = make_client(service.url)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        message_id = await producer.send(b"hello")
    assert message_id is not None

    (first,) = service.commands(Type.LOOKUP)
    assert first.command.lookupTopic.topic == TOPIC
    assert not first.command.lookupTopic.authoritative
    (second,) = owner.commands(Type.LOOKUP)
    assert second.command.lookupTopic.authoritative  # the redirect's flag, passed along
    # The producer lives on the owner; the service broker only answered lookups.
    assert [r.command.producer.topic for r in owner.commands(Type.PRODUCER)] == [TOPIC]
    assert service.commands(Type.PRODUCER) == []
    (send,) = owner.commands(Type.SEND)
    assert send.payload == b"hello"


async def test_non_authoritative_redirect_is_passed_along_too(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    service = await make_server(name="service")
    owner = await make_server(name="owner")
    service.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_redirect(cmd.lookupTopic.request_id, owner.url, authoritative=False)
    )
    async with asyncio.timeout(WAIT):
        await make_client(service.url).create_producer(TOPIC)
    (lookup,) = owner.commands(Type.LOOKUP)
    assert not lookup.command.lookupTopic.authoritative


async def test_more_redirects_than_allowed_fail_the_lookup(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_redirect(cmd.lookupTopic.request_id, server.url, authoritative=False)
    )
    client = make_client(server.url, max_lookup_redirects=3)
    with pytest.raises(TopicLookupError, match=r"redirected more than 3 times"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert len(server.commands(Type.LOOKUP)) == 4  # the first lookup and 3 redirects


async def test_the_redirect_limit_itself_is_allowed(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    service = await make_server(name="service")
    hops = 0

    def redirect_three_times(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        nonlocal hops
        hops += 1
        request_id = cmd.lookupTopic.request_id
        if hops <= 3:
            conn.send(lookup_redirect(request_id, service.url, authoritative=True))
        else:
            conn.send(lookup_connect(request_id, service.url))

    service.handlers[Type.LOOKUP] = redirect_three_times
    async with asyncio.timeout(WAIT):
        await make_client(service.url, max_lookup_redirects=3).create_producer(TOPIC)
    assert len(service.commands(Type.LOOKUP)) == 4


async def test_proxy_through_service_url_names_the_broker_in_connect(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    # The service URL is a proxy: it answers that the topic lives on a broker the client
    # cannot reach, and that the client must go through the proxy to get there.
    broker_url = "pulsar://broker-7.internal:6650"
    server.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_connect(cmd.lookupTopic.request_id, broker_url, proxy=True)
    )
    client = make_client(server.url)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"through the proxy")

    connects = [c.connect for c in server.connections]
    assert len(connects) == 2
    assert connects[0] is not None and not connects[0].HasField("proxy_to_broker_url")
    # As the Java and C++ clients: host:port of the logical broker, no scheme.
    assert connects[1] is not None and connects[1].proxy_to_broker_url == "broker-7.internal:6650"
    (producer_frame,) = server.commands(Type.PRODUCER)
    assert producer_frame.connection is server.connections[1]  # the proxied connection
    assert server.commands(Type.SEND)[0].connection is server.connections[1]


async def test_lookup_failed_with_topic_not_found(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_failed(cmd.lookupTopic.request_id, pb.TopicNotFound, "no such topic")
    )
    with pytest.raises(TopicNotFoundError, match="TopicNotFound: no such topic") as caught:
        async with asyncio.timeout(WAIT):
            await make_client(server.url).create_producer(TOPIC)
    assert caught.value.code == "TopicNotFound"


async def test_lookup_answer_without_a_broker_url_fails_clearly(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_connect(cmd.lookupTopic.request_id, "")
    )
    with pytest.raises(TopicLookupError, match="named no broker URL"):
        async with asyncio.timeout(WAIT):
            await make_client(server.url).create_producer(TOPIC)


async def test_concurrent_producers_on_one_topic_share_one_lookup(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    client = make_client(server.url)
    async with asyncio.timeout(WAIT):
        producers = await asyncio.gather(*(client.create_producer(TOPIC) for _ in range(5)))
    assert len(producers) == 5
    assert len(server.commands(Type.PRODUCER)) == 5
    assert len(server.commands(Type.LOOKUP)) == 1
    assert len(server.commands(Type.PARTITIONED_METADATA)) == 1
    assert len(server.connections) == 1  # and one connection


async def test_partitioned_topic_gets_a_producer_per_partition(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.partitions = 3
    async with asyncio.timeout(WAIT):
        producer = await make_client(server.url).create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"keyed", partition_key="k")
    topics = sorted(r.command.producer.topic for r in server.commands(Type.PRODUCER))
    assert topics == [f"{TOPIC}-partition-{i}" for i in range(3)]
    assert sorted(r.command.lookupTopic.topic for r in server.commands(Type.LOOKUP)) == topics


def _answer_only_the_listener(name: str, server: ScriptedPulsarServer) -> Any:
    """A LOOKUP handler that answers ``server``'s URL for the listener ``name`` only."""

    def answer(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        lookup = cmd.lookupTopic
        if lookup.advertised_listener_name == name:
            conn.send(lookup_connect(lookup.request_id, server.url))
        else:
            conn.send(lookup_failed(lookup.request_id, pb.ServiceNotReady, "no such listener"))

    return answer


async def test_listener_name_goes_in_every_lookup(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    """``listener_name`` asks for a broker's advertised listener of that name: the broker
    answers that listener's URL (here another server, and only for that name)."""
    service = await make_server(name="service")
    internal = await make_server(name="internal")
    service.handlers[Type.LOOKUP] = _answer_only_the_listener("internal", internal)
    client = make_client(service.url, listener_name="internal")
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"hello")
    (lookup,) = service.commands(Type.LOOKUP)
    assert lookup.command.lookupTopic.advertised_listener_name == "internal"
    assert [r.command.producer.topic for r in internal.commands(Type.PRODUCER)] == [TOPIC]


async def test_pulsar_compat_passes_listener_name_on(make_server: MakeServer) -> None:
    service = await make_server(name="service")
    internal = await make_server(name="internal")
    service.handlers[Type.LOOKUP] = _answer_only_the_listener("internal", internal)

    def official_program() -> None:  # blocking calls: on a thread, the server on this loop
        client = pulsar_compat.Client(
            service.url, listener_name="internal", operation_timeout_seconds=2
        )
        try:
            client.create_producer(TOPIC).send(b"hello")
        finally:
            client.close()

    await asyncio.wait_for(asyncio.to_thread(official_program), WAIT)
    assert [r.command.producer.topic for r in internal.commands(Type.PRODUCER)] == [TOPIC]


def test_listener_name_is_refused_on_kafka() -> None:
    with pytest.raises(InvalidConfigurationError, match="listener_name"):
        msgclient.Client("kafka://127.0.0.1:9", listener_name="internal")
