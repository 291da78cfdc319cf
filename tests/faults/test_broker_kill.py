"""The broker process SIGKILLed and restarted in the middle of producing and of consuming.

pulsar-lite keeps its data across a kill (brokers.md), so nothing the client was told is
stored may be missing afterwards. tansu keeps everything in memory: a kill loses every topic
and offset, so on Kafka only what the client promises itself is checked (every send ends,
nothing is stored that was not sent, the client carries on); tests/kafka/test_faults.py has
the SIGTERM restarts.

Clients connect straight to the broker here: the kill itself is the fault.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

import pytest

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.faults.conftest import (
    FAST_CLIENT,
    LATE_S,
    TIMEOUT,
    Figures,
    ProxiedKafka,
    assert_no_leaked_tasks,
    client_tasks,
    kill_and_restart,
)
from tests.faults.helpers import (
    AckedReceiver,
    assert_acks_final,
    assert_in_send_order,
    produce_direct,
    read_all,
    tally,
)
from tests.kafka.helpers import read

EARLIEST = msgclient.InitialPosition.Earliest
SHARED = msgclient.ConsumerType.Shared
ACK_GROUP_S = 0.1  # acknowledgment_group_time_ms default: acks wait this long to go out


async def kill_during(broker: PulsarBroker | KafkaBroker, before_kill: Callable[[], None]) -> float:
    """Kill and restart ``broker``, calling ``before_kill`` just before the SIGKILL; return
    when the broker accepted connections again."""
    before_kill()
    await kill_and_restart(broker)
    return time.monotonic()


async def test_pulsar_broker_killed_while_producing(
    own_pulsar: PulsarBroker, topic: str, figures: type[Figures]
) -> None:
    count = 3000
    kill_at = 1000
    values = [b"kill-%05d" % i for i in range(count)]
    futures: list[asyncio.Future[msgclient.MessageId]] = []
    unconfirmed: set[bytes] = set()
    killed_at = [0.0]

    def note() -> None:
        killed_at[0] = time.monotonic()
        unconfirmed.update(values[j] for j, f in enumerate(futures) if not f.done())

    tasks_before = client_tasks()
    async with msgclient.Client(own_pulsar.service_url, **FAST_CLIENT) as client:
        producer = await client.create_producer(topic, send_timeout_millis=20_000)
        restarted: asyncio.Future[float] | None = None
        for i, value in enumerate(values):
            futures.append(await producer.send_async(value))
            if i == kill_at:  # the producer keeps sending during the outage
                restarted = asyncio.ensure_future(kill_during(own_pulsar, note))
            if i % 20 == 0:
                await asyncio.sleep(0.002)
        assert restarted is not None
        back_at = await asyncio.wait_for(restarted, TIMEOUT)
        # Every send future ends: confirmed, or a typed error.
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 30)
        done_at = time.monotonic()
        failures = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(f, msgclient.MsgClientError) for f in failures), failures[:3]
        assert not failures  # the outage is far shorter than the send timeout
    await assert_no_leaked_tasks(tasks_before)
    received = await read_all(own_pulsar, topic, count)
    lost, duplicated = tally(values, received)
    assert not lost  # every confirmed message survived the kill
    assert_in_send_order(values, received)
    # No dedup on pulsar-lite: stored before the kill, receipt lost with it, resent after.
    assert duplicated <= unconfirmed
    figures.add(
        "pulsar SIGKILL + restart, produce",
        down_s=back_at - killed_at[0],
        all_confirmed_after_restart_s=done_at - back_at,
        lost=len(lost),
        duplicated=len(duplicated),
        unconfirmed_at_kill=len(unconfirmed),
    )


@pytest.mark.parametrize("receipts", [True, False], ids=["ack-receipts", "no-receipts"])
async def test_pulsar_broker_killed_while_consuming(
    own_pulsar: PulsarBroker, topic: str, figures: type[Figures], receipts: bool
) -> None:
    count = 1000
    values = [b"kc-%05d" % i for i in range(count)]
    await produce_direct(own_pulsar, topic, values)
    killed_at = [0.0]
    restarted: list[asyncio.Future[float]] = []

    def kill_at_300(delivered: int) -> None:
        if delivered == 300:
            restarted.append(
                asyncio.ensure_future(
                    kill_during(own_pulsar, lambda: killed_at.__setitem__(0, time.monotonic()))
                )
            )

    tasks_before = client_tasks()
    async with msgclient.Client(own_pulsar.service_url, **FAST_CLIENT) as client:
        consumer = await client.subscribe(
            topic,
            "sub",
            consumer_type=SHARED,
            initial_position=EARLIEST,
            receiver_queue_size=100,
            ack_receipt_enabled=receipts,
        )
        receiver = AckedReceiver(consumer, pace=0.001)
        await receiver.until(count, kill_at_300)
        back_at = await asyncio.wait_for(restarted[0], TIMEOUT)
        await receiver.drain()
    await assert_no_leaked_tasks(tasks_before)
    lost, _ = tally(values, [v for v, _ in receiver.deliveries])
    assert not lost
    delivered = collections.Counter(v for v, _ in receiver.deliveries)
    redelivered = {v for v, n in delivered.items() if n > 1}
    if receipts:
        assert_acks_final(receiver, killed_at[0])
    else:
        # Without receipts an ack is final once the broker has it: those made in the last
        # group interval before the kill (not yet written) or written to the dying socket
        # are lost with it; acks made while disconnected go out after the reconnect, where
        # pulsar-lite ignores them (quirk: "acks for messages that are awaiting redelivery
        # are ignored"). Any other acknowledged message must not come back.
        first_delivery: dict[bytes, float] = {}
        for v, at in receiver.deliveries:
            first_delivery.setdefault(v, at)
        early = [v for v in redelivered if first_delivery[v] < killed_at[0] - ACK_GROUP_S - LATE_S]
        assert not early, f"{len(early)} acked well before the kill came back: {early[:3]}"
    assert max(delivered.values()) <= 2, delivered.most_common(3)
    figures.add(
        f"pulsar SIGKILL + restart, consume ({'ack receipts' if receipts else 'no receipts'})",
        down_s=back_at - killed_at[0],
        lost=len(lost),
        redelivered=len(redelivered),
        acks_failed=len(receiver.ack_failed),
    )


async def test_kafka_broker_killed_while_producing_and_consuming(
    proxied_kafka: ProxiedKafka, topic: str, figures: type[Figures]
) -> None:
    """SIGKILL behind the proxy: the proxy stays up, so the client's connections end with
    an EOF and its reconnects are accepted and closed at once until tansu is back. Every
    send ends (confirmed or a typed error), the consumer carries on with what is sent after
    the restart, and nothing is stored twice."""
    count = 4000
    kill_at = 1500
    values = [b"%d" % i for i in range(count)]
    group = {
        "consumer_type": msgclient.ConsumerType.Failover,
        "initial_position": EARLIEST,
        "session_timeout_ms": 4000,
        "heartbeat_interval_ms": 300,
        "rebalance_timeout_ms": 4000,
        "fetch_max_wait_ms": 100,
    }
    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **FAST_CLIENT) as client:
        producer = await client.create_producer(
            topic, send_timeout_millis=15_000, block_if_queue_full=True
        )
        consumer = await client.subscribe(topic, "g-" + topic, **group)
        futures = []
        restarted: asyncio.Future[float] | None = None
        confirmed_before_kill: set[bytes] = set()
        killed_at: list[float] = []
        for i, value in enumerate(values):
            futures.append(await producer.send_async(value))
            if i == kill_at:
                await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
                confirmed_before_kill.update(values[: kill_at + 1])
                restarted = asyncio.ensure_future(
                    kill_during(proxied_kafka.broker, lambda: killed_at.append(time.monotonic()))
                )
            if i % 50 == 0:
                await asyncio.sleep(0.002)
        assert restarted is not None
        back_at = await asyncio.wait_for(restarted, TIMEOUT)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 40)
        failures = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(f, msgclient.MsgClientError) for f in failures), failures[:3]
        after = await asyncio.wait_for(producer.send(b"after"), TIMEOUT)
        assert after is not None
        deadline = time.monotonic() + 30
        while True:  # the consumer reaches the message sent after the restart
            remaining = int((deadline - time.monotonic()) * 1000)
            assert remaining > 0, "the consumer never got the message sent after the restart"
            message = await consumer.receive(timeout_millis=remaining)
            consumer.acknowledge(message)
            if message.data() == b"after":
                break
    await assert_no_leaked_tasks(tasks_before)
    stored = [r.value for r in await read(proxied_kafka.broker.bootstrap_servers, topic, None)]
    confirmed = {
        v for v, r in zip(values, results, strict=True) if not isinstance(r, BaseException)
    }
    assert len(stored) == len(set(stored))  # nothing twice
    # tansu lost everything before the kill; what it has now, the client was told of.
    assert set(stored) - {b"after"} <= confirmed
    # What was confirmed after the kill is stored: the producer carried on against the
    # restarted broker (with a new producer id: tansu forgot the old one).
    assert confirmed - confirmed_before_kill <= set(stored)
    figures.add(
        "kafka SIGKILL + restart, produce and consume",
        down_s=back_at - killed_at[0],
        confirmed=len(confirmed),
        failed_typed=len(failures),
        stored_after_restart=len(stored),
        confirmed_then_lost_with_tansu_memory=len(confirmed_before_kill - set(stored)),
        proxy_refused_while_down=proxied_kafka.proxy.refused,
    )
