"""Produce throughput on Kafka: msgclient versus kafka-python, aiokafka and confluent-kafka.

Each run pipelines ``count`` messages to a fresh topic of one partition, the client's fastest
natural way, and stops the clock when the broker has confirmed the last one. Rivals run
twice: at msgclient's settings (linger 5 ms, batch 16 KiB, acks all: the Java client's
defaults, which kafka:// uses) and at their own defaults.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.perf import event_loop

PARTITIONS = 1  # see docs/benchmarks.md: the rivals' keyless partitioners differ
CHUNK = 10_000  # messages between progress checks: a check per message would cost time
STALL_SECONDS = 60.0  # no progress for this long fails the run
PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class KafkaTarget:
    bootstrap_servers: str  # host:port, what the rivals take

    @property
    def service_url(self) -> str:
        return f"kafka://{self.bootstrap_servers}"


@dataclass(frozen=True)
class Contender:
    """One row of a race: ``run(target, topic, count, size)`` -> msg/s."""

    label: str
    settings: str
    run: Callable[[KafkaTarget, str, int, int], float]


class Progress:
    """Prints how far a run is every few seconds: a slow client can take minutes."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.start = time.perf_counter()
        self.next = self.start + PROGRESS_SECONDS

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now >= self.next:
            self.next = now + PROGRESS_SECONDS
            seconds = now - self.start
            print(
                f"      {self.label}: {done:,} of {self.total:,} after {seconds:.0f} s", flush=True
            )


class ClientWarnings(logging.Handler):
    """msgclient's warnings during a run, counted and summed up after it instead of a line
    each: a storm of reconnects would bury the figures."""

    LOGGERS = ("msgclient", "protocols")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.first = self.first or record.getMessage()

    def __enter__(self) -> ClientWarnings:
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)
        if self.count:
            print(
                f"      msgclient logged {self.count} warnings; the first: {self.first}", flush=True
            )


def peer(module: str) -> Any:
    """A rival's module: they are untyped (and optional), so Any."""
    return importlib.import_module(module)


def _admin(target: KafkaTarget) -> Any:
    return peer("kafka.admin").KafkaAdminClient(
        bootstrap_servers=target.bootstrap_servers, request_timeout_ms=10_000
    )


def create_topic(target: KafkaTarget, topic: str) -> None:
    # Explicitly: tansu auto-creates unknown topics with 4 partitions.
    client = _admin(target)
    try:
        client.create_topics([peer("kafka.admin").NewTopic(topic, PARTITIONS, 1)])
    finally:
        client.close()


def delete_topic(target: KafkaTarget, topic: str) -> None:
    # tansu keeps everything in memory: a run leaves nothing behind.
    client = _admin(target)
    try:
        client.delete_topics([topic])
    finally:
        client.close()


# -- msgclient ---------------------------------------------------------------------------

# kafka:// defaults: linger 5 ms, batch 16 KiB, acks -1, idempotent, 5 requests in flight.
MSGCLIENT_DEFAULTS: dict[str, Any] = {}
# About confluent-kafka's default batches (batch.size 1,000,000 encoded bytes, at most
# 10,000 messages): msgclient counts payload bytes, librdkafka the encoded batch (~9% more
# for 100-byte values), and a batch must stay under max_request_size (1 MiB).
MSGCLIENT_LARGE: dict[str, Any] = {
    "batching_max_allowed_size_in_bytes": 920_000,
    "batching_max_messages": 10_000,
}


async def _msgclient(
    target: KafkaTarget, topic: str, count: int, size: int, **options: Any
) -> float:
    payload = b"x" * size
    async with msgclient.Client(target.service_url) as client:
        # Blocking, as the rivals do when their buffers are full (it never blocks at 20 MB).
        producer = await client.create_producer(topic, block_if_queue_full=True, **options)
        await producer.send(payload)  # connection, metadata and producer id outside the clock
        send, progress = producer.send_async, Progress("msgclient", count)
        futures: list[asyncio.Future[msgclient.MessageId]] = []
        start = time.perf_counter()
        for done in range(0, count, CHUNK):
            futures += [await send(payload) for _ in range(min(CHUNK, count - done))]
            progress(min(done + CHUNK, count))
        await asyncio.wait_for(producer.flush(), STALL_SECONDS)
        elapsed = time.perf_counter() - start
        _check_failures("msgclient", _failed(futures))
        await producer.close()
    return count / elapsed


def msgclient_produce(
    target: KafkaTarget, topic: str, count: int, size: int, options: dict[str, Any]
) -> float:
    with ClientWarnings():
        return event_loop.run(_msgclient(target, topic, count, size, **options))


async def _msgclient_bulk(
    target: KafkaTarget, topic: str, count: int, size: int, **options: Any
) -> float:
    """send_many, CHUNK values a call (a bulk writer's columns, as a Spark task's)."""
    payload = b"x" * size
    async with msgclient.Client(target.service_url) as client:
        producer = await client.create_producer(topic, **options)
        await producer.send(payload)  # connection, metadata and producer id outside the clock
        progress = Progress("msgclient send_many", count)
        start = time.perf_counter()
        for done in range(0, count, CHUNK):
            chunk = min(CHUNK, count - done)
            # raises if a batch failed: every message is confirmed when it returns
            await asyncio.wait_for(producer.send_many([payload] * chunk), STALL_SECONDS)
            progress(done + chunk)
        elapsed = time.perf_counter() - start
        await producer.close()
    return count / elapsed


def msgclient_bulk(
    target: KafkaTarget, topic: str, count: int, size: int, options: dict[str, Any]
) -> float:
    with ClientWarnings():
        return event_loop.run(_msgclient_bulk(target, topic, count, size, **options))


# -- aiokafka ------------------------------------------------------------------------------

# enable_idempotence stays off: aiokafka asks InitProducerId at v0, which tansu refuses.
AIOKAFKA_SAME: dict[str, Any] = {"linger_ms": 5, "max_batch_size": 16_384, "acks": "all"}
AIOKAFKA_DEFAULTS: dict[str, Any] = {}  # linger 0, batch 16 KiB, acks 1


async def _aiokafka(target: KafkaTarget, topic: str, count: int, size: int, **config: Any) -> float:
    aiokafka = peer("aiokafka")
    payload = b"x" * size
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=target.bootstrap_servers, **config)
    await producer.start()
    try:
        await producer.send_and_wait(topic, payload)
        send, progress = producer.send, Progress("aiokafka", count)
        futures: list[Any] = []
        start = time.perf_counter()
        for done in range(0, count, CHUNK):
            futures += [await send(topic, payload) for _ in range(min(CHUNK, count - done))]
            progress(min(done + CHUNK, count))
        await asyncio.wait_for(producer.flush(), STALL_SECONDS)
        elapsed = time.perf_counter() - start
        _check_failures("aiokafka", _failed(futures))
    finally:
        await producer.stop()
    return count / elapsed


def aiokafka_produce(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> float:
    return event_loop.run(_aiokafka(target, topic, count, size, **config))


# -- confluent-kafka ---------------------------------------------------------------------

CONFLUENT_SAME: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 16_384,
    "acks": "all",
    "enable.idempotence": True,
}
# linger 5 ms, batch.size 1 MB, batch.num.messages 10 000, acks all, not idempotent
CONFLUENT_DEFAULTS: dict[str, Any] = {}


def confluent_produce(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> float:
    """Its fastest way: no delivery callback (a Python call per message), poll() only when
    its queue is full, and flush(), which returns how many are still unconfirmed."""
    producer = peer("confluent_kafka").Producer(
        {"bootstrap.servers": target.bootstrap_servers, **config}
    )
    payload = b"x" * size
    producer.produce(topic, payload)
    producer.flush(STALL_SECONDS)
    produce, poll, progress = producer.produce, producer.poll, Progress("confluent-kafka", count)
    start = time.perf_counter()
    for done in range(0, count, CHUNK):
        for _ in range(min(CHUNK, count - done)):
            while True:
                try:
                    produce(topic, payload)
                    break
                except BufferError:  # its queue is full: serve it, then retry
                    poll(0.001)
        progress(min(done + CHUNK, count))
    unconfirmed = producer.flush(STALL_SECONDS)
    elapsed = time.perf_counter() - start
    _check_failures("confluent-kafka", unconfirmed)
    return count / elapsed


# -- kafka-python ------------------------------------------------------------------------

KAFKA_PYTHON_SAME: dict[str, Any] = {
    "linger_ms": 5,
    "batch_size": 16_384,
    "acks": "all",
    "enable_idempotence": True,
}
KAFKA_PYTHON_DEFAULTS: dict[str, Any] = {}  # linger 0, batch 16 KiB, acks all, idempotent


def kafka_python_produce(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> float:
    producer = peer("kafka").KafkaProducer(bootstrap_servers=target.bootstrap_servers, **config)
    payload = b"x" * size
    try:
        producer.send(topic, payload).get(STALL_SECONDS)
        send, progress = producer.send, Progress("kafka-python", count)
        futures: list[Any] = []
        start = time.perf_counter()
        for done in range(0, count, CHUNK):
            futures += [send(topic, payload) for _ in range(min(CHUNK, count - done))]
            progress(min(done + CHUNK, count))
        producer.flush(timeout=STALL_SECONDS)
        elapsed = time.perf_counter() - start
        _check_failures("kafka-python", sum(1 for f in futures if not f.succeeded()))
    finally:
        producer.close()
    return count / elapsed


def _failed(futures: list[Any]) -> int:
    # All settled after flush() (asyncio.gather would cost seconds for 200k futures).
    return sum(1 for f in futures if not f.done() or f.cancelled() or f.exception() is not None)


def _check_failures(client: str, failed: int) -> None:
    if failed:
        raise RuntimeError(f"{client}: {failed} messages were not confirmed")


SAME = "linger 5 ms, batch 16 KiB, acks all"
CONTENDERS = (
    Contender(
        "msgclient",
        SAME + ", idempotent (its kafka:// defaults)",
        functools.partial(msgclient_produce, options=MSGCLIENT_DEFAULTS),
    ),
    Contender(
        "msgclient large",
        "linger 5 ms, batches of 920 KB payload / 10 000 messages, acks all, idempotent",
        functools.partial(msgclient_produce, options=MSGCLIENT_LARGE),
    ),
    Contender(
        "msgclient send_many",
        SAME + ", idempotent; send_many of 10 000 values a call",
        functools.partial(msgclient_bulk, options=MSGCLIENT_DEFAULTS),
    ),
    Contender(
        "msgclient send_many large",
        "as msgclient large; send_many of 10 000 values a call",
        functools.partial(msgclient_bulk, options=MSGCLIENT_LARGE),
    ),
    Contender(
        "aiokafka same",
        SAME + ", not idempotent (tansu refuses its InitProducerId v0)",
        functools.partial(aiokafka_produce, config=AIOKAFKA_SAME),
    ),
    Contender(
        "aiokafka defaults",
        "linger 0, batch 16 KiB, acks 1",
        functools.partial(aiokafka_produce, config=AIOKAFKA_DEFAULTS),
    ),
    Contender(
        "confluent same",
        SAME + ", idempotent",
        functools.partial(confluent_produce, config=CONFLUENT_SAME),
    ),
    Contender(
        "confluent defaults",
        "linger 5 ms, batch 1 MB / 10 000 messages, acks all",
        functools.partial(confluent_produce, config=CONFLUENT_DEFAULTS),
    ),
    Contender(
        "kafka-python same",
        SAME + ", idempotent",
        functools.partial(kafka_python_produce, config=KAFKA_PYTHON_SAME),
    ),
    Contender(
        "kafka-python defaults",
        "linger 0, batch 16 KiB, acks all, idempotent",
        functools.partial(kafka_python_produce, config=KAFKA_PYTHON_DEFAULTS),
    ),
)
