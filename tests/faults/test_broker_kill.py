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
from protocols.kafkawire.message_id import KafkaMessageId
from tests.faults.conftest import (
    FAST_CLIENT,
    TIMEOUT,
    Figures,
    LoopLag,
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
    own_pulsar: PulsarBroker,
    topic: str,
    figures: type[Figures],
    receipts: bool,
    loop_lag: LoopLag,
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
        # (The group timer may run late by the loop's lateness.)
        sent_by = killed_at[0] - ACK_GROUP_S - loop_lag.allowance()
        early = [v for v in redelivered if first_delivery[v] < sent_by]
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
    an EOF and its reconnects are accepted and closed at once until tansu is back.

    tansu keeps everything in memory (brokers.md): the kill loses every message and
    offset, and the restarted broker numbers offsets from 0 again. So: every send made
    after the kill is confirmed and stored exactly once (the outage, about 0.4 s, is far
    shorter than the send timeout), none made before it survives; and the consumer carries
    on with the new log: in each partition, from the offset where it stood before the kill
    (or from the start, if the new log was shorter then) to the end, nothing skipped,
    nothing twice."""
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
        killed_at: list[float] = []
        sent_before_kill: list[int] = []
        received: list[tuple[bytes, int, int]] = []  # value, partition, offset

        def note_kill() -> None:
            killed_at.append(time.monotonic())
            sent_before_kill.append(len(futures))

        async def receive() -> None:
            message = await consumer.receive(timeout_millis=100)
            consumer.acknowledge(message)
            message_id = message.message_id()
            assert isinstance(message_id, KafkaMessageId)
            received.append((message.data(), message_id.partition, message_id.offset))

        for i, value in enumerate(values):
            futures.append(await producer.send_async(value))
            if i == kill_at:
                await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
                restarted = asyncio.ensure_future(kill_during(proxied_kafka.broker, note_kill))
            if i % 50 == 0:
                await asyncio.sleep(0.002)
        assert restarted is not None
        back_at = await asyncio.wait_for(restarted, TIMEOUT)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 40)
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, failures[:3]
        await asyncio.wait_for(producer.send(b"after"), TIMEOUT)
        # What tansu holds now, read straight from it (the proxy is for the client).
        stored = await read(proxied_kafka.broker.bootstrap_servers, topic, None)
        last = {}
        for record in stored:
            last[record.partition] = max(last.get(record.partition, -1), record.offset)
        ends = {(p, offset) for p, offset in last.items()}
        deadline = time.monotonic() + 30
        while not ends <= {(p, offset) for _, p, offset in received}:
            # The consumer reaches the end of every partition of the new log.
            assert time.monotonic() < deadline, f"consumer stopped short of {ends}"
            try:
                await receive()
            except msgclient.ReceiveTimeoutError:
                continue
    await assert_no_leaked_tasks(tasks_before)
    # The kill came before any send after kill_at: they were all made after it.
    assert sent_before_kill == [kill_at + 1]
    stored_values = [r.value for r in stored]
    assert len(stored_values) == len(set(stored_values))  # nothing twice
    assert set(stored_values) == {*values[kill_at + 1 :], b"after"}
    # The consumer: nothing twice; since the kill, a gapless tail of each partition.
    assert len(received) == len({v for v, _, _ in received})
    by_offset = {(r.partition, r.offset): r.value for r in stored}
    since_kill = [(p, o, v) for v, p, o in received if v == b"after" or int(v) > kill_at]
    for partition, end in last.items():
        offsets = [o for p, o, _ in since_kill if p == partition]
        assert offsets == list(range(end + 1 - len(offsets), end + 1)), (partition, offsets[:3])
    assert all(by_offset[(p, o)] == v for p, o, v in since_kill)
    figures.add(
        "kafka SIGKILL + restart, produce and consume",
        down_s=back_at - killed_at[0],
        confirmed=len(values),
        stored_after_restart=len(stored_values),
        lost_with_tansu_memory=kill_at + 1,
        consumer_since_kill=len(since_kill),
        proxy_refused_while_down=proxied_kafka.proxy.refused,
    )
