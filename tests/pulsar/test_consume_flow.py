"""Flow control against pulsar-lite: msgclient never asks for more than its receiver queue
holds, and refills it the way the Java client does. The FLOW commands are counted as
msgclient writes them, decoded from its byte stream.

Backlogs are UNBATCHED: a broker dispatches whole entries, so a batch of k messages may
overshoot the window by up to k - 1 and the bound checked here would not hold exactly.
Shared subscriptions: pulsar-lite dispatches duplicates on Exclusive/Failover fed by a
pipelining producer (brokers.md quirk), and these tests count messages exactly.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from tests.pulsar.consume_helpers import assert_no_message, receive_n
from tests.pulsar.helpers import (
    QUIET_MS,
    SHARED_FROM_EARLIEST,
    Publish,
    WireTap,
    official_backlog,
    official_produce,
    wait_until,
    within,
)

N = 20  # receiver_queue_size
SHARED = SHARED_FROM_EARLIEST


def values(count: int) -> list[bytes]:
    return [b"flow-%05d" % i for i in range(count)]


async def backlog(url: str, topic: str, count: int) -> list[bytes]:
    """``count`` unbatched messages from the official client."""
    return await official_backlog(url, topic, values(count))


async def test_the_queue_never_holds_more_than_its_size(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    total = 100 * N
    sent = await backlog(pulsar_broker.service_url, topic, total)
    async with msgclient.Client(pulsar_broker.service_url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "flow", receiver_queue_size=N, **SHARED))
        assert wire.flows() == [N]  # the first grant: the whole queue, at subscribe

        received: list[msgclient.Message] = []
        taken_at_flow = [0]  # how many messages were taken when each FLOW went out
        for taken in range(1, total + 1):
            if taken % 25 == 1:
                # Slowly: let the broker fill every permit it has, then watch that it
                # sends nothing beyond them.
                granted = sum(wire.flows())

                def all_dispatched(granted: int = granted) -> bool:
                    return consumer.stats().received == granted

                await wait_until(all_dispatched, f"{granted} messages dispatched")
                await asyncio.sleep(0.005)  # anything beyond the permits would come now
                assert consumer.stats().received == granted
                assert consumer.stats().queue_depth == granted - len(received) <= N
            message = await within(consumer.receive())
            consumer.acknowledge(message)
            received.append(message)
            stats = consumer.stats()
            assert stats.queue_depth <= N
            assert stats.received - taken == stats.queue_depth  # no duplicate, nothing lost
            flows = wire.flows()
            assert sum(flows) == stats.permits_granted
            assert sum(flows) <= taken + N  # never more permits out than the queue holds
            if len(flows) > len(taken_at_flow):
                assert len(flows) == len(taken_at_flow) + 1  # one refill at a time
                taken_at_flow.append(taken)
        await assert_no_message(consumer)  # exactly once: nothing beyond the backlog

    assert [m.data() for m in received] == sent
    assert len({m.message_id() for m in received}) == total
    flows = wire.flows()
    refills = flows[1:]
    assert refills, "the queue was never refilled"
    assert all(permits >= N // 2 for permits in refills)
    # Each refill went out only once half the queue had been taken since the previous one.
    assert all(b - a >= N // 2 for a, b in itertools.pairwise(taken_at_flow))
    assert sum(flows) >= total  # and enough were granted to receive everything


async def test_zero_queue_asks_for_one_message_per_receive(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    url = pulsar_broker.service_url
    sent = await backlog(url, topic, 10)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "zero", receiver_queue_size=0, **SHARED))
        assert wire.flows() == []  # nothing is asked for until the application receives
        for count in range(1, len(sent) + 1):
            message = await within(consumer.receive())
            assert message.data() == sent[count - 1]
            consumer.acknowledge(message)
            assert wire.flows() == [1] * count
            assert consumer.stats().queue_depth == 0
        # The broker had one permit per receive: nothing arrives unasked.
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await consumer.receive(timeout_millis=QUIET_MS)
        assert consumer.stats().received == len(sent)
        # That receive asked for one more (FLOW 1); it is still outstanding, so the next
        # receive asks for nothing new and gets the next message published.
        assert wire.flows() == [1] * (len(sent) + 1)
        await official_produce(url, topic, [Publish(b"late")], batching_enabled=False)
        late = await within(consumer.receive())
        assert late.data() == b"late"
        assert wire.flows() == [1] * (len(sent) + 1)
        consumer.acknowledge(late)


async def test_pause_stops_grants_and_resume_restarts_them(
    pulsar_broker: PulsarBroker, topic: str, wire: WireTap
) -> None:
    url = pulsar_broker.service_url
    sent = await backlog(url, topic, 10 * N)
    async with msgclient.Client(url, operation_timeout_seconds=5) as client:
        consumer = await within(client.subscribe(topic, "pause", receiver_queue_size=N, **SHARED))
        await wait_until(lambda: consumer.stats().queue_depth == N, "a full queue")
        consumer.pause_message_listener()
        first = await receive_n(consumer, N)  # what was queued still comes
        assert wire.flows() == [N]  # but no refill while paused
        with pytest.raises(msgclient.ReceiveTimeoutError):
            await consumer.receive(timeout_millis=QUIET_MS)
        assert consumer.stats().received == N

        consumer.resume_message_listener()
        assert wire.flows() == [N, N]  # the permits freed while paused, in one grant
        rest = await receive_n(consumer, len(sent) - N)
        for message in [*first, *rest]:
            consumer.acknowledge(message)
        await assert_no_message(consumer)
    assert [m.data() for m in [*first, *rest]] == sent
