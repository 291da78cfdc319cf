"""The producer when its broker goes away: typed send timeouts, or exactly-once resend on return.

Each test runs a broker of its own (it stops and restarts it) with a data directory that
survives the stop, so that the restarted broker still has the topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from tests.pulsar.helpers import (
    assert_nothing_more,
    assert_same_id,
    official_client,
    receive,
    settle,
    strictly_increasing,
    subscribe,
    within,
)

SEND_TIMEOUT_S = 2.0
TIMEOUT_MARGIN_S = 1.5  # the timer may fire this much late on a loaded machine
SCHEDULING_SLACK_S = 0.05  # loop.time() vs time.monotonic() granularity


@pytest.fixture
def broker(make_pulsar_broker: Callable[..., PulsarBroker], tmp_path: Path) -> PulsarBroker:
    # Our own data dir: stop() deletes a temporary one, and then the restart would be empty.
    return make_pulsar_broker(data_dir=tmp_path / "pulsar")


async def stop(broker: PulsarBroker) -> None:
    """SIGTERM and reap the broker; off the loop, so msgclient sees the connection drop."""
    await asyncio.to_thread(broker.stop)


async def start(broker: PulsarBroker) -> None:
    await asyncio.to_thread(broker.start)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_sends_fail_with_send_timeout_while_the_broker_is_down(
    broker: PulsarBroker, topic: str, batching: bool
) -> None:
    count = 50
    callback_errors: list[BaseException | None] = []
    failed_at: list[float] = []

    def callback(error: BaseException | None, message_id: msgclient.MessageId | None) -> None:
        callback_errors.append(error)
        failed_at.append(time.monotonic())

    async with msgclient.Client(broker.service_url) as client:
        producer = await client.create_producer(
            topic,
            send_timeout_millis=int(SEND_TIMEOUT_S * 1000),
            batching_enabled=batching,
        )
        await within(producer.send(b"before"))
        await stop(broker)

        started = time.monotonic()
        # Half with futures, half with a callback each (and then no future).
        futures = [await producer.send_async(b"f%d" % i) for i in range(count // 2)]
        for i in range(count // 2):
            assert await producer.send_async(b"c%d" % i, callback) is None
        outcomes = await within(
            asyncio.gather(*futures, return_exceptions=True), SEND_TIMEOUT_S + 5
        )
        await within(producer.flush(), SEND_TIMEOUT_S)  # the callbacks' messages failed too
        elapsed = time.monotonic() - started

        assert all(isinstance(o, msgclient.SendTimeoutError) for o in outcomes), outcomes
        assert len(outcomes) == count // 2  # every future failed: none dropped, none succeeded
        assert len(callback_errors) == count // 2
        assert all(isinstance(e, msgclient.SendTimeoutError) for e in callback_errors)
        assert SEND_TIMEOUT_S - SCHEDULING_SLACK_S <= elapsed <= SEND_TIMEOUT_S + TIMEOUT_MARGIN_S
        assert max(failed_at) - started <= SEND_TIMEOUT_S + TIMEOUT_MARGIN_S
        # What failed gave its room back.
        assert producer.pending_count == 0
        assert client.memory_used == 0

        await start(broker)
        after = await within(producer.send(b"after"))  # a timeout does not wedge the producer

    with official_client(broker.service_url) as official:
        consumer = subscribe(official, topic)
        received = await receive(consumer, 2)
        await assert_nothing_more(consumer)  # what timed out was never written, nor resent later
    assert [m.data() for m in received] == [b"before", b"after"]
    assert_same_id(after, received[1].message_id())


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_pending_messages_arrive_exactly_once_after_a_restart(
    broker: PulsarBroker, topic: str, batching: bool
) -> None:
    count = 200
    values = [b"pending-%03d" % i for i in range(count)]
    url = broker.service_url
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(
            topic, send_timeout_millis=20_000, batching_enabled=batching
        )
        first = await within(producer.send(b"before"))
        await stop(broker)
        futures = [await producer.send_async(v) for v in values]
        # An outage of about a second: several reconnect attempts (backoff from 100 ms) fail.
        await asyncio.sleep(1.0)
        assert not any(f.done() for f in futures)
        await start(broker)

        ids = await settle(futures)  # every future resolves, with an id
        assert strictly_increasing([first, *ids])
        after = await within(producer.send(b"after"))  # the producer keeps working
        assert after > ids[-1]
        assert client.memory_used == 0

    with official_client(url) as official:
        consumer = subscribe(official, topic)  # Earliest: sees what was sent before it
        received = await receive(consumer, count + 2)
        await assert_nothing_more(consumer)  # no duplicates of the resent messages
    assert [m.data() for m in received] == [b"before", *values, b"after"]
    for ours, message in zip([first, *ids, after], received, strict=True):
        assert_same_id(ours, message.message_id())
