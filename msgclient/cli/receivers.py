"""What ``consume`` reads from: readers (no group: nothing is committed) or a consumer of
a subscription / consumer group (it acknowledges what was printed), started at ``--from``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgclient
from msgclient.cli.errors import UsageError
from msgclient.cli.positions import AtTime, Offset, Start
from msgclient.consumer import Consumer
from msgclient.message import Message, MessageId
from msgclient.options import ConsumerType, InitialPosition
from msgclient.reader import Reader
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId

SUBSCRIPTION_TYPES = {
    "exclusive": ConsumerType.Exclusive,
    "shared": ConsumerType.Shared,  # Pulsar only
    "failover": ConsumerType.Failover,
    "key_shared": ConsumerType.KeyShared,  # Pulsar only
}


@dataclass
class Receivers:
    receive: list[Callable[[], Awaitable[Message]]]
    partitions: list[str]  # the topic names of the partitions read
    consumer: Consumer | None = None  # a group's: acknowledge through it
    # Set once messages can flow: at once, except for a Kafka group (its partitions
    # are assigned after it joined).
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class _Assigned:
    """A Kafka group's rebalance listener that tells when partitions were assigned."""

    def __init__(self, ready: asyncio.Event) -> None:
        self._ready = ready

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
        self._ready.set()


async def open_readers(
    client: msgclient.Client, topic: str, start: Start, partition: int | None
) -> Receivers:
    """Readers of ``topic`` (of its ``partition`` alone if given) from ``start``."""
    names = await client.get_topic_partitions(topic)
    if partition is not None and partition >= len(names):
        raise UsageError(f"--partition {partition}: {topic} has {len(names)} partition(s)")
    if isinstance(start, PulsarMessageId) and start.partition >= 0 and len(names) > 1:
        partition = start.partition  # the id names its partition: read that one
        if partition >= len(names):
            raise UsageError(f"--from {start}: {topic} has {len(names)} partition(s)")
    read = names if partition is None else [names[partition]]
    if isinstance(start, Offset):  # a reader per partition, each from that offset
        indexes = range(len(names)) if partition is None else [partition]
        readers = await asyncio.gather(
            *(
                client.create_reader(
                    topic,
                    KafkaMessageId(topic, index, start.offset),
                    start_message_id_inclusive=True,
                )
                for index in indexes
            )
        )
        return _ready(Receivers([r.read_next for r in readers], read))
    reader = await _reader(client, topic, start, partition)
    if isinstance(start, AtTime):
        await reader.seek(start.ms)
    return _ready(Receivers([reader.read_next], read))


def _ready(receivers: Receivers) -> Receivers:
    receivers.ready.set()
    return receivers


async def _reader(
    client: msgclient.Client, topic: str, start: Start, partition: int | None
) -> Reader:
    # A time is sought once the reader is there.
    position: MessageId | InitialPosition = (
        start if isinstance(start, InitialPosition | PulsarMessageId) else InitialPosition.Earliest
    )
    return await client.create_reader(
        topic, position, start_message_id_inclusive=True, partition=partition
    )


async def open_group(
    client: msgclient.Client,
    topic: str,
    group: str,
    start: Start,
    consumer_type: ConsumerType,
    kafka: bool,
) -> Receivers:
    """A consumer of subscription / group ``group``: ``earliest`` and ``latest`` are where
    a new one starts (an existing one resumes where it was acknowledged); an offset, a
    message id or a time moves it there (seek)."""
    ready = asyncio.Event()
    options: dict[str, Any] = {}
    if kafka:
        options["rebalance_listener"] = _Assigned(ready)
    else:
        ready.set()  # subscribed: the broker dispatches
    consumer = await client.subscribe(
        topic,
        group,
        consumer_type=consumer_type,
        initial_position=InitialPosition.Latest
        if start is InitialPosition.Latest
        else InitialPosition.Earliest,
        **options,
    )
    if isinstance(start, AtTime):
        await consumer.seek(start.ms)
    elif isinstance(start, Offset):
        await consumer.seek(KafkaMessageId(topic, 0, start.offset))  # one partition only
    elif isinstance(start, PulsarMessageId):
        await consumer.seek(start)
    partitions = await client.get_topic_partitions(topic)
    return Receivers([consumer.receive], partitions, consumer, ready)
