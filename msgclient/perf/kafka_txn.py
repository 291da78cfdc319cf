"""Transactional produce throughput on Kafka: msgclient versus confluent-kafka.

Each run writes ``count`` messages to a fresh topic of one partition in transactions of
``TXN_MESSAGES`` messages, with a transactional id of its own (registered, and one
transaction of one message committed, before the clock). The clock stops when the last
transaction has committed; the rate counts committed messages only: a transaction that
fails to commit fails the run, and after the clock a read_committed reader checks that the
topic holds exactly the committed messages. confluent-kafka runs at msgclient's settings
(linger 5 ms, batch 16 KiB, acks all, idempotent: a transactional producer is idempotent
with acks all) and at its own defaults; msgclient at its defaults and at confluent's
default batch size ("msgclient large").
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

import msgclient
from msgclient.perf import event_loop
from msgclient.perf.kafka_produce import (
    CONFLUENT_DEFAULTS,
    MSGCLIENT_DEFAULTS,
    MSGCLIENT_LARGE,
    STALL_SECONDS,
    ClientWarnings,
    Contender,
    KafkaTarget,
    Progress,
    peer,
)
from msgclient.perf.stopwatch import Measured, Stopwatch

TXN_MESSAGES = 1_000  # messages per transaction
WARM_UP = 1  # the warm-up transaction's messages, in the topic too
READ_BATCH = 10_000  # the check's consume() size
SAME = "linger 5 ms, batch 16 KiB, acks all"  # msgclient's kafka:// defaults
CONFLUENT_SAME: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 16_384,
    "acks": "all",
    "enable.idempotence": True,
}


def _transactional_id(client: str) -> str:
    return f"perf-txn-{client}-{uuid.uuid4().hex[:8]}"


# -- msgclient ---------------------------------------------------------------------------


async def _msgclient(
    target: KafkaTarget, topic: str, count: int, size: int, **options: Any
) -> Measured:
    payload = b"x" * size
    async with msgclient.Client(target.service_url) as client:
        producer = await client.create_producer(
            topic,
            transactional_id=_transactional_id("msgclient"),
            block_if_queue_full=True,
            **options,
        )
        async with producer.transaction():  # connection, metadata, AddPartitionsToTxn
            await producer.send(payload)
        send, progress = producer.send_async, Progress("msgclient", count)
        committed = 0
        clock = Stopwatch()
        while committed < count:
            n = min(TXN_MESSAGES, count - committed)
            producer.begin_transaction()
            for _ in range(n):  # the futures are not kept: the commit settles them
                await send(payload)
            # Waits for every send, raises if one failed, then EndTxn.
            await asyncio.wait_for(producer.commit_transaction(), STALL_SECONDS)
            committed += n
            progress(committed)
        measured = clock.stop(committed)
        await producer.close()
    return measured


def msgclient_txn(
    target: KafkaTarget, topic: str, count: int, size: int, options: dict[str, Any]
) -> Measured:
    with ClientWarnings():
        measured = event_loop.run(_msgclient(target, topic, count, size, **options))
    check_committed(target, topic, WARM_UP + count)
    return measured


# -- confluent-kafka ---------------------------------------------------------------------


def confluent_txn(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> Measured:
    """As in kafka-produce: no delivery callback, poll() only on BufferError;
    commit_transaction() flushes, raises if a message failed, then commits."""
    producer = peer("confluent_kafka").Producer(
        {
            "bootstrap.servers": target.bootstrap_servers,
            "transactional.id": _transactional_id("confluent"),
            **config,
        }
    )
    payload = b"x" * size
    producer.init_transactions(STALL_SECONDS)
    producer.begin_transaction()
    producer.produce(topic, payload)
    producer.commit_transaction(STALL_SECONDS)
    produce, poll, progress = producer.produce, producer.poll, Progress("confluent-kafka", count)
    committed = 0
    clock = Stopwatch()
    while committed < count:
        n = min(TXN_MESSAGES, count - committed)
        producer.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    produce(topic, payload)
                    break
                except BufferError:  # its queue is full: serve it, then retry
                    poll(0.001)
        producer.commit_transaction(STALL_SECONDS)
        committed += n
        progress(committed)
    measured = clock.stop(committed)
    check_committed(target, topic, WARM_UP + count)
    return measured


# -- the check, after the clock ----------------------------------------------------------


def check_committed(target: KafkaTarget, topic: str, expected: int) -> None:
    """Read ``topic`` read_committed (confluent-kafka, no group join: an assigned
    partition) and raise unless it holds ``expected`` records."""
    kafka = peer("confluent_kafka")
    consumer = kafka.Consumer(
        {
            "bootstrap.servers": target.bootstrap_servers,
            "group.id": f"perf-txn-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0, kafka.OFFSET_BEGINNING)])
        seen, deadline = 0, time.monotonic() + STALL_SECONDS
        while seen < expected and time.monotonic() < deadline:
            seen += _count(consumer.consume(READ_BATCH, 1.0))
        seen += _count(consumer.consume(READ_BATCH, 0.5))  # nothing more should come
    finally:
        consumer.close()
    if seen != expected:
        raise RuntimeError(f"{topic}: {seen:,} committed records read, {expected:,} expected")


def _count(records: list[Any]) -> int:
    for record in records:
        if record.error() is not None:
            raise RuntimeError(f"read_committed check: {record.error()}")
    return len(records)


TXN = f", transactions of {TXN_MESSAGES:,}"
CONTENDERS = (
    Contender(
        "msgclient",
        SAME + ", idempotent (its kafka:// defaults)" + TXN,
        functools.partial(msgclient_txn, options=MSGCLIENT_DEFAULTS),
    ),
    Contender(
        "msgclient large",
        "linger 5 ms, batches of 920 KB payload / 10 000 messages, acks all" + TXN,
        functools.partial(msgclient_txn, options=MSGCLIENT_LARGE),
    ),
    Contender(
        "confluent same",
        SAME + ", idempotent" + TXN,
        functools.partial(confluent_txn, config=CONFLUENT_SAME),
    ),
    Contender(
        "confluent defaults",
        "linger 5 ms, batch 1 MB / 10 000 messages, acks all, idempotent" + TXN,
        functools.partial(confluent_txn, config=CONFLUENT_DEFAULTS),
    ),
)
