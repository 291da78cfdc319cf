"""Helpers for the Pulsar integration tests: the official client is the reference reader.

Every wait here is bounded, so a test that would hang fails within ``TIMEOUT`` instead.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
import pulsar
import pytest

import msgclient
from msgclient.core.network.connection import Connection
from protocols.pulsarwire.framing import FrameDecoder
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

T = TypeVar("T")

TIMEOUT = 10.0  # seconds: the upper bound of any single wait in these tests
QUIET_MS = 300  # how long we watch to conclude that nothing more arrives


@contextmanager
def official_client(service_url: str) -> Iterator[pulsar.Client]:
    """The official pulsar-client (C++ core), quiet except for errors."""
    client = pulsar.Client(
        service_url,
        operation_timeout_seconds=5,
        connection_timeout_ms=2_000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        yield client
    finally:
        client.close()


def subscribe(
    client: pulsar.Client, topic: str, subscription: str = "reader", **options: Any
) -> pulsar.Consumer:
    """A Shared subscription from the earliest message (``options``: the official
    ``subscribe``'s others).

    Shared, because pulsar-lite dispatches duplicates and may reorder on Exclusive/Failover
    subscriptions fed by a pipelining producer (brokers.md quirk): exactly-once and order
    assertions are only meaningful on Shared.
    """
    return client.subscribe(
        topic,
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        **options,
    )


def receive_blocking(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    """Receive and ack exactly ``count`` messages; fail if they do not come within TIMEOUT."""
    messages: list[pulsar.Message] = []
    deadline = time.monotonic() + TIMEOUT
    while len(messages) < count:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        try:
            message = consumer.receive(timeout_millis=max(1, remaining_ms))
        except pulsar.Timeout:
            raise AssertionError(
                f"the official consumer received {len(messages)} of {count} messages "
                f"within {TIMEOUT:g} s"
            ) from None
        consumer.acknowledge(message)
        messages.append(message)
    return messages


async def receive(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    """``receive_blocking`` in a thread, so that the event loop runs meanwhile."""
    return await asyncio.to_thread(receive_blocking, consumer, count)


def _nothing_more_blocking(consumer: pulsar.Consumer) -> None:
    try:
        message = consumer.receive(timeout_millis=QUIET_MS)
    except pulsar.Timeout:
        return
    raise AssertionError(
        f"unexpected extra message {message.data()[:40]!r} ({message.message_id()})"
    )


async def assert_nothing_more(consumer: pulsar.Consumer) -> None:
    """No message beyond those already received arrives within QUIET_MS (no duplicates)."""
    await asyncio.to_thread(_nothing_more_blocking, consumer)


async def within(awaitable: Awaitable[T], timeout: float = TIMEOUT) -> T:
    return await asyncio.wait_for(awaitable, timeout)


async def settle(futures: Iterable[asyncio.Future[msgclient.MessageId]]) -> list[PulsarMessageId]:
    """Wait (bounded) for send futures to succeed; their ids, in the given order."""
    ids = await within(asyncio.gather(*futures))
    assert all(isinstance(i, PulsarMessageId) for i in ids)
    return ids  # type: ignore[return-value]


def strictly_increasing(items: Sequence[Any]) -> bool:
    return all(a < b for a, b in itertools.pairwise(items))


def id_fields(message_id: pulsar.MessageId) -> tuple[int, int, int, int]:
    return (
        message_id.ledger_id(),
        message_id.entry_id(),
        message_id.partition(),
        message_id.batch_index(),
    )


def assert_same_id(ours: msgclient.MessageId, theirs: pulsar.MessageId) -> None:
    """msgclient's id is the official client's, and each side reads the other's bytes."""
    assert isinstance(ours, PulsarMessageId)
    fields = (ours.ledger_id, ours.entry_id, ours.partition, ours.batch_index)
    assert fields == id_fields(theirs)
    assert PulsarMessageId.deserialize(theirs.serialize()) == ours
    assert id_fields(pulsar.MessageId.deserialize(ours.serialize())) == fields


# -- the official client produces, msgclient consumes --------------------------------------


@attrs.frozen
class Publish:
    """One message to publish and its send options (those both clients' ``send`` take)."""

    value: bytes
    partition_key: str | None = None
    ordering_key: str | None = None
    properties: dict[str, str] | None = None
    event_timestamp: int | None = None

    def options(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if k != "value" and v is not None}


@attrs.frozen
class Published:
    """What the official producer reported: an id per message (in send order) and its name."""

    ids: list[pulsar.MessageId]
    producer_name: str


def official_produce_blocking(
    service_url: str, topic: str, messages: Sequence[Publish], **producer_options: Any
) -> Published:
    """Publish ``messages`` with the official client, pipelined (``send_async``, blocking
    while its queue is full), then flush; fail unless every one is confirmed within TIMEOUT."""
    results: list[tuple[pulsar.Result, pulsar.MessageId] | None] = [None] * len(messages)
    all_done = threading.Event()
    remaining = [len(messages)]
    lock = threading.Lock()

    def callback(index: int, result: pulsar.Result, message_id: pulsar.MessageId) -> None:
        results[index] = (result, message_id)
        with lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                all_done.set()

    with official_client(service_url) as client:
        producer = client.create_producer(
            topic, **{"block_if_queue_full": True, **producer_options}
        )
        for index, message in enumerate(messages):
            producer.send_async(
                message.value, functools.partial(callback, index), **message.options()
            )
        producer.flush()
        assert all_done.wait(TIMEOUT) or not messages, "the official producer did not finish"
        name = producer.producer_name()
        producer.close()
    failed = [r for r in results if r is None or r[0] != pulsar.Result.Ok]
    assert not failed, f"the official producer failed: {failed[:3]}"
    return Published([r[1] for r in results if r is not None], name)


async def official_produce(
    service_url: str, topic: str, messages: Sequence[Publish], **producer_options: Any
) -> Published:
    """``official_produce_blocking`` in a thread, so that the event loop runs meanwhile."""
    return await within(
        asyncio.to_thread(
            official_produce_blocking, service_url, topic, messages, **producer_options
        ),
        2 * TIMEOUT,
    )


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(0.002)


# -- what msgclient writes on the wire -----------------------------------------------------


class WireTap:
    """Every command msgclient writes to a broker, decoded as the broker decodes it.

    Install with ``tap_wire``: it wraps ``Connection.write``, through which every frame
    msgclient sends passes (requests included), and decodes each connection's byte stream
    with its own FrameDecoder.
    """

    def __init__(self) -> None:
        self.commands: list[pb.BaseCommand] = []
        self._decoders: dict[object, FrameDecoder] = {}

    def record(self, connection: object, data: bytes) -> None:
        decoder = self._decoders.get(connection)
        if decoder is None:
            decoder = self._decoders[connection] = FrameDecoder()
        self.commands.extend(frame.command for frame in decoder.feed(data))

    def of_type(self, command_type: int) -> list[pb.BaseCommand]:
        return [c for c in self.commands if c.type == command_type]

    def flows(self) -> list[int]:
        """The permits of each FLOW written, in order."""
        return [c.flow.messagePermits for c in self.of_type(pb.BaseCommand.FLOW)]

    def acks(self) -> list[pb.CommandAck]:
        return [c.ack for c in self.of_type(pb.BaseCommand.ACK)]

    def clear(self) -> None:
        self.commands.clear()


def tap_wire(monkeypatch: pytest.MonkeyPatch) -> WireTap:
    """Record msgclient's writes from now until the end of the test."""
    tap = WireTap()
    write = Connection.write

    def tapped_write(self: Connection[Any], data: bytes) -> None:
        tap.record(self, data)
        write(self, data)

    monkeypatch.setattr(Connection, "write", tapped_write)
    return tap


SHARED_FROM_EARLIEST: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Shared,
    "initial_position": msgclient.InitialPosition.Earliest,
}


async def official_backlog(url: str, topic: str, payloads: list[bytes]) -> list[bytes]:
    """The payloads as unbatched messages from the official client; returns them."""
    await official_produce(url, topic, [Publish(v) for v in payloads], batching_enabled=False)
    return payloads


def chunking(chunk_max_message_size: int = 0, **options: Any) -> dict[str, Any]:
    """create_producer options of a chunking producer: no batching (the two are exclusive),
    chunks of at most ``chunk_max_message_size`` bytes (0: the broker's limit), ``options``."""
    return {
        "batching_enabled": False,
        "chunking_enabled": True,
        "chunk_max_message_size": chunk_max_message_size,
        **options,
    }
