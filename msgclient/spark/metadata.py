"""What the planner asks the brokers: partitions, their ends, first messages, times.

Driver side, through the async public API. Every wait is bounded: the client's operation
timeout for requests, ``probe_ms`` for a first message that may never come.
"""

from __future__ import annotations

import asyncio
import re
from typing import NamedTuple

import msgclient
from msgclient.errors import InvalidConfigurationError, ReceiveTimeoutError
from msgclient.message import MessageId
from msgclient.options import InitialPosition
from msgclient.spark.errors import SourceOptionError
from msgclient.spark.options import TopicSelection
from msgclient.spark.positions import (
    Position,
    Protocol,
    PulsarPosition,
    covers,
    end_after,
    is_last_up_to,
    pulsar_position,
    reader_start,
)

PROBE_MS = 5_000  # longest wait for a message known to exist (or gone: retention)


class TopicPartition(NamedTuple):
    """A partition by its topic (as the options name it) and index."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}"


async def discover(
    client: msgclient.Client, selection: TopicSelection
) -> dict[TopicPartition, str]:
    """The partitions to read, each with its own topic name (which a Pulsar consumer can
    subscribe to); an unknown name or partition raises an error naming the option."""
    found: dict[TopicPartition, str] = {}
    wanted = dict(selection.assign) if selection.assign else {}
    topics = selection.names()
    if selection.pattern is not None:  # what matches now: a later batch finds new topics
        try:
            topics = tuple(await client.topics_matching(re.compile(selection.pattern)))
        except InvalidConfigurationError as error:
            raise SourceOptionError(selection.option, str(error)) from None
    for topic in topics:
        try:
            names = await client.get_topic_partitions(topic)
        except InvalidConfigurationError as error:
            raise SourceOptionError(selection.option, f"topic {topic!r}: {error}") from None
        indexes = wanted.get(topic, tuple(range(len(names))))
        missing = [i for i in indexes if i >= len(names)]
        if missing:
            raise SourceOptionError(
                selection.option, f"topic {topic!r} has {len(names)} partition(s): no {missing}"
            )
        for index in indexes:
            found[TopicPartition(topic, index)] = names[index]
    return found


async def ends(
    client: msgclient.Client, protocol: Protocol, partitions: dict[TopicPartition, str]
) -> dict[TopicPartition, Position]:
    """Where each partition ends now (Kafka: the next offset; Pulsar: the last message)."""
    admin = client.admin()
    topics = sorted({tp.topic for tp in partitions})
    answers = await asyncio.gather(*(admin.last_message_ids(topic) for topic in topics))
    last = {name: message_id for answer in answers for name, message_id in answer.items()}
    return {tp: end_after(protocol, last.get(name)) for tp, name in partitions.items()}


async def first_after(
    client: msgclient.Client, tp: TopicPartition, after: Position | None, probe_ms: int
) -> MessageId | None:
    """The id of the first message after ``after`` (None: from the first there is), or
    None when none comes within ``probe_ms``."""
    reader = await _reader_after(client, tp, after, 1)
    try:
        async with asyncio.timeout(probe_ms / 1000):
            while True:
                message_id = (await reader.read_next()).message_id()
                # A Pulsar start gets its entry again (after a whole one, or all of one it
                # is inside): skip what the start covers.
                if after is None or not covers(after, message_id):
                    return message_id
    except (TimeoutError, ReceiveTimeoutError):
        return None
    finally:
        await reader.close()


class Walk(NamedTuple):
    """What ``after_messages`` read: where it ended, how many messages it counted, and
    whether it gave up waiting (the probe) before the count or the end."""

    position: Position
    seen: int
    timed_out: bool


async def after_messages(
    client: msgclient.Client,
    tp: TopicPartition,
    after: Position,
    end: Position,
    count: int,
    probe_ms: int,
) -> Walk:
    """The position after the next ``count`` messages past ``after`` (at most up to
    ``end``), and how many there were: Pulsar limits that count messages, which only
    reading tells (a producer batch is one entry of many). Fewer when ``end`` comes first
    or no message comes within ``probe_ms``."""
    reader = await _reader_after(client, tp, after, min(count, 1000))
    position, seen = after, 0
    pulsar_end = end if isinstance(end, PulsarPosition) else None
    try:
        async with asyncio.timeout(probe_ms / 1000):
            while seen < count:
                message_id = (await reader.read_next()).message_id()
                if not covers(end, message_id):
                    break  # past the end
                # A start inside an entry gets that entry again: what it covers is not
                # counted. At the end's last message (counted or not), nothing more comes
                # up to the end: no wait for the probe.
                if not covers(after, message_id):
                    position, seen = pulsar_position(message_id), seen + 1
                if pulsar_end is not None and is_last_up_to(pulsar_end, message_id):
                    break
    except (TimeoutError, ReceiveTimeoutError):
        return Walk(position, seen, True)
    finally:
        await reader.close()
    return Walk(position, seen, False)


async def _reader_after(
    client: msgclient.Client, tp: TopicPartition, after: Position | None, queue_size: int
) -> msgclient.Reader:
    """A reader of ``tp`` from the message after ``after`` (None: the first there is); on
    Pulsar it may get what ``after`` covers first (a start inside an entry)."""
    start, inclusive = reader_start(after, tp.topic, tp.partition)
    return await client.create_reader(
        tp.topic,
        start,
        partition=tp.partition,
        start_message_id_inclusive=inclusive,
        receiver_queue_size=queue_size,
    )


async def first_at_time(
    client: msgclient.Client, tp: TopicPartition, timestamp: int, probe_ms: int
) -> MessageId | None:
    """The first message published at or after ``timestamp`` (ms), as the broker's seek by
    time finds it; None when there is none."""
    reader = await client.create_reader(
        tp.topic, InitialPosition.Earliest, partition=tp.partition, receiver_queue_size=1
    )
    try:
        await reader.seek(timestamp)
        async with asyncio.timeout(probe_ms / 1000):
            while True:
                message = await reader.read_next()
                # What was fetched before the seek may still come first.
                if message.publish_timestamp() >= timestamp:
                    return message.message_id()
    except (TimeoutError, ReceiveTimeoutError):
        return None
    finally:
        await reader.close()
