"""Kafka produce and consume through a FaultProxy: stalls and cuts mid-frame.

tansu advertises the proxy's address (ProxiedKafkaBroker), so the bootstrap connection and
the leader's are both the proxy's. The producer is idempotent (the default): a batch tansu
stored before a fault and that is sent again after it is answered DUPLICATE_SEQUENCE_NUMBER
and stored once, so no case here may store anything twice. Consumers acknowledge with
receipts (a receipt is the group's OffsetCommit answer).
"""

from __future__ import annotations

import time
from typing import Any

import msgclient
from tests.faults.conftest import (
    FAST_CLIENT,
    TIMEOUT,
    ConnectionLog,
    Figures,
    ProxiedKafka,
    assert_no_leaked_tasks,
    assert_stall_detected,
    client_tasks,
)
from tests.faults.helpers import AckedReceiver, Stream, assert_acks_final, tally
from tests.faults.proxy import Direction, ProxiedConnection
from tests.kafka.helpers import create_topic, produce, read

GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "initial_position": msgclient.InitialPosition.Earliest,
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 4000,
    "fetch_max_wait_ms": 100,
    "ack_receipt_enabled": True,
}


async def stored(kafka: ProxiedKafka, topic: str) -> list[bytes]:
    return [r.value for r in await read(kafka.broker.bootstrap_servers, topic, None)]


async def test_stall_while_producing_is_found_within_two_keepalives(
    proxied_kafka: ProxiedKafka,
    topic: str,
    connection_log: ConnectionLog,
    figures: type[Figures],
) -> None:
    values = [b"stall-%04d" % i for i in range(1500)]
    stalled: list[ProxiedConnection] = []

    def stall() -> None:
        stalled.extend(proxied_kafka.proxy.live)
        proxied_kafka.proxy.stall()

    stream = Stream(values, 600, stall)
    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **FAST_CLIENT) as client:
        producer = await client.create_producer(topic, send_timeout_millis=30_000)
        results = await stream.run(producer)
        assert not [r for r in results if isinstance(r, BaseException)]
        views = assert_stall_detected(connection_log, stalled)
        for connection in stalled:
            connection.cut()  # never resumed: held bytes must not arrive late
    await assert_no_leaked_tasks(tasks_before)
    lost, duplicated = tally(values, await stored(proxied_kafka, topic))
    assert not lost
    assert not duplicated  # idempotent producer: resent batches stored once
    figures.add(
        "kafka stall, produce",
        detection_s=max(v[0] for v in views),
        proxy_view_s=max(v[1] for v in views),
        lost=len(lost),
        duplicated=len(duplicated),
        unconfirmed_at_stall=len(stream.unconfirmed),
    )


async def test_stall_while_consuming_is_found_within_two_keepalives(
    proxied_kafka: ProxiedKafka,
    topic: str,
    connection_log: ConnectionLog,
    figures: type[Figures],
) -> None:
    values = [b"%05d" % i for i in range(2000)]
    bootstrap = proxied_kafka.broker.bootstrap_servers
    await create_topic(bootstrap, topic, 2)
    await produce(bootstrap, topic, [{"value": v} for v in values])
    stalled: list[ProxiedConnection] = []
    stalled_at = [0.0]

    def stall_at_600(delivered: int) -> None:
        if delivered == 600:
            stalled_at[0] = time.monotonic()
            stalled.extend(proxied_kafka.proxy.live)
            proxied_kafka.proxy.stall()

    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **FAST_CLIENT) as client:
        consumer = await client.subscribe(topic, "g-" + topic, receiver_queue_size=100, **GROUP)
        receiver = AckedReceiver(consumer, pace=0.001)
        await receiver.until(len(values), stall_at_600)
        await receiver.drain()
        views = assert_stall_detected(connection_log, stalled)
        for connection in stalled:
            connection.cut()
    await assert_no_leaked_tasks(tasks_before)
    lost, _ = tally(values, [v for v, _ in receiver.deliveries])
    assert not lost
    # A commit the group confirmed before the stall is final: those offsets never come back.
    assert not receiver.redelivered_after_confirmed_ack(stalled_at[0])
    figures.add(
        "kafka stall, consume",
        detection_s=max(v[0] for v in views),
        proxy_view_s=max(v[1] for v in views),
        lost=len(lost),
        redelivered=receiver.duplicates(),
        commits_failed=len(receiver.ack_failed),
    )


async def test_cut_mid_produce_request(
    proxied_kafka: ProxiedKafka,
    topic: str,
    connection_log: ConnectionLog,
    figures: type[Figures],
) -> None:
    """A Produce request cut in half toward tansu: reconnect, resend, stored once."""
    values = [b"%04d-" % i + b"p" * 2000 for i in range(600)]
    holder: list[ProxiedConnection] = []

    def cut() -> None:
        holder.append(proxied_kafka.proxy.live[-1])
        holder[0].cut_mid_frame(Direction.TO_SERVER, min_frame_size=8_000)

    stream = Stream(values, 200, cut)
    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **FAST_CLIENT) as client:
        producer = await client.create_producer(topic, send_timeout_millis=30_000)
        results = await stream.run(producer)
        assert not [r for r in results if isinstance(r, BaseException)]
        report = holder[0].cut_report
        assert report is not None and report.mid_frame, report
        closed = connection_log.of(holder[0])
        assert closed is not None
    await assert_no_leaked_tasks(tasks_before)
    lost, duplicated = tally(values, await stored(proxied_kafka, topic))
    assert not lost
    assert not duplicated
    figures.add(
        "kafka cut mid-Produce, produce",
        noticed_after_cut_s=closed.closed_at - report.at,
        lost=len(lost),
        duplicated=len(duplicated),
        unconfirmed_at_cut=len(stream.unconfirmed),
    )


async def test_cut_mid_fetch_response(
    proxied_kafka: ProxiedKafka,
    topic: str,
    connection_log: ConnectionLog,
    figures: type[Figures],
) -> None:
    """A Fetch response cut in half toward the client: a typed error on that connection,
    and the consumer carries on from its position, losing nothing."""
    # 6 MB: more than one Fetch answer (tansu caps them at 5 MiB), so another fetch is on
    # the wire to cut after the first 300 (a fetch's records beyond the permits are kept).
    values = [b"%04d-" % i + b"f" * 4000 for i in range(1500)]
    bootstrap = proxied_kafka.broker.bootstrap_servers
    await create_topic(bootstrap, topic, 1)
    await produce(bootstrap, topic, [{"value": v} for v in values])
    holder: list[ProxiedConnection] = []

    def cut_at_300(delivered: int) -> None:
        if delivered == 300:
            # The biggest answers are Fetch responses: one of at least 20 kB is one.
            holder.append(max(proxied_kafka.proxy.live, key=lambda c: c.bytes[Direction.TO_CLIENT]))
            holder[0].cut_mid_frame(Direction.TO_CLIENT, min_frame_size=20_000)

    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **FAST_CLIENT) as client:
        consumer = await client.subscribe(topic, "g-" + topic, receiver_queue_size=100, **GROUP)
        receiver = AckedReceiver(consumer)
        started = time.monotonic()
        await receiver.until(len(values), cut_at_300)
        took = time.monotonic() - started
        await receiver.drain()
        report = holder[0].cut_report
        assert report is not None and report.mid_frame, report
        closed = connection_log.of(holder[0])
        assert closed is not None
    await assert_no_leaked_tasks(tasks_before)
    lost, _ = tally(values, [v for v, _ in receiver.deliveries])
    assert not lost
    assert_acks_final(receiver, report.at)
    figures.add(
        "kafka cut mid-Fetch, consume",
        noticed_after_cut_s=closed.closed_at - report.at,
        error=type(closed.error.__cause__).__name__,
        lost=len(lost),
        redelivered=receiver.duplicates(),
        all_received_s=took,
    )
    assert took < TIMEOUT
