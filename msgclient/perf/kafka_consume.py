"""Consume throughput on Kafka: msgclient versus kafka-python, aiokafka and confluent-kafka.

All read the same backlog of ``count`` messages on one partition, each in a consumer group
of its own, from the earliest offset, in its natural per-message loop and, where the client
has one, its bulk call. msgclient receives and acknowledges each message, or each
``receive_many`` batch (acknowledgments become grouped commits); the rivals commit as they
do by default (auto-commit every 5 s). The clock starts at the first message, so that the
group join (tansu holds it about half the session timeout) is not measured: the rate is
``(count - 1) / seconds`` up to the last message handed over (and acknowledged).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.perf import event_loop
from msgclient.perf.kafka_produce import (
    CHUNK,
    STALL_SECONDS,
    ClientWarnings,
    KafkaTarget,
    Progress,
    create_topic,
    peer,
)

SESSION_TIMEOUT_MS = 6_000  # tansu holds a JoinGroup about half of it
JOIN_SECONDS = 30.0  # the first message: group join, then the first fetch
RECEIVE_TIMEOUT_MS = 10_000  # a wait this long for one message (or batch) fails the run
CONSUME_BATCH = 1_000  # confluent-kafka consume(): as many as msgclient's receiver queue


@dataclass(frozen=True)
class Backlog:
    target: KafkaTarget
    topic: str
    count: int


@dataclass(frozen=True)
class Reader:
    """One row of the race: ``run(backlog)`` -> msg/s."""

    label: str
    settings: str
    run: Callable[[Backlog], float]


def make_backlog(target: KafkaTarget, topic: str, count: int, size: int) -> Backlog:
    """``count`` messages, written as a busy producer writes them: confluent-kafka at its
    defaults (batches up to 1 MB / 10 000 messages, closed by its 5 ms linger)."""
    create_topic(target, topic)
    producer = peer("confluent_kafka").Producer({"bootstrap.servers": target.bootstrap_servers})
    payload = b"x" * size
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(STALL_SECONDS):
        raise RuntimeError("confluent-kafka could not write the backlog")
    return Backlog(target, topic, count)


def _group(label: str) -> str:
    return f"perf-{label}-{uuid.uuid4().hex[:8]}"


def _rate(count: int, start: float) -> float:
    return (count - 1) / (time.perf_counter() - start)


# -- msgclient ---------------------------------------------------------------------------

MSGCLIENT_GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,  # a consumer group
    "initial_position": msgclient.InitialPosition.Earliest,
    "session_timeout_ms": SESSION_TIMEOUT_MS,
}


async def _msgclient(backlog: Backlog, many: bool) -> float:
    async with msgclient.Client(backlog.target.service_url) as client:
        consumer = await client.subscribe(backlog.topic, _group("msgclient"), **MSGCLIENT_GROUP)
        receive, acknowledge = consumer.receive, consumer.acknowledge
        acknowledge(await receive(int(JOIN_SECONDS * 1000)))
        progress, count = Progress("msgclient", backlog.count), backlog.count
        start = time.perf_counter()
        if many:
            await _receive_many(consumer, count, progress)
        else:
            for done in range(1, count, CHUNK):
                for _ in range(min(CHUNK, count - done)):
                    acknowledge(await receive(RECEIVE_TIMEOUT_MS))
                progress(min(done + CHUNK, count))
        rate = _rate(count, start)
        await consumer.close()  # commits what was acknowledged
    return rate


async def _receive_many(consumer: msgclient.Consumer, count: int, progress: Progress) -> None:
    receive_many, acknowledge = consumer.receive_many, consumer.acknowledge
    done = 1
    while done < count:
        batch = await receive_many(count - done, RECEIVE_TIMEOUT_MS)
        batch.values()  # what a bulk reader reads
        acknowledge(batch)
        done += len(batch)
        progress(done)


def msgclient_consume(backlog: Backlog) -> float:
    with ClientWarnings():
        return event_loop.run(_msgclient(backlog, many=False))


def msgclient_receive_many(backlog: Backlog) -> float:
    with ClientWarnings():
        return event_loop.run(_msgclient(backlog, many=True))


# -- aiokafka ------------------------------------------------------------------------------


async def _aiokafka(backlog: Backlog, many: bool) -> float:
    consumer = peer("aiokafka").AIOKafkaConsumer(
        backlog.topic,
        bootstrap_servers=backlog.target.bootstrap_servers,
        group_id=_group("aiokafka"),
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
    )
    await consumer.start()
    try:
        await asyncio.wait_for(consumer.getone(), JOIN_SECONDS)
        start = time.perf_counter()
        if many:
            await _getmany(consumer, backlog.count)
        else:
            await _getone(consumer, backlog.count)
        rate = _rate(backlog.count, start)
    finally:
        await consumer.stop()  # commits the position
    return rate


async def _getone(consumer: Any, count: int) -> None:
    getone, progress = consumer.getone, Progress("aiokafka", count)
    for done in range(1, count, CHUNK):
        async with asyncio.timeout(STALL_SECONDS):  # per chunk: no timer per message
            for _ in range(min(CHUNK, count - done)):
                await getone()
        progress(min(done + CHUNK, count))


async def _getmany(consumer: Any, count: int) -> None:
    getmany, progress = consumer.getmany, Progress("aiokafka", count)
    done = 1
    while done < count:
        batches = await getmany(timeout_ms=RECEIVE_TIMEOUT_MS)
        if not batches:
            raise RuntimeError(f"aiokafka: nothing for 10 s after {done} messages")
        for records in batches.values():
            for _record in records:
                done += 1
        progress(done)


def aiokafka_getone(backlog: Backlog) -> float:
    return event_loop.run(_aiokafka(backlog, many=False))


def aiokafka_getmany(backlog: Backlog) -> float:
    return event_loop.run(_aiokafka(backlog, many=True))


# -- confluent-kafka ---------------------------------------------------------------------


def _confluent(backlog: Backlog, batch: bool) -> float:
    consumer = peer("confluent_kafka").Consumer(
        {
            "bootstrap.servers": backlog.target.bootstrap_servers,
            "group.id": _group("confluent"),
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        }
    )
    try:
        consumer.subscribe([backlog.topic])
        deadline = time.monotonic() + JOIN_SECONDS
        while _checked(consumer.poll(1.0)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("confluent-kafka: no first message")
        start = time.perf_counter()
        if batch:
            _consume_batches(consumer, backlog.count)
        else:
            _poll(consumer, backlog.count)
        rate = _rate(backlog.count, start)
    finally:
        consumer.close()  # commits the position
    return rate


def _checked(message: Any) -> Any:
    if message is not None and message.error() is not None:
        raise RuntimeError(f"confluent-kafka: {message.error()}")
    return message


def _poll(consumer: Any, count: int) -> None:
    poll, progress = consumer.poll, Progress("confluent-kafka", count)
    timeout = RECEIVE_TIMEOUT_MS / 1000
    for done in range(1, count, CHUNK):
        for _ in range(min(CHUNK, count - done)):
            message = poll(timeout)
            if message is None or message.error() is not None:
                _checked(message)
                raise RuntimeError(f"confluent-kafka: nothing for 10 s after {done} messages")
        progress(min(done + CHUNK, count))


def _consume_batches(consumer: Any, count: int) -> None:
    consume, progress = consumer.consume, Progress("confluent-kafka", count)
    done = 1
    while done < count:
        # Never more than are left: consume() waits out its timeout for a full list.
        messages = consume(min(CONSUME_BATCH, count - done), RECEIVE_TIMEOUT_MS / 1000)
        if not messages:
            raise RuntimeError(f"confluent-kafka: nothing for 10 s after {done} messages")
        for message in messages:
            if message.error() is not None:
                _checked(message)
            done += 1
        progress(done)


def confluent_poll(backlog: Backlog) -> float:
    return _confluent(backlog, batch=False)


def confluent_consume(backlog: Backlog) -> float:
    return _confluent(backlog, batch=True)


# -- kafka-python ------------------------------------------------------------------------


def kafka_python_consume(backlog: Backlog) -> float:
    consumer = peer("kafka").KafkaConsumer(
        backlog.topic,
        bootstrap_servers=backlog.target.bootstrap_servers,
        group_id=_group("kafka-python"),
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        consumer_timeout_ms=RECEIVE_TIMEOUT_MS,  # the iterator ends after 10 s without one
    )
    try:
        records = iter(consumer)
        next(records)  # the first: after the join
        progress, count = Progress("kafka-python", backlog.count), backlog.count
        start = time.perf_counter()
        for done in range(1, count, CHUNK):
            try:
                for _ in range(min(CHUNK, count - done)):
                    next(records)
            except StopIteration:
                raise RuntimeError("kafka-python: nothing for 10 s") from None
            progress(min(done + CHUNK, count))
        rate = _rate(count, start)
    finally:
        consumer.close()  # commits the position
    return rate


READERS = (
    Reader(
        "msgclient",
        "receive() + acknowledge() per message; receiver queue 1000 (default)",
        msgclient_consume,
    ),
    Reader(
        "msgclient receive_many",
        "receive_many() + acknowledge(batch), its values read; receiver queue 1000",
        msgclient_receive_many,
    ),
    Reader("aiokafka getone", "await getone() per message", aiokafka_getone),
    Reader("aiokafka getmany", "await getmany(), a loop over its records", aiokafka_getmany),
    Reader("confluent poll", "poll() per message", confluent_poll),
    Reader(
        "confluent consume", f"consume({CONSUME_BATCH}), a loop over the list", confluent_consume
    ),
    Reader("kafka-python", "for record in consumer (max_poll_records 500)", kafka_python_consume),
)
