"""Helpers for the Pulsar integration tests: the official client is the reference reader.

Every wait here is bounded, so a test that would hang fails within ``TIMEOUT`` instead.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pulsar

import msgclient
from protocols.pulsarwire.message_id import PulsarMessageId

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


def subscribe(client: pulsar.Client, topic: str, subscription: str = "reader") -> pulsar.Consumer:
    """A Shared subscription from the earliest message.

    Shared, because pulsar-lite dispatches duplicates and may reorder on Exclusive/Failover
    subscriptions fed by a pipelining producer (brokers.md quirk): exactly-once and order
    assertions are only meaningful on Shared.
    """
    return client.subscribe(
        topic,
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
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
