"""Producer limits and input checks against the real broker, and the blocking facade."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker
from tests.pulsar.helpers import (
    TIMEOUT,
    assert_nothing_more,
    assert_same_id,
    official_client,
    receive,
    receive_blocking,
    settle,
    strictly_increasing,
    subscribe,
    within,
)

MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # pulsar-lite's limit; it sends none in CONNECTED
NOT_CONFIRMED_YET_S = 0.2  # how long we watch a blocked send to see that it stays blocked

# A batch that stays open for a minute: nothing reaches the broker until flush(), so
# nothing is confirmed and the limits stay taken as long as the test wants.
HELD_BACK: dict[str, Any] = {"batching_max_publish_delay_ms": 60_000}


async def assert_stays_blocked(task: asyncio.Task[Any]) -> None:
    done, _ = await asyncio.wait({task}, timeout=NOT_CONFIRMED_YET_S)
    assert not done, "send_async returned although the limit is reached"


# -- max_pending_messages -----------------------------------------------------------------


async def test_full_queue_fails_fast(pulsar_broker: PulsarBroker, topic: str) -> None:
    limit = 10
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(topic, max_pending_messages=limit, **HELD_BACK)
        futures = [await producer.send_async(b"m%d" % i) for i in range(limit)]
        with pytest.raises(msgclient.ProducerQueueIsFullError, match="max_pending_messages"):
            await producer.send_async(b"one too many")
        assert producer.pending_count == limit
        assert client.memory_used == sum(len(b"m%d" % i) for i in range(limit))  # nothing leaked

        await within(producer.flush())
        await settle(futures)
        assert producer.pending_count == 0 and client.memory_used == 0
        again = await producer.send_async(b"room again")  # the queue has room again
        await within(producer.flush())
        await settle([again])


async def test_full_queue_blocks_until_messages_are_confirmed(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    limit = 10
    values = [b"m%d" % i for i in range(limit)]
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(
                topic, max_pending_messages=limit, block_if_queue_full=True, **HELD_BACK
            )
            futures = [await producer.send_async(v) for v in values]
            # A blocked send that its caller gives up on is not sent, and frees its place.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(producer.send_async(b"abandoned"), NOT_CONFIRMED_YET_S)
            blocked = asyncio.ensure_future(producer.send_async(b"the eleventh"))
            await assert_stays_blocked(blocked)

            await within(producer.flush())  # confirms the first ten: the eleventh gets in
            eleventh = await within(blocked)
            await within(producer.flush())
            ids = await settle([*futures, eleventh])
            assert producer.pending_count == 0 and client.memory_used == 0
        received = await receive(consumer, limit + 1)
        await assert_nothing_more(consumer)
    assert [m.data() for m in received] == [*values, b"the eleventh"]
    for ours, message in zip(ids, received, strict=True):
        assert_same_id(ours, message.message_id())


# -- memory_limit -------------------------------------------------------------------------


async def test_full_memory_fails_fast(pulsar_broker: PulsarBroker, topic: str) -> None:
    size, fits = 1000, 10
    async with msgclient.Client(pulsar_broker.service_url, memory_limit=size * fits) as client:
        producer = await client.create_producer(topic, **HELD_BACK)
        futures = [await producer.send_async(bytes(size)) for _ in range(fits)]
        assert client.memory_used == size * fits
        with pytest.raises(msgclient.MemoryBufferIsFullError, match="memory_limit"):
            await producer.send_async(bytes(size))
        with pytest.raises(msgclient.MemoryBufferIsFullError):
            await producer.send_async(b"x")  # even one byte over
        assert client.memory_used == size * fits and producer.pending_count == fits

        await within(producer.flush())
        await settle(futures)
        assert client.memory_used == 0
        again = await producer.send_async(bytes(size))  # memory is free again
        await within(producer.flush())
        await settle([again])


async def test_full_memory_blocks_and_is_never_exceeded(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    size, limit, count = 1024, 64 * 1024, 500
    values = [i.to_bytes(2, "big") * (size // 2) for i in range(count)]
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url, memory_limit=limit) as client:
            producer = await client.create_producer(topic, block_if_queue_full=True)
            futures: list[asyncio.Future[msgclient.MessageId]] = []
            used: list[int] = []

            async def push() -> None:  # 500 KiB through a 64 KiB window
                # send_async yields only while blocked, so memory fills up to the limit
                # each time before a confirmation can free some of it.
                for value in values:
                    futures.append(await producer.send_async(value))
                    used.append(client.memory_used)

            await within(push())
            ids = await settle(futures)
            assert client.memory_used == 0
        received = await receive(consumer, count)
    assert max(used) == limit  # never exceeded, and reached: the sends above did block
    assert [m.data() for m in received] == values
    assert strictly_increasing(ids)


# -- message size and input checks --------------------------------------------------------


async def test_oversized_message_is_refused_naming_its_size(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    near_limit = bytes(MAX_MESSAGE_SIZE - 1024)  # leaves room for the metadata (see below)
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic)
            with pytest.raises(msgclient.MessageTooBigError, match=str(MAX_MESSAGE_SIZE + 1)):
                await producer.send_async(bytes(MAX_MESSAGE_SIZE + 1))
            assert client.memory_used == 0 and producer.pending_count == 0
            message_id = await within(producer.send(near_limit))
        [message] = await receive(consumer, 1)
    assert message.data() == near_limit
    assert_same_id(message_id, message.message_id())


async def test_message_the_broker_refuses_fails_alone(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    # pulsar-lite quirk: it counts the metadata into its 5 MiB limit ("Exceed maximum
    # message size: 5242901 > 5242880"; the Apache broker only limits the frame, with 10 KiB
    # of padding), so a payload of exactly 5 MiB, which passes the client's check as in the
    # Java client, is refused with NotAllowedError. That is what this test needs: a refusal
    # that resending cannot fix must fail its message at once, not hold up those behind it.
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, batching_enabled=False)
            refused = await producer.send_async(bytes(MAX_MESSAGE_SIZE))
            behind = await producer.send_async(b"behind")
            with pytest.raises(msgclient.BrokerError) as raised:
                await within(refused, 2.0)  # not resent until the 30 s send timeout
            assert raised.value.code == "NotAllowedError"
            [behind_id] = await settle([behind])
            assert client.memory_used == 0 and producer.pending_count == 0
        [message] = await receive(consumer, 1)
        await assert_nothing_more(consumer)
    assert message.data() == b"behind"
    assert_same_id(behind_id, message.message_id())


async def test_value_must_be_bytes(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(topic)
        with pytest.raises(TypeError, match=r"not str .*encode"):
            await producer.send_async("text")  # type: ignore[arg-type]
        with pytest.raises(msgclient.InvalidConfigurationError, match="properties"):
            await producer.send_async(b"v", properties={"n": 1})  # type: ignore[dict-item]
        assert client.memory_used == 0 and producer.pending_count == 0
        # bytearray and memoryview are accepted too (the annotation of send says bytes only)
        await within(producer.send(bytearray(b"ba")))
        await within(producer.send(memoryview(b"mv")))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"memory_limt": 1}, "memory_limt"),
        ({"operation_timeout_seconds": 0}, "operation_timeout_seconds"),
        ({"memory_limit": -1}, "memory_limit"),
        ({"connection_timeout_ms": "10s"}, "connection_timeout_ms"),
        ({"initial_backoff_interval_ms": 500, "max_backoff_interval_ms": 100}, "max_backoff"),
    ],
)
def test_bad_client_options_name_the_option(options: dict[str, Any], named: str) -> None:
    with pytest.raises(msgclient.InvalidConfigurationError, match=named):
        msgclient.Client("pulsar://127.0.0.1:6650", **options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"send_timeout": 1000}, "send_timeout"),
        ({"compression_type": "LZ4"}, "compression_type"),
        ({"batching_enabled": 1}, "batching_enabled"),
        ({"max_pending_messages": -1}, "max_pending_messages"),
        ({"hashing_scheme": "JavaStringHash"}, "hashing_scheme"),
        ({"properties": {"a": 1}}, "properties"),
        (
            {"message_routing_mode": msgclient.PartitionsRoutingMode.CustomPartition},
            "message_router",
        ),
    ],
)
async def test_bad_producer_options_name_the_option(
    pulsar_broker: PulsarBroker, topic: str, options: dict[str, Any], named: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match=named):
            await client.create_producer(topic, **options)


@pytest.mark.parametrize(
    "url",
    ["127.0.0.1:6650", "pulsar://", "pulsar://:6650", "pulsar://host:99999", "pulsar://host:x"],
)
def test_bad_service_url(url: str) -> None:
    with pytest.raises(msgclient.InvalidServiceUrlError) as raised:
        msgclient.Client(url)
    assert not isinstance(raised.value, msgclient.UnknownProtocolError)


@pytest.mark.parametrize("url", ["foo://x", "http://127.0.0.1:8080"])
def test_unknown_scheme(url: str) -> None:
    with pytest.raises(msgclient.UnknownProtocolError, match="pulsar://"):  # lists known ones
        msgclient.Client(url)


# -- the blocking facade ------------------------------------------------------------------


def test_blocking_client_produces(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    called = threading.Event()
    outcomes: list[tuple[BaseException | None, msgclient.MessageId | None]] = []

    def callback(error: BaseException | None, message_id: msgclient.MessageId | None) -> None:
        outcomes.append((error, message_id))
        called.set()

    with official_client(url) as official:
        consumer = subscribe(official, topic)
        with msgclient.blocking.Client(url) as client:
            with pytest.raises(msgclient.InvalidConfigurationError, match="send_timeout"):
                client.create_producer(topic, send_timeout=1)
            producer = client.create_producer(topic)
            with pytest.raises(TypeError):  # errors cross over from the loop's thread
                producer.send("text")  # type: ignore[arg-type]
            sync_id = producer.send(b"sync", partition_key="k")
            producer.close()

            held = client.create_producer(topic, **HELD_BACK)
            # With a callback, as pulsar-client's: nothing returned, the callback hears.
            assert held.send_async(b"async", callback, properties={"via": "send_async"}) is None
            assert not called.is_set()  # in the open batch until flush()
            held.flush()
            assert called.wait(TIMEOUT)
            ((error, async_id),) = outcomes
            assert error is None and async_id is not None
            last = held.send_async(b"last")
            held.close()  # flushes: without it, "last" would fail with AlreadyClosedError
            last_id = last.result(timeout=TIMEOUT)
            with pytest.raises(msgclient.AlreadyClosedError):
                held.send(b"after close")
        received = receive_blocking(consumer, 3)
    assert [m.data() for m in received] == [b"sync", b"async", b"last"]
    assert received[0].partition_key() == "k"
    assert received[1].properties() == {"via": "send_async"}
    for ours, message in zip([sync_id, async_id, last_id], received, strict=True):
        assert_same_id(ours, message.message_id())
