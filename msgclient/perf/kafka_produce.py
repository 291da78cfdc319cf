"""Produce throughput on Kafka: msgclient versus kafka-python, aiokafka and confluent-kafka.

Each run pipelines ``count`` messages to a fresh topic of one partition and stops the clock
when the broker has confirmed the last one; it measures msg/s and the CPU time of the
client's process per message. Three ways to send, each a ``Comparison`` of msgclient with
the best rival:

- each message confirmed: msgclient's ``send_async`` futures, confluent-kafka's delivery
  callback per message, aiokafka's and kafka-python's futures;
- a callback per message: msgclient's ``send_async(value, callback)`` (no future is made)
  against confluent-kafka's delivery callbacks, neither keeping anything per message;
- bulk: msgclient's ``send_many_async`` (10 000 values a call, the confirmations awaited
  at the end) against each rival's fastest way (confluent-kafka: ``produce`` without
  callbacks, then ``flush``);
- each at its own defaults, both ways.

"Same" settings are a busy producer's: linger 5 ms, batches of 128 KiB, acks 1, not
idempotent, no compression.
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
from msgclient.perf.stopwatch import Measured, Stopwatch

PARTITIONS = 1  # see docs/benchmarks.md: the rivals' keyless partitioners differ
CHUNK = 10_000  # messages between progress checks: a check per message would cost time
STALL_SECONDS = 60.0  # no progress for this long fails the run
PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class KafkaTarget:
    bootstrap_servers: str  # host:port, what the rivals take
    broker_group: int | None = None  # an embedded broker's process group: its CPU is shown

    @property
    def service_url(self) -> str:
        return f"kafka://{self.bootstrap_servers}"


@dataclass(frozen=True)
class Contender:
    """One row of a race: ``run(target, topic, count, size)`` -> what it measured."""

    label: str
    settings: str
    run: Callable[[KafkaTarget, str, int, int], Measured]


@dataclass(frozen=True)
class Comparison:
    """A msgclient row against the best of the rival rows that do the same."""

    title: str
    ours: str
    rivals: tuple[str, ...]


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
# The same settings: batches cut by size (batching_max_messages is Pulsar's count limit,
# 1000 by default, which Kafka clients do not have).
MSGCLIENT_SAME: dict[str, Any] = {
    "batching_max_publish_delay_ms": 5,
    "batching_max_allowed_size_in_bytes": 128 * 1024,
    "batching_max_messages": 10_000,
    "acks": 1,
    "enable_idempotence": False,
}
# About confluent-kafka's default batches (batch.size 1,000,000 encoded bytes, at most
# 10,000 messages): msgclient counts payload bytes, librdkafka the encoded batch (~9% more
# for 100-byte values), and a batch must stay under max_request_size (1 MiB).
MSGCLIENT_LARGE: dict[str, Any] = {
    "batching_max_allowed_size_in_bytes": 920_000,
    "batching_max_messages": 10_000,
}


async def _msgclient(
    target: KafkaTarget, topic: str, count: int, size: int, callbacks: bool, **options: Any
) -> Measured:
    payload = b"x" * size
    async with msgclient.Client(target.service_url) as client:
        # Blocking, as the rivals do when their buffers are full (it never blocks at 20 MB).
        producer = await client.create_producer(topic, block_if_queue_full=True, **options)
        await producer.send(payload)  # connection, metadata and producer id outside the clock
        send, progress = producer.send_async, Progress("msgclient", count)
        futures: list[asyncio.Future[msgclient.MessageId]] = []
        failed = 0

        def delivered(error: BaseException | None, _: msgclient.MessageId | None) -> None:
            nonlocal failed
            if error is not None:
                failed += 1

        clock = Stopwatch()
        for done in range(0, count, CHUNK):
            chunk = min(CHUNK, count - done)
            if callbacks:  # as confluent's callback row: no future a message, nothing kept
                for _ in range(chunk):
                    await send(payload, delivered)
            else:
                futures += [await send(payload) for _ in range(chunk)]
            progress(done + chunk)
        await asyncio.wait_for(producer.flush(), STALL_SECONDS)
        _check_failures("msgclient", failed + _failed(futures))
        measured = clock.stop(count)
        await producer.close()
    return measured


def msgclient_produce(
    target: KafkaTarget,
    topic: str,
    count: int,
    size: int,
    options: dict[str, Any],
    callbacks: bool = False,
) -> Measured:
    with ClientWarnings():
        return event_loop.run(_msgclient(target, topic, count, size, callbacks, **options))


async def _msgclient_bulk(
    target: KafkaTarget, topic: str, count: int, size: int, **options: Any
) -> Measured:
    """send_many_async, CHUNK values a call (a bulk writer's columns, as a Spark task's),
    each call queued while the earlier ones are in flight (the producer's limits bound
    them), then every confirmation awaited: as confluent-kafka's produce, then flush."""
    payload = b"x" * size
    async with msgclient.Client(target.service_url) as client:
        producer = await client.create_producer(topic, **options)
        await producer.send(payload)  # connection, metadata and producer id outside the clock
        progress = Progress("msgclient send_many", count)
        clock = Stopwatch()
        confirmations = []
        for done in range(0, count, CHUNK):
            chunk = min(CHUNK, count - done)
            queued = producer.send_many_async([payload] * chunk)
            confirmations.append(await asyncio.wait_for(queued, STALL_SECONDS))
            progress(done + chunk)
        # raises if a batch failed: every message is confirmed when it returns
        await asyncio.wait_for(asyncio.gather(*confirmations), STALL_SECONDS)
        measured = clock.stop(count)
        await producer.close()
    return measured


def msgclient_bulk(
    target: KafkaTarget, topic: str, count: int, size: int, options: dict[str, Any]
) -> Measured:
    with ClientWarnings():
        return event_loop.run(_msgclient_bulk(target, topic, count, size, **options))


# -- aiokafka ------------------------------------------------------------------------------

AIOKAFKA_SAME: dict[str, Any] = {"linger_ms": 5, "max_batch_size": 128 * 1024, "acks": 1}
AIOKAFKA_DEFAULTS: dict[str, Any] = {}  # linger 0, batch 16 KiB, acks 1


async def _aiokafka(
    target: KafkaTarget, topic: str, count: int, size: int, **config: Any
) -> Measured:
    aiokafka = peer("aiokafka")
    payload = b"x" * size
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=target.bootstrap_servers, **config)
    await producer.start()
    try:
        await producer.send_and_wait(topic, payload)
        send, progress = producer.send, Progress("aiokafka", count)
        futures: list[Any] = []
        clock = Stopwatch()
        for done in range(0, count, CHUNK):
            futures += [await send(topic, payload) for _ in range(min(CHUNK, count - done))]
            progress(min(done + CHUNK, count))
        await asyncio.wait_for(producer.flush(), STALL_SECONDS)
        _check_failures("aiokafka", _failed(futures))
        return clock.stop(count)
    finally:
        await producer.stop()


def aiokafka_produce(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> Measured:
    return event_loop.run(_aiokafka(target, topic, count, size, **config))


# -- confluent-kafka ---------------------------------------------------------------------

CONFLUENT_SAME: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 128 * 1024,
    "acks": 1,
    "enable.idempotence": False,
}
# linger 5 ms, batch.size 1 MB, batch.num.messages 10 000, acks all, not idempotent
CONFLUENT_DEFAULTS: dict[str, Any] = {}


def confluent_produce(
    target: KafkaTarget,
    topic: str,
    count: int,
    size: int,
    config: dict[str, Any],
    callbacks: bool = False,
) -> Measured:
    """Without ``callbacks`` its fastest way: no Python call per message, poll() only when
    its queue is full, and flush(), which returns how many are still unconfirmed. With
    them, a delivery callback per message that counts the failed ones (each message's
    confirmation seen, as a future is)."""
    producer = peer("confluent_kafka").Producer(
        {"bootstrap.servers": target.bootstrap_servers, **config}
    )
    payload = b"x" * size
    producer.produce(topic, payload)
    producer.flush(STALL_SECONDS)
    failed = 0

    def delivered(error: Any, _: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    produce, poll, progress = producer.produce, producer.poll, Progress("confluent-kafka", count)
    produce_one = functools.partial(produce, on_delivery=delivered) if callbacks else produce
    clock = Stopwatch()
    for done in range(0, count, CHUNK):
        for _ in range(min(CHUNK, count - done)):
            while True:
                try:
                    produce_one(topic, payload)
                    break
                except BufferError:  # its queue is full: serve it, then retry
                    poll(0.001)
        progress(min(done + CHUNK, count))
    _check_failures("confluent-kafka", producer.flush(STALL_SECONDS) + failed)
    return clock.stop(count)


# -- kafka-python ------------------------------------------------------------------------

KAFKA_PYTHON_SAME: dict[str, Any] = {
    "linger_ms": 5,
    "batch_size": 128 * 1024,
    "acks": 1,
    "enable_idempotence": False,
}
KAFKA_PYTHON_DEFAULTS: dict[str, Any] = {}  # linger 0, batch 16 KiB, acks all, idempotent


def kafka_python_produce(
    target: KafkaTarget, topic: str, count: int, size: int, config: dict[str, Any]
) -> Measured:
    producer = peer("kafka").KafkaProducer(bootstrap_servers=target.bootstrap_servers, **config)
    payload = b"x" * size
    try:
        producer.send(topic, payload).get(STALL_SECONDS)
        send, progress = producer.send, Progress("kafka-python", count)
        futures: list[Any] = []
        clock = Stopwatch()
        for done in range(0, count, CHUNK):
            futures += [send(topic, payload) for _ in range(min(CHUNK, count - done))]
            progress(min(done + CHUNK, count))
        producer.flush(timeout=STALL_SECONDS)
        _check_failures("kafka-python", sum(1 for f in futures if not f.succeeded()))
        return clock.stop(count)
    finally:
        producer.close()


def _failed(futures: list[Any]) -> int:
    # All settled after flush() (asyncio.gather would cost seconds for 200k futures).
    return sum(1 for f in futures if not f.done() or f.cancelled() or f.exception() is not None)


def _check_failures(client: str, failed: int) -> None:
    if failed:
        raise RuntimeError(f"{client}: {failed} messages were not confirmed")


SAME = "linger 5 ms, batch 128 KiB, acks 1, not idempotent"
BULK = "send_many_async of 10 000 values a call, then every confirmation awaited"
CONTENDERS = (
    Contender(
        "msgclient",
        SAME + "; send_async, every future confirmed",
        functools.partial(msgclient_produce, options=MSGCLIENT_SAME),
    ),
    Contender(
        "msgclient defaults",
        "linger 5 ms, batch 16 KiB, acks all, idempotent (its kafka:// defaults); send_async",
        functools.partial(msgclient_produce, options=MSGCLIENT_DEFAULTS),
    ),
    Contender(
        "msgclient callbacks",
        SAME + "; send_async with a callback per message (no future), then flush",
        functools.partial(msgclient_produce, options=MSGCLIENT_SAME, callbacks=True),
    ),
    Contender(
        "msgclient callbacks defaults",
        "its kafka:// defaults; send_async with a callback per message, then flush",
        functools.partial(msgclient_produce, options=MSGCLIENT_DEFAULTS, callbacks=True),
    ),
    Contender(
        "msgclient send_many",
        f"{SAME}; {BULK}",
        functools.partial(msgclient_bulk, options=MSGCLIENT_SAME),
    ),
    Contender(
        "msgclient send_many large",
        f"batches of 920 KB payload / 10 000 messages (confluent's defaults), acks all, "
        f"idempotent; {BULK}",
        functools.partial(msgclient_bulk, options=MSGCLIENT_LARGE),
    ),
    Contender(
        "confluent callbacks",
        SAME + "; a delivery callback per message",
        functools.partial(confluent_produce, config=CONFLUENT_SAME, callbacks=True),
    ),
    Contender(
        "confluent callbacks defaults",
        "linger 5 ms, batch 1 MB / 10 000 messages, acks all; a delivery callback per message",
        functools.partial(confluent_produce, config=CONFLUENT_DEFAULTS, callbacks=True),
    ),
    Contender(
        "confluent",
        SAME + "; produce without callbacks, then flush",
        functools.partial(confluent_produce, config=CONFLUENT_SAME),
    ),
    Contender(
        "confluent defaults",
        "linger 5 ms, batch 1 MB / 10 000 messages, acks all; without callbacks, then flush",
        functools.partial(confluent_produce, config=CONFLUENT_DEFAULTS),
    ),
    Contender(
        "aiokafka",
        SAME + "; futures",
        functools.partial(aiokafka_produce, config=AIOKAFKA_SAME),
    ),
    Contender(
        "aiokafka defaults",
        "linger 0, batch 16 KiB, acks 1; futures",
        functools.partial(aiokafka_produce, config=AIOKAFKA_DEFAULTS),
    ),
    Contender(
        "kafka-python",
        SAME + "; futures",
        functools.partial(kafka_python_produce, config=KAFKA_PYTHON_SAME),
    ),
    Contender(
        "kafka-python defaults",
        "linger 0, batch 16 KiB, acks all, idempotent; futures",
        functools.partial(kafka_python_produce, config=KAFKA_PYTHON_DEFAULTS),
    ),
)
CONFIRMED_RIVALS = ("confluent callbacks", "aiokafka", "kafka-python")
RIVAL_DEFAULTS = ("confluent callbacks defaults", "aiokafka defaults", "kafka-python defaults")
COMPARISONS = (
    Comparison("each message confirmed, same settings", "msgclient", CONFIRMED_RIVALS),
    Comparison(
        "each message confirmed, each at its defaults", "msgclient defaults", RIVAL_DEFAULTS
    ),
    Comparison(
        "a callback per message, same settings", "msgclient callbacks", ("confluent callbacks",)
    ),
    Comparison(
        "a callback per message, each at its defaults",
        "msgclient callbacks defaults",
        ("confluent callbacks defaults",),
    ),
    Comparison(
        "bulk against each rival's fastest way, same settings",
        "msgclient send_many",
        ("confluent", *CONFIRMED_RIVALS),
    ),
    Comparison(
        "bulk, large batches, against the rivals' fastest at their defaults",
        "msgclient send_many large",
        ("confluent defaults", *RIVAL_DEFAULTS),
    ),
)
