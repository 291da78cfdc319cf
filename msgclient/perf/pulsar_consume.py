"""Consume throughput on Pulsar: msgclient versus the official pulsar-client.

Both read the same backlog of ``count`` messages, each through a Shared subscription of its
own that existed before the backlog was produced, with ``receive`` + ``acknowledge`` per
message. Both consumers run at their defaults, which agree (receiver queue 1000, acks
grouped for 100 ms). The clock runs from the first receive to the last acknowledgment
handed to the client. Each kind of ``BACKLOGS`` is a row: how the backlog was written.
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


@dataclass(frozen=True)
class Backlog:
    service_url: str
    topic: str
    count: int


def make_backlog(
    service_url: str, topic: str, count: int, size: int, kind: BacklogKind
) -> tuple[Backlog, float]:
    """Subscribe both contenders, then write the backlog (after the writer's warm-up
    message, which stays unread); returns it and the seconds the writing took."""
    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    try:
        for subscription in SUBSCRIPTIONS.values():
            client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Shared).close()
    finally:
        client.close()
    write = official_produce if kind.writer == "pulsar-client" else msgclient_produce
    return Backlog(service_url, topic, count), write(service_url, topic, count, size, kind.options)


async def _msgclient_consume(backlog: Backlog) -> float:
    async with msgclient.Client(backlog.service_url) as client:
        consumer = await client.subscribe(
            backlog.topic,
            SUBSCRIPTIONS["msgclient"],
            consumer_type=msgclient.ConsumerType.Shared,
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
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
        consumer = client.subscribe(
            backlog.topic, SUBSCRIPTIONS["pulsar-client"], consumer_type=pulsar.ConsumerType.Shared
        )
        receive, acknowledge = consumer.receive, consumer.acknowledge
        start = time.perf_counter()
        for _ in range(backlog.count):
            acknowledge(receive(10_000))
        elapsed = time.perf_counter() - start
        consumer.close()
    finally:
        client.close()
    return elapsed
