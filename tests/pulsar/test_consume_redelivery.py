"""Redelivery on pulsar-lite: negative acks (fixed delay and backoff), dead-letter and retry
topics, the ack timeout.

Shared subscriptions throughout: pulsar-lite honours REDELIVER_UNACKNOWLEDGED_MESSAGES
(and counts redeliveries) only on non-partitioned Shared and Key_Shared subscriptions
(brokers.md quirk), and it dispatches duplicates on Exclusive/Failover.

Times are measured from the call that starts the delay (the nack, or the receive that
starts the ack timeout) to the return of the receive that gets the message again. Our
timers never fire early (the timing wheel fires at the first tick at or after a deadline),
so the lower bounds are tight; the upper bounds allow a tick plus a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import msgclient
from msgclient.contract import ConsumerEvents
from msgclient.core.receive.dead_letters import (
    DELAY_TIME,
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    RECONSUME_TIMES,
)
from msgclient.embedded import PulsarBroker
from msgclient.options import ClientOptions, ConsumerOptions
from msgclient.url import parse_service_url
from protocols.pulsarwire.adapter import PulsarBackend
from protocols.pulsarwire.consumer import PulsarConsumerTransport
from protocols.pulsarwire.framing import Frame
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.loop_lag import LoopLag
from tests.pulsar.consume_helpers import (
    EARLIEST,
    SLACK_S,
    assert_no_message,
    full_name,
    payloads,
    produce,
    receive_n,
    receive_one,
)
from tests.pulsar.helpers import TIMEOUT, assert_nothing_more, official_client, receive, subscribe

SUB = "redelivery"
NACK_DELAY_S = 0.5
NACK_TICK_S = 0.1  # NegativeAcksTracker's wheel tick
SHARED = msgclient.ConsumerType.Shared


@pytest.fixture
async def client(pulsar_broker: PulsarBroker) -> AsyncIterator[msgclient.Client]:
    async with msgclient.Client(pulsar_broker.service_url, operation_timeout_seconds=5) as client:
        yield client


def assert_delay(elapsed: float, expected: float, tick: float, lag: LoopLag) -> None:
    """Never early; late by at most a tick and what the loop's lateness and the broker's
    round trip allow (the loop_lag fixture)."""
    assert expected - SLACK_S <= elapsed <= expected + tick + lag.allowance(), (
        f"redelivered after {elapsed:.3f} s, expected {expected:g} s (tick {tick:g} s, "
        f"loop late by up to {lag.worst:.3f} s)"
    )


async def test_a_nacked_message_comes_back_after_the_delay_with_its_count(
    client: msgclient.Client, topic: str, loop_lag: LoopLag
) -> None:
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        negative_ack_redelivery_delay_ms=int(NACK_DELAY_S * 1000),
    )
    await produce(client, topic, [b"keep", b"retry"], batching_enabled=False)
    first = {m.data(): m for m in await receive_n(consumer, 2)}
    consumer.acknowledge(first[b"keep"])
    message = first[b"retry"]
    assert message.redelivery_count() == 0

    for expected_count in (1, 2):
        consumer.negative_acknowledge(message)
        nacked_at = time.monotonic()
        again, received_at = await receive_one(consumer)
        assert again.data() == b"retry"  # only the nacked message, not the acked one
        assert again.message_id() == message.message_id()
        assert again.redelivery_count() == expected_count
        assert_delay(received_at - nacked_at, NACK_DELAY_S, NACK_TICK_S, loop_lag)
        message = again

    consumer.acknowledge(message)
    # Longer than the nack delay: an acked message is not redelivered.
    await assert_no_message(consumer, int(NACK_DELAY_S * 1000) + 300)
    assert consumer.stats().negatively_acknowledged == 2
    await consumer.close()


async def test_backoff_delays_grow_with_the_redelivery_count(
    client: msgclient.Client, topic: str, loop_lag: LoopLag
) -> None:
    backoff = msgclient.MultiplierRedeliveryBackoff(0.2, 2.0, 2)
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        negative_ack_redelivery_backoff=backoff,
    )
    await produce(client, topic, [b"poison"], batching_enabled=False)
    message, _ = await receive_one(consumer)
    gaps: list[float] = []
    counts: list[int] = []
    for _ in range(4):
        consumer.negative_acknowledge(message)
        nacked_at = time.monotonic()
        message, received_at = await receive_one(consumer)
        gaps.append(received_at - nacked_at)
        counts.append(message.redelivery_count())
    consumer.acknowledge(message)

    assert counts == [1, 2, 3, 4]
    # The delay of the nack of a message with redelivery count n: 0.2 s * 2**n.
    for count, gap in zip(range(4), gaps, strict=True):
        assert_delay(gap, backoff.next(count), NACK_TICK_S, loop_lag)
    # (So the gaps grow: each is at least its delay. Not compared with each other: a
    # late first redelivery may take longer than the second's 0.4 s.)
    assert [backoff.next(n) for n in range(4)] == [0.2, 0.4, 0.8, 1.6]
    await consumer.close()


async def test_dead_letter_topic_after_max_redeliveries(
    pulsar_broker: PulsarBroker, client: msgclient.Client, topic: str
) -> None:
    dlq_topic = f"{full_name(topic)}-{SUB}-DLQ"  # built from the full name of the topic
    options = {
        "consumer_type": SHARED,
        "initial_position": EARLIEST,
        "negative_ack_redelivery_delay_ms": 100,
        "dead_letter_policy": msgclient.DeadLetterPolicy(max_redeliver_count=2),
    }
    consumer = await client.subscribe(topic, SUB, **options)
    # Subscribed before anything is dead-lettered (and from the earliest anyway).
    dlq = await client.subscribe(dlq_topic, "dlq", consumer_type=SHARED, initial_position=EARLIEST)
    properties = {"origin": "test", "n": "1"}
    producer = await client.create_producer(topic, batching_enabled=False)
    poison_id = await producer.send(
        b"poison", partition_key="k-1", properties=properties, event_timestamp=1_700_000_000_000
    )
    await producer.send(b"fine")
    await producer.close()

    with official_client(pulsar_broker.service_url) as official:
        official_dlq = subscribe(official, dlq_topic, "official-dlq")

        received = {m.data(): m for m in await receive_n(consumer, 2)}
        consumer.acknowledge(received[b"fine"])
        poison = received[b"poison"]
        # Delivered with counts 0, 1 and 2; the nack of the third goes to the DLQ instead.
        for count in (0, 1, 2):
            assert poison.redelivery_count() == count
            consumer.negative_acknowledge(poison)
            if count < 2:
                poison, _ = await receive_one(consumer)

        (dead,) = await receive_n(dlq, 1)
        assert dead.topic_name() == dlq_topic
        assert dead.data() == b"poison"
        assert dead.partition_key() == "k-1"
        assert dead.event_timestamp() == 1_700_000_000_000
        assert dead.properties() == {
            **properties,
            REAL_TOPIC: full_name(topic),
            ORIGIN_MESSAGE_ID: str(poison_id),
        }
        dlq.acknowledge(dead)

        (theirs,) = await receive(official_dlq, 1)
        assert theirs.data() == b"poison"
        assert theirs.partition_key() == "k-1"
        assert theirs.event_timestamp() == 1_700_000_000_000
        assert theirs.properties() == dead.properties()
        assert theirs.topic_name() == dlq_topic
        await assert_nothing_more(official_dlq)
        official_dlq.close()

    # Acked on the original subscription once in the DLQ: not redelivered, not even to a
    # new consumer of the subscription.
    await assert_no_message(consumer, 500)
    await assert_no_message(dlq)
    await consumer.close()
    again = await client.subscribe(topic, SUB, **options)
    await assert_no_message(again)
    await again.close()
    await dlq.close()


async def test_redeliver_unacknowledged_sends_what_passes_the_limit_to_the_dlq(
    client: msgclient.Client, topic: str
) -> None:
    """Whatever redelivers a message (here redeliver_unacknowledged_messages, which names
    no message), one that arrives past max_redeliver_count goes to the dead-letter topic
    on receipt instead of to the application (found by pulsar-client's own test suite)."""
    dlq_topic = f"{full_name(topic)}-{SUB}-DLQ"
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        dead_letter_policy=msgclient.DeadLetterPolicy(max_redeliver_count=2),
    )
    dlq = await client.subscribe(dlq_topic, "dlq", consumer_type=SHARED, initial_position=EARLIEST)
    producer = await client.create_producer(topic)
    sent = {b"m-%d" % i for i in range(10)}
    for value in sent:
        await producer.send_async(value)
    await producer.flush()
    for count in (0, 1, 2):  # delivered three times: the first, and two redeliveries
        received = await receive_n(consumer, 10)
        assert {m.data() for m in received} == sent
        assert {m.redelivery_count() for m in received} == {count}
        consumer.redeliver_unacknowledged_messages()
    dead = await receive_n(dlq, 10)
    assert sorted(m.data() for m in dead) == sorted(sent)
    await assert_no_message(consumer, 500)  # never delivered past the limit
    await assert_no_message(dlq)


async def test_dead_letter_a_whole_batch(client: msgclient.Client, topic: str) -> None:
    dlq_topic = f"{full_name(topic)}-{SUB}-DLQ"
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=msgclient.DeadLetterPolicy(max_redeliver_count=1),
    )
    dlq = await client.subscribe(dlq_topic, "dlq", consumer_type=SHARED, initial_position=EARLIEST)
    values = [b"b-%d" % i for i in range(3)]
    ids = await produce(client, topic, values, batching_max_publish_delay_ms=50)
    assert len({(i.ledger_id, i.entry_id) for i in ids}) == 1  # one batched entry

    for count in (0, 1):  # every message of the batch nacked, twice
        messages = await receive_n(consumer, 3)
        assert [(m.data(), m.redelivery_count()) for m in messages] == [(v, count) for v in values]
        for message in messages:
            consumer.negative_acknowledge(message)
    dead = await receive_n(dlq, 3)
    assert sorted(payloads(dead)) == values
    assert {m.properties()[ORIGIN_MESSAGE_ID] for m in dead} == {str(i) for i in ids}
    # Each dead letter acked the original: the entry's last ack acks the entry.
    await assert_no_message(consumer, 500)
    await consumer.close()
    again = await client.subscribe(topic, SUB, consumer_type=SHARED, initial_position=EARLIEST)
    await assert_no_message(again)
    await again.close()
    await dlq.close()


async def test_a_nacked_message_of_a_batch_comes_back_with_its_entry(
    client: msgclient.Client, topic: str
) -> None:
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        negative_ack_redelivery_delay_ms=100,
    )
    values = [b"e-%d" % i for i in range(5)]
    await produce(client, topic, values, batching_max_publish_delay_ms=50)
    messages = await receive_n(consumer, 5)
    for message in messages[:4]:
        consumer.acknowledge(message)  # held back: the entry is not complete
    consumer.negative_acknowledge(messages[4])
    # The broker redelivers entries: the whole batch comes back, the 4 acked messages with
    # the nacked one (as with the Java client without batch-index acks; pulsar-lite would
    # ignore the ack set anyway, brokers.md).
    again = await receive_n(consumer, 5)
    assert [(m.data(), m.redelivery_count()) for m in again] == [(v, 1) for v in values]
    consumer.acknowledge(again[4])  # completes the entry: acked on the broker
    await assert_no_message(consumer, 500)
    await consumer.close()
    after = await client.subscribe(topic, SUB, consumer_type=SHARED, initial_position=EARLIEST)
    await assert_no_message(after)
    await after.close()


async def test_reconsume_later_goes_to_the_retry_topic_and_is_acked(
    client: msgclient.Client, topic: str
) -> None:
    retry_topic = f"{full_name(topic)}-{SUB}-RETRY"
    options = {
        "consumer_type": SHARED,
        "initial_position": EARLIEST,
        "dead_letter_policy": msgclient.DeadLetterPolicy(max_redeliver_count=3),
    }
    consumer = await client.subscribe(topic, SUB, **options)
    retry = await client.subscribe(
        retry_topic, "retry", consumer_type=SHARED, initial_position=EARLIEST
    )
    (original_id,) = await produce(
        client, topic, [b"later"], keys=["k-2"], properties={"p": "v"}, batching_enabled=False
    )
    message, _ = await receive_one(consumer)
    await asyncio.wait_for(consumer.reconsume_later(message, 2000), TIMEOUT)

    # pulsar-lite does not support deliver_at_time: nothing holds the message back for the
    # 2 s asked, so it is there at once (with a broker that delays, it would not be yet).
    retried, _ = await receive_one(retry, timeout=1.5)
    assert retried.topic_name() == retry_topic
    assert retried.data() == b"later"
    assert retried.partition_key() == "k-2"
    assert retried.properties() == {
        "p": "v",
        REAL_TOPIC: full_name(topic),
        ORIGIN_MESSAGE_ID: str(original_id),
        RECONSUME_TIMES: "1",
        DELAY_TIME: "2000",
    }
    retry.acknowledge(retried)

    # Acked on the original subscription: a new consumer of it gets nothing.
    await consumer.close()
    again = await client.subscribe(topic, SUB, **options)
    await assert_no_message(again)
    await again.close()
    await retry.close()


async def reconsume_until_dead(
    client: msgclient.Client, topic: str
) -> tuple[list[tuple[str, str | None]], msgclient.Message]:
    """With retry_enable (the Java pattern: the consumer subscribes to the retry topic
    too) and max_redeliver_count=2, reconsume_later one message until it is dead-lettered:
    (topic, RECONSUMETIMES) of each delivery, and the dead letter."""
    dlq_topic = f"{full_name(topic)}-{SUB}-DLQ"
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        dead_letter_policy=msgclient.DeadLetterPolicy(max_redeliver_count=2),
        retry_enable=True,
    )
    dlq = await client.subscribe(dlq_topic, "dlq", consumer_type=SHARED, initial_position=EARLIEST)
    await produce(client, topic, [b"again"], batching_enabled=False)
    seen: list[tuple[str, str | None]] = []
    for _ in range(3):
        # pulsar-lite does not enforce deliver_at_time: each retry is there at once.
        message, _ = await receive_one(consumer)
        seen.append((message.topic_name(), message.properties().get(RECONSUME_TIMES)))
        await asyncio.wait_for(consumer.reconsume_later(message, 100), TIMEOUT)
    dead, _ = await receive_one(dlq)
    await assert_no_message(consumer)
    await consumer.close()
    await dlq.close()
    return seen, dead


async def test_reconsume_later_counts_up_then_dead_letters(
    client: msgclient.Client, topic: str
) -> None:
    retry_topic = f"{full_name(topic)}-{SUB}-RETRY"
    seen, dead = await reconsume_until_dead(client, topic)
    # Retried twice (max_redeliver_count=2) on the topic's own retry topic (not one named
    # after the retry topic), then the third reconsume_later dead-letters it.
    assert seen == [(full_name(topic), None), (retry_topic, "1"), (retry_topic, "2")]
    assert dead.topic_name() == f"{full_name(topic)}-{SUB}-DLQ"
    assert dead.data() == b"again"
    assert dead.properties()[REAL_TOPIC] == full_name(topic)


async def test_reconsume_later_dead_letter_counts_the_last_attempt_as_java(
    client: msgclient.Client, topic: str
) -> None:
    # The Java client's doReconsumeLater counts the reconsume that dead-letters the message
    # too: RECONSUMETIMES is max_redeliver_count + 1, with this call's DELAY_TIME.
    _, dead = await reconsume_until_dead(client, topic)
    assert dead.properties()[RECONSUME_TIMES] == "3"
    assert dead.properties()[DELAY_TIME] == "100"


class _MetadataRecorder(PulsarConsumerTransport):
    """The transport, keeping each dispatched entry's MessageMetadata (what the Message
    does not expose)."""

    metadata: list[pb.MessageMetadata]
    arrived: asyncio.Event

    def on_message(self, frame: Frame) -> None:
        assert frame.metadata is not None
        self.metadata.append(frame.metadata)
        self.arrived.set()
        super().on_message(frame)


class _Ignore(ConsumerEvents):
    def on_messages(self, messages: list[msgclient.Message]) -> None:
        pass

    def on_disconnected(self, error: Exception) -> None:
        pass

    def on_active_consumer_change(self, is_active: bool) -> None:
        pass

    def on_reached_end_of_topic(self) -> None:
        pass

    def on_partition_revoked(self) -> None:
        raise AssertionError("Pulsar never revokes a partition")


async def test_reconsume_later_asks_the_broker_to_delay_the_retry(
    pulsar_broker: PulsarBroker, client: msgclient.Client, topic: str
) -> None:
    # pulsar-lite keeps deliver_at_time in the stored metadata (the official client's
    # deliver_after shows up there) but does not enforce it: read it off the wire.
    retry_topic = f"{full_name(topic)}-{SUB}-RETRY"
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        dead_letter_policy=msgclient.DeadLetterPolicy(max_redeliver_count=3),
    )
    await produce(client, topic, [b"later"], batching_enabled=False)
    message, _ = await receive_one(consumer)
    await asyncio.wait_for(consumer.reconsume_later(message, 5000), TIMEOUT)
    await consumer.close()

    backend = PulsarBackend(
        parse_service_url(pulsar_broker.service_url), ClientOptions(operation_timeout_seconds=5)
    )
    try:
        options = ConsumerOptions(consumer_type=SHARED, initial_position=EARLIEST)
        recorder = _MetadataRecorder(backend.context, retry_topic, -1, "raw", options, _Ignore())
        recorder.metadata, recorder.arrived = [], asyncio.Event()
        await asyncio.wait_for(recorder.connect(), TIMEOUT)
        recorder.flow(1)
        await asyncio.wait_for(recorder.arrived.wait(), TIMEOUT)
    finally:
        await asyncio.wait_for(backend.close(), TIMEOUT)
    (metadata,) = recorder.metadata
    assert metadata.HasField("deliver_at_time")
    assert metadata.deliver_at_time - metadata.publish_time == pytest.approx(5000, abs=100)


async def test_ack_timeout_redelivers_what_was_not_acked(
    client: msgclient.Client, topic: str, loop_lag: LoopLag
) -> None:
    ack_timeout_s, tick_s = 1.0, 0.1
    consumer = await client.subscribe(
        topic,
        SUB,
        consumer_type=SHARED,
        initial_position=EARLIEST,
        unacked_messages_timeout_ms=int(ack_timeout_s * 1000),
        tick_duration_ms=int(tick_s * 1000),
    )
    await produce(client, topic, [b"acked", b"forgotten"], batching_enabled=False)
    acked, forgotten = await receive_n(consumer, 2)
    received_at = time.monotonic()  # the timeouts start at receive
    assert (acked.data(), forgotten.data()) == (b"acked", b"forgotten")
    consumer.acknowledge(acked)

    again, again_at = await receive_one(consumer)
    assert again.data() == b"forgotten"
    assert again.message_id() == forgotten.message_id()
    assert again.redelivery_count() == 1
    assert_delay(again_at - received_at, ack_timeout_s, tick_s, loop_lag)

    consumer.acknowledge(again)
    # Past another full ack timeout: neither the acked message nor the one acked on its
    # redelivery comes back.
    await assert_no_message(consumer, int(ack_timeout_s * 1000) + 300)
    await consumer.close()
