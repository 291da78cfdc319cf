"""Consume throughput on Pulsar: msgclient versus the official pulsar-client.

Both read the same backlog of ``count`` messages, each through a Shared subscription of its
own that existed before the backlog was produced, with ``receive`` + ``acknowledge`` per
message. Both consumers run at their defaults, which agree (receiver queue 1000, acks
grouped for 100 ms). The clock runs from the first receive to the last acknowledgment
handed to the client. Each kind of ``BACKLOGS`` is a row: how the backlog was written, and
for the bulk row how it is read (each client's bulk call, both with a 10k receiver queue).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgclient
from msgclient.perf import event_loop
from msgclient.perf.pulsar_produce import (
    SAME,
    msgclient_produce,
    official_produce,
    quiet_logger,
)

SUBSCRIPTIONS = {"msgclient": "perf-msgclient", "pulsar-client": "perf-official"}


@dataclass(frozen=True)
class BacklogKind:
    """How a backlog is written: by which client, with which producer options."""

    label: str
    settings: str
    writer: str  # "pulsar-client" or "msgclient"
    options: dict[str, Any]
    bulk: bool = False  # read with receive_many (msgclient) and batch_receive (pulsar-client)

    def messages_per_entry(self, rate: float) -> float:
        """About how many messages an entry holds when the writer writes ``rate`` msg/s."""
        options = self.options
        if not options.get("batching_enabled", True):
            return 1.0
        by_delay: float = rate * options["batching_max_publish_delay_ms"] / 1000
        return max(1.0, min(float(options["batching_max_messages"]), by_delay))


BACKLOGS = (
    BacklogKind(
        "1000-batches",
        "written by pulsar-client in batches of 1000 messages (128 KiB, a 100 ms delay so "
        "that they fill even when it writes slowly): what a busy producer writes",
        "pulsar-client",
        {**SAME, "batching_max_publish_delay_ms": 100},
    ),
    BacklogKind(
        "1000-batches bulk",
        "the 1000-batches backlog read in bulk, both with a 10k receiver queue: msgclient "
        "receive_many + acknowledge(batch), pulsar-client batch_receive (up to 10k, 10 ms) "
        "+ acknowledge per message (it has no batch ack)",
        "pulsar-client",
        {**SAME, "batching_max_publish_delay_ms": 100},
        bulk=True,
    ),
    BacklogKind(
        "1ms-batches",
        "written by pulsar-client with a 1 ms batch delay (else its defaults): entries of "
        "(its rate / 1000) messages",
        "pulsar-client",
        {**SAME, "batching_max_publish_delay_ms": 1},
    ),
    BacklogKind(
        "unbatched",
        "written by msgclient without batching (pulsar-client writes only about 6k "
        "unbatched msg/s here): one message per entry",
        "msgclient",
        {"batching_enabled": False, "max_pending_messages": 10_000, "block_if_queue_full": True},
    ),
)


BULK_QUEUE = 10_000  # the bulk row's receiver queue: ten 1000-message entries in flight


@dataclass(frozen=True)
class Backlog:
    service_url: str
    topic: str
    count: int
    bulk: bool


def make_backlog(
    service_url: str, topic: str, count: int, size: int, kind: BacklogKind
) -> tuple[Backlog, float]:
    """Subscribe both contenders, then write the backlog (after the writer's warm-up
    message, which stays unread); returns it and the rate it was written at (msg/s)."""
    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    try:
        for subscription in SUBSCRIPTIONS.values():
            client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Shared).close()
    finally:
        client.close()
    write = official_produce if kind.writer == "pulsar-client" else msgclient_produce
    written = write(service_url, topic, count, size, kind.options)
    return Backlog(service_url, topic, count, kind.bulk), written.rate


async def _msgclient_consume(backlog: Backlog) -> float:
    async with msgclient.Client(backlog.service_url) as client:
        consumer = await client.subscribe(
            backlog.topic,
            SUBSCRIPTIONS["msgclient"],
            consumer_type=msgclient.ConsumerType.Shared,
            **({"receiver_queue_size": BULK_QUEUE} if backlog.bulk else {}),
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
        if backlog.bulk:
            received = 0
            while received < backlog.count:
                batch = await consumer.receive_many(timeout_millis=10_000)
                batch.values()  # what a bulk reader reads
                acknowledge(batch)
                received += len(batch)
        else:
            for _ in range(backlog.count):
                acknowledge(await receive(10_000))
        elapsed = time.perf_counter() - start
        await consumer.close()
    return elapsed


def msgclient_consume(backlog: Backlog) -> float:
    """Seconds for msgclient to receive and acknowledge the backlog."""
    return event_loop.run(_msgclient_consume(backlog))


def official_consume(backlog: Backlog) -> float:
    """Seconds for pulsar-client to receive and acknowledge the backlog."""
    import pulsar

    client = pulsar.Client(backlog.service_url, logger=quiet_logger())
    try:
        bulk: dict[str, Any] = {}
        if backlog.bulk:
            bulk = {
                "receiver_queue_size": BULK_QUEUE,
                "batch_receive_policy": pulsar.ConsumerBatchReceivePolicy(BULK_QUEUE, -1, 10),
            }
        consumer = client.subscribe(
            backlog.topic,
            SUBSCRIPTIONS["pulsar-client"],
            consumer_type=pulsar.ConsumerType.Shared,
            **bulk,
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
        if backlog.bulk:
            received, last_seen = 0, start
            while received < backlog.count:
                messages = consumer.batch_receive()
                for message in messages:
                    message.data()
                    acknowledge(message)
                received += len(messages)
                if messages:
                    last_seen = time.perf_counter()
                elif time.perf_counter() - last_seen > 10:  # as receive(10_000) would
                    raise RuntimeError(f"pulsar-client: nothing for 10 s after {received}")
        else:
            for _ in range(backlog.count):
                acknowledge(receive(10_000))
        elapsed = time.perf_counter() - start
        consumer.close()
    finally:
        client.close()
    return elapsed
