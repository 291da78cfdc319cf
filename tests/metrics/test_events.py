"""The rarer counters on a real broker: dead letters, reconnects; and the blocking
facade's stats()."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker
from tests.metrics.helpers import TIMEOUT, wait_until


async def within(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, TIMEOUT)


async def test_a_message_past_its_redeliveries_is_counted_dead_lettered(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    # The producer on a client of its own: pulsar-lite now and then gives a message sent
    # on the consumer's connection a redelivery count of 3 or 4 at once (docs/consumer.md;
    # such a message is dead-lettered on arrival, which this test counts the same).
    async with (
        msgclient.Client(pulsar_broker.service_url) as sender,
        msgclient.Client(pulsar_broker.service_url) as client,
    ):
        consumer = await within(
            client.subscribe(
                topic,
                "dead-letters",
                consumer_type=msgclient.ConsumerType.Shared,
                initial_position=msgclient.InitialPosition.Earliest,
                negative_ack_redelivery_delay_ms=50,
                dead_letter_policy=msgclient.DeadLetterPolicy(max_redeliver_count=1),
            )
        )
        producer = await within(sender.create_producer(topic))
        await within(producer.send(b"doomed"))

        async def nack_whatever_comes() -> None:
            while not consumer.stats().dead_lettered:
                with contextlib.suppress(msgclient.ReceiveTimeoutError):
                    consumer.negative_acknowledge(await consumer.receive(50))

        await within(nack_whatever_comes())
        stats = consumer.stats()
        assert stats.dead_lettered == 1
        assert stats.redeliveries_requested <= stats.negatively_acknowledged <= 2
        assert stats.partitions[0].dead_lettered == 1
        # the dead-letter producer is the client's: it sent one message
        assert client.stats().producers == 1


async def test_reconnects_are_counted_per_producer_consumer_and_client(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    async with msgclient.Client(
        pulsar_broker.service_url, initial_backoff_interval_ms=10
    ) as client:
        consumer = await within(client.subscribe(topic, "reconnects"))
        producer = await within(client.create_producer(topic))
        assert client.stats().connections_opened == 1
        client._backend.pool.drop_all("the test drops it")  # type: ignore[attr-defined]
        await wait_until(
            lambda: producer.stats().reconnects == 1 and consumer.stats().reconnects == 1,
            "both registered again",
        )
        await within(producer.send(b"after"))
        assert (await within(consumer.receive(int(TIMEOUT * 1000)))).data() == b"after"
        stats = client.stats()
        assert (stats.reconnects, stats.connections_opened, stats.connections_open) == (2, 2, 1)
        assert producer.stats().partitions[0].reconnects == 1


def test_the_blocking_facade_has_the_same_stats(pulsar_broker: PulsarBroker, topic: str) -> None:
    with msgclient.blocking.Client(pulsar_broker.service_url) as client:
        consumer = client.subscribe(topic, "blocking")
        producer = client.create_producer(topic)
        for value in (b"a", b"bb", b"ccc"):
            producer.send(value)
        for _ in range(3):
            consumer.acknowledge(consumer.receive(int(TIMEOUT * 1000)))
        sent, received = producer.stats(), consumer.stats()
        assert (sent.messages_sent, sent.bytes_sent) == (3, 6)
        assert (received.received, received.bytes_received, received.acknowledged) == (3, 6, 3)
        assert (client.stats().producers, client.stats().consumers) == (1, 1)
