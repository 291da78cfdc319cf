"""Pattern subscriptions on Pulsar, against the scripted server (pulsar-lite does not
answer GET_TOPICS_OF_NAMESPACE): the namespace's topics listed in the regex subscription
mode's domains, matched, subscribed; listed again every period, topics joined and dropped."""

from __future__ import annotations

import asyncio
import re

import pytest

import msgclient
from msgclient import pulsar_compat as pulsar
from msgclient.errors import InvalidConfigurationError
from msgclient.pulsar_compat import asyncio as pulsar_asyncio
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.scripted.conftest import MakeClient
from tests.pulsar.scripted.server import WAIT, ScriptedPulsarServer, Type, message_frame

P = "persistent://public/default/"
NP = "non-persistent://public/default/"
NAMESPACE = [
    f"{P}orders-1",
    f"{P}orders-2-partition-0",  # a partitioned topic, listed by its partitions
    f"{P}orders-2-partition-1",
    f"{P}other",
    f"{NP}orders-np",
    "persistent://acme/ns/orders-elsewhere",  # another namespace: not listed
]
Mode = msgclient.RegexSubscriptionMode


def subscribed(server: ScriptedPulsarServer) -> dict[str, int]:
    """Topic subscribed -> consumer id."""
    return {
        r.command.subscribe.topic: r.command.subscribe.consumer_id
        for r in server.commands(Type.SUBSCRIBE)
    }


@pytest.mark.parametrize(
    ("mode", "wire_mode", "expected"),
    [
        (
            Mode.PersistentOnly,
            pb.CommandGetTopicsOfNamespace.PERSISTENT,
            [f"{P}orders-1", f"{P}orders-2"],
        ),
        (Mode.NonPersistentOnly, pb.CommandGetTopicsOfNamespace.NON_PERSISTENT, [f"{NP}orders-np"]),
        (
            Mode.AllTopics,
            pb.CommandGetTopicsOfNamespace.ALL,
            [f"{NP}orders-np", f"{P}orders-1", f"{P}orders-2"],
        ),
    ],
    ids=lambda v: v.name if isinstance(v, Mode) else None,
)
async def test_the_matching_topics_of_the_mode_are_subscribed(
    server: ScriptedPulsarServer,
    make_client: MakeClient,
    mode: Mode,
    wire_mode: int,
    expected: list[str],
) -> None:
    server.namespace_topics = NAMESPACE
    async with asyncio.timeout(WAIT):
        consumer = await make_client(server.url).subscribe(
            re.compile(f"{P}orders-.*"), "sub", regex_subscription_mode=mode
        )
    assert consumer.topics == expected
    assert sorted(subscribed(server)) == expected
    (asked,) = server.commands(Type.GET_TOPICS_OF_NAMESPACE)
    request = asked.command.getTopicsOfNamespace
    assert (request.namespace, request.mode) == ("public/default", wire_mode)
    assert request.topics_pattern == f"{P}orders-.*"


async def test_a_new_topic_is_subscribed_and_a_deleted_one_closed(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.namespace_topics = [f"{P}orders-1"]
    async with asyncio.timeout(WAIT):
        consumer = await make_client(server.url).subscribe(
            re.compile("public/default/orders-.*"), "sub", pattern_auto_discovery_period=0.05
        )
        first_id = subscribed(server)[f"{P}orders-1"]
        # A failed listing is logged and retried at the next period.
        server.namespace_topics_error = (pb.ServiceNotReady, "not now")
        await server.wait_for(Type.GET_TOPICS_OF_NAMESPACE, 3)
        server.namespace_topics_error = None
        server.namespace_topics = [f"{P}orders-3"]
        await server.wait_for(Type.SUBSCRIBE, 2)
        (closed,) = await server.wait_for(Type.CLOSE_CONSUMER)
    assert closed.command.close_consumer.consumer_id == first_id
    assert consumer.topics == [f"{P}orders-3"]
    new_id = subscribed(server)[f"{P}orders-3"]
    server.consumer_connection(new_id).write(message_frame(new_id, 7, 0, [b"new"]))
    message = await consumer.receive(timeout_millis=2000)
    assert (message.data(), message.topic_name()) == (b"new", f"{P}orders-3")
    await consumer.acknowledge(message)
    await consumer.close()
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("topic discovery")]


@pytest.mark.parametrize(
    "pattern", ["persistent://public/.*/orders", "persistent://(a|b)/ns/t", "public/ns"]
)
async def test_a_pattern_must_name_one_namespace(
    server: ScriptedPulsarServer, make_client: MakeClient, pattern: str
) -> None:
    with pytest.raises(InvalidConfigurationError, match=re.escape(repr(pattern))):
        await make_client(server.url).subscribe(re.compile(pattern), "sub")
    assert server.commands(Type.GET_TOPICS_OF_NAMESPACE) == []


async def test_pulsar_compat_subscribes_to_a_compiled_pattern(
    server: ScriptedPulsarServer,
) -> None:
    server.namespace_topics = NAMESPACE

    def subscribe() -> list[str]:
        client = pulsar.Client(server.url, operation_timeout_seconds=2)
        try:
            consumer = client.subscribe(
                re.compile(f"{P}orders-.*"),
                "sub",
                pattern_auto_discovery_period=1,
                regex_subscription_mode=pulsar.RegexSubscriptionMode.PersistentOnly,
            )
            topics = consumer.topic()
            consumer.close()
            return topics
        finally:
            client.close()

    async with asyncio.timeout(WAIT * 2):
        topic = await asyncio.to_thread(subscribe)
    assert topic == f"{P}orders-.*"
    assert sorted(subscribed(server)) == [f"{P}orders-1", f"{P}orders-2"]


async def test_pulsar_compat_asyncio_takes_a_pattern_as_is_pattern_topic(
    server: ScriptedPulsarServer,
) -> None:
    """The official ``pulsar.asyncio``: ``subscribe(str, ..., is_pattern_topic=True)``."""
    server.namespace_topics = NAMESPACE
    client = pulsar_asyncio.Client(server.url, operation_timeout_seconds=2)
    try:
        async with asyncio.timeout(WAIT):
            consumer = await client.subscribe(f"{P}orders-.*", "sub", is_pattern_topic=True)
            await consumer.close()
        with pytest.raises(ValueError, match="is_pattern_topic"):
            await client.subscribe([f"{P}orders-1"], "sub", is_pattern_topic=True)
    finally:
        await client.close()
    assert sorted(subscribed(server)) == [f"{P}orders-1", f"{P}orders-2"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"receiver_queue_size": 0}, "receiver_queue_size=0"),
        (
            {
                "retry_enable": True,
                "dead_letter_policy": msgclient.DeadLetterPolicy(max_redeliver_count=3),
            },
            "retry_enable",
        ),
    ],
)
async def test_what_a_pattern_cannot_do_is_refused(
    server: ScriptedPulsarServer, make_client: MakeClient, options: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidConfigurationError, match=f"{named} is not offered with a topic"):
        await make_client(server.url).subscribe(re.compile(f"{P}orders-.*"), "sub", **options)
    assert server.commands(Type.GET_TOPICS_OF_NAMESPACE) == []
