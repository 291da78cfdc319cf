"""Acknowledgments against pulsar-lite: grouped on the wire, confirmed when asked, durable
across a broker restart, cumulative on Exclusive, and pending ones hide redeliveries.

ACK commands are counted as msgclient writes them, decoded from its byte stream. Messages
are UNBATCHED, so that one acked message is one acked entry: pulsar-lite acks a whole batch
on any ack of it (brokers.md quirk), and msgclient holds a batch's ack until all of it is
acked (tested in test_consumer_transport_broker.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.consume_helpers import (
    assert_no_message,
    produce_one_by_one,
    receive_n,
)
from tests.pulsar.helpers import (
    SHARED_FROM_EARLIEST,
    WireTap,
    official_backlog,
    wait_until,
    within,
)

SHARED = SHARED_FROM_EARLIEST


def values(count: int) -> list[bytes]:
    return [b"ack-%05d" % i for i in range(count)]


async def backlog(url: str, topic: str, count: int) -> list[bytes]:
    """``count`` unbatched messages from the official client."""
    return await official_backlog(url, topic, values(count))


def entries(acks: list[pb.CommandAck]) -> list[tuple[int, int]]:
    return [(i.ledgerId, i.entryId) for ack in acks for i in ack.message_id]


def entry(message: msgclient.Message) -> tuple[int, int]:
    message_id = message.message_id()
    assert isinstance(message_id, PulsarMessageId)
    return message_id.ledger_id, message_id.entry_id


async def assert_all_acked(url: str, topic: str, subscription: str, **options: Any) -> None:
    """A new consumer of the subscription gets nothing: the broker holds every ack."""
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, subscription, **{**SHARED, **options}))
        await assert_no_message(consumer)


async def test_ten_thousand_acks_go_out_in_a_few_commands(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    count = 10_000
    url = pulsar_broker.service_url
    await backlog(url, topic, count)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(
            client.subscribe(
                topic,
                "grouped",
                acknowledgment_group_time_ms=100,
                max_acknowledgment_group_size=1000,
                **SHARED,
            )
        )
        received = await receive_n(consumer, count)
        for message in received:
            consumer.acknowledge(message)
        await within(consumer.close())  # flushes what is pending
        assert consumer.stats().acknowledged == count

    acks = wire.acks()
    assert 10 <= len(acks) <= 20  # 1000 a command at most: 10, plus a few timer flushes
    assert all(ack.ack_type == pb.CommandAck.Individual for ack in acks)
    on_wire = entries(acks)
    assert sorted(on_wire) == sorted(entry(m) for m in received)  # each once, none missing
    await assert_all_acked(url, topic, "grouped")


async def test_group_time_zero_sends_each_ack_at_once(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    url = pulsar_broker.service_url
    await backlog(url, topic, 50)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(
            client.subscribe(topic, "at-once", acknowledgment_group_time_ms=0, **SHARED)
        )
        for count, message in enumerate(await receive_n(consumer, 50), start=1):
            consumer.acknowledge(message)
            acks = wire.acks()  # written by acknowledge() itself, before any await
            assert len(acks) == count
            assert entries(acks[-1:]) == [entry(message)]
    await assert_all_acked(url, topic, "at-once")


@pytest.mark.parametrize("group_time_ms", [0, 100])
async def test_ack_receipts_complete_on_the_brokers_answer(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap, group_time_ms: int
) -> None:
    url = pulsar_broker.service_url
    await backlog(url, topic, 20)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(
            client.subscribe(
                topic,
                "receipts",
                ack_receipt_enabled=True,
                acknowledgment_group_time_ms=group_time_ms,
                **SHARED,
            )
        )
        received = await receive_n(consumer, 20)
        futures = [consumer.acknowledge(message) for message in received]
        assert not any(f.done() for f in futures)  # the broker has not answered yet
        await within(asyncio.gather(*futures))
        acks = wire.acks()
        assert all(ack.HasField("request_id") for ack in acks)  # each asks for an answer
        assert sorted(entries(acks)) == sorted(entry(m) for m in received)
        if group_time_ms:
            assert len(acks) == 1
    await assert_all_acked(url, topic, "receipts")


async def test_acks_survive_a_broker_restart(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str, wire: WireTap
) -> None:
    broker = make_pulsar_broker()
    url = broker.service_url
    sent = await backlog(url, topic, 100)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        # A long group time: the acks are still pending when close() is called.
        consumer = await within(
            client.subscribe(topic, "durable", acknowledgment_group_time_ms=60_000, **SHARED)
        )
        received = await receive_n(consumer, len(sent))
        acked = received[::2]
        for message in acked:
            consumer.acknowledge(message)
        assert wire.acks() == []
        await within(consumer.close())
        assert sorted(entries(wire.acks())) == sorted(entry(m) for m in acked)  # flushed
    await asyncio.to_thread(broker.restart)

    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "durable", **SHARED))
        unacked = received[1::2]
        redelivered = await receive_n(consumer, len(unacked))
        await assert_no_message(consumer)  # none of the acked half
        for message in redelivered:
            consumer.acknowledge(message)
    assert [m.data() for m in redelivered] == [m.data() for m in unacked]
    assert [m.message_id() for m in redelivered] == [m.message_id() for m in unacked]


async def test_cumulative_ack_on_exclusive(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    # Produced one by one, each send awaited (no pipelining): pulsar-lite dispatches
    # duplicates on Exclusive when the producer pipelines (brokers.md quirk). So the counts
    # below are exact.
    url = pulsar_broker.service_url
    exclusive = {
        "consumer_type": msgclient.ConsumerType.Exclusive,
        "initial_position": msgclient.InitialPosition.Earliest,
    }
    sent = values(100)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        await produce_one_by_one(client, topic, sent)
        consumer = await within(client.subscribe(topic, "cumulative", **exclusive))
        received = await receive_n(consumer, len(sent))
        assert [m.data() for m in received] == sent
        consumer.acknowledge_cumulative(received[59])  # the 60th
        await within(consumer.close())
    [ack] = wire.acks()
    assert ack.ack_type == pb.CommandAck.Cumulative
    assert entries([ack]) == [entry(received[59])]

    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "cumulative", **exclusive))
        again = await receive_n(consumer, 40)
        await assert_no_message(consumer)
        assert [m.data() for m in again] == sent[60:]  # messages 61..100
        consumer.acknowledge_cumulative(again[-1])


async def test_a_redelivery_of_a_message_whose_ack_is_pending_is_dropped(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    # Provoked deterministically with public calls only: the message is nacked, then acked
    # with a long group time, so its ack is pending when the nack's redelivery comes due.
    # msgclient asks the broker to redeliver it (the nack is not withdrawn by the ack, as in
    # the Java client), the broker does (non-partitioned Shared: brokers.md), and the copy
    # must not reach the application. Also unit-tested in tests/unit/test_core_consumer.py.
    url = pulsar_broker.service_url
    sent = await backlog(url, topic, 3)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(
            client.subscribe(
                topic,
                "duplicates",
                acknowledgment_group_time_ms=60_000,
                negative_ack_redelivery_delay_ms=0,  # raised to the 100 ms minimum
                **SHARED,
            )
        )
        received = await receive_n(consumer, len(sent))
        first = received[0]
        consumer.negative_acknowledge(first)
        for message in received:
            consumer.acknowledge(message)  # pending for a minute
        redelivers = pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES
        await wait_until(lambda: bool(wire.of_type(redelivers)), "the nack's redelivery")
        [redeliver] = wire.of_type(redelivers)
        assert [
            (i.ledgerId, i.entryId) for i in redeliver.redeliverUnacknowledgedMessages.message_ids
        ] == [entry(first)]
        await wait_until(lambda: consumer.stats().received == len(sent) + 1, "the broker's copy")
        assert consumer.stats().queue_depth == 0
        await assert_no_message(consumer)  # the copy was dropped
        assert wire.acks() == []
        await within(consumer.close())
    assert sorted(entries(wire.acks())) == sorted(entry(m) for m in received)
    await assert_all_acked(url, topic, "duplicates")
