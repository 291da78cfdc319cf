"""msgclient runs on uvloop too (its transports are not asyncio.Transport subclasses): a
produce and a consume on each embedded broker, on a uvloop event loop."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker


async def round_trip(url: str, topic: str, **consumer_options: object) -> list[bytes]:
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic,
            "loops",
            initial_position=msgclient.InitialPosition.Earliest,
            **consumer_options,  # type: ignore[arg-type]
        )
        producer = await client.create_producer(topic)
        for i in range(20):
            await producer.send_async(b"m%d" % i)
        await producer.flush()
        received = [(await consumer.receive(10_000)).data() for _ in range(20)]
        for message in received:
            assert message.startswith(b"m")
        await consumer.close()
    return received


def run_on_uvloop(url: str, topic: str, **consumer_options: object) -> list[bytes]:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        loop_type = runner.get_loop().__class__.__module__
        assert loop_type.startswith("uvloop")
        return runner.run(asyncio.wait_for(round_trip(url, topic, **consumer_options), 60))


@pytest.mark.parametrize("broker", ["pulsar", "kafka"])
def test_produce_and_consume_on_uvloop(
    broker: str, pulsar_broker: PulsarBroker, kafka_broker: KafkaBroker, topic: str
) -> None:
    if broker == "pulsar":
        received = run_on_uvloop(pulsar_broker.service_url, topic)
    else:
        received = run_on_uvloop(
            kafka_broker.service_url,
            topic,
            consumer_type=msgclient.ConsumerType.Failover,
            session_timeout_ms=4000,
            heartbeat_interval_ms=300,
            rebalance_timeout_ms=4000,
        )
    assert sorted(received) == sorted(b"m%d" % i for i in range(20))
