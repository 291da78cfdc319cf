"""The changing topics of a pattern subscription (``subscribe(re.compile(...))``).

The topic discovery (``core/receive/topic_discovery.py``) lists the matching topics every
``pattern_auto_discovery_period`` seconds and hands the changes here. A topic that starts
to match gets members on the consumer's receive queue: they are made (the adapter's
transports with them), the backend is told the new topic set (Kafka: the group rejoins
with it, and its assignment finds the new transports), the consumer takes them, then they
start (if they cannot, the consumer drops them and the next period tries again). A topic that stops
matching (deleted) is told to the backend first, then its members close.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from msgclient.consumer import Consumer
from msgclient.contract import ProtocolBackend
from msgclient.core.receive.dead_letters import DeadLetterRouter, SenderFactory
from msgclient.core.receive.partition_consumer import PartitionConsumer
from msgclient.core.receive.topic_discovery import TopicDiscovery
from msgclient.errors import InvalidConfigurationError, MsgClientError
from msgclient.options import ConsumerOptions

PartitionNames = Callable[[str], Awaitable[list[tuple[str, int]]]]
# (partition name, index, topic, window size, dead-letter router) -> an unstarted member
MemberFactory = Callable[[str, int, str, int, DeadLetterRouter | None], PartitionConsumer]
StartAll = Callable[[list[PartitionConsumer]], Awaitable[None]]


@attrs.frozen
class Members:
    """What the client lends to make and start a topic's members."""

    partition_names: PartitionNames
    member: MemberFactory
    dead_letter_producer: SenderFactory
    start_all: StartAll


class PatternSubscription:
    """Joins and drops the topics of one pattern consumer."""

    def __init__(
        self,
        backend: ProtocolBackend[Any],
        context: Any,
        pattern: re.Pattern[str],
        subscription_name: str,
        options: ConsumerOptions,
        members: Members,
    ) -> None:
        for name, refused in (
            ("receiver_queue_size=0", options.receiver_queue_size == 0),
            ("retry_enable", options.retry_enable),
        ):
            if refused:
                raise InvalidConfigurationError(f"{name} is not offered with a topic pattern")
        self._backend = backend
        self._context = context
        self._pattern = pattern
        self._subscription_name = subscription_name
        self._options = options
        self._members = members
        self._consumer: Consumer | None = None

    async def list_topics(self) -> list[str]:
        return await self._backend.list_topics(self._pattern, self._options.regex_subscription_mode)

    async def start(self) -> tuple[list[str], list[PartitionConsumer]]:
        """The first listing's topics and their started members."""
        try:
            topics = await self.list_topics()
            made = await asyncio.gather(*(self._make_members(t) for t in topics))
            self._backend.update_subscription(self._context, topics)
            members = [member for members in made for member in members]
            await self._members.start_all(members)
        except BaseException:
            await self._release()  # what update_subscription kept open (Kafka's group)
            raise
        return topics, members

    async def _make_members(self, topic: str) -> list[PartitionConsumer]:
        names = await self._members.partition_names(topic)
        # The Java client's share of the total for each partition the topic has.
        options = self._options
        across = options.max_total_receiver_queue_size_across_partitions
        size = max(1, min(options.receiver_queue_size, across // len(names)))
        router = None
        if options.dead_letter_policy is not None:
            router = DeadLetterRouter(
                options.dead_letter_policy,
                topic,
                self._subscription_name,
                self._members.dead_letter_producer,
            )
        return [self._members.member(name, index, topic, size, router) for name, index in names]

    def run(self, consumer: Consumer) -> None:
        """Start the discovery for ``consumer`` (which has the first listing's topics)."""
        self._consumer = consumer
        discovery = TopicDiscovery(
            self.list_topics,
            lambda: consumer.topics,
            self._apply,
            self._options.pattern_auto_discovery_period,
            f"pattern {self._pattern.pattern!r} of {consumer.subscription_name}",
        )
        consumer.attach_discovery(discovery.close, self._release)
        discovery.start()

    async def _apply(self, added: list[str], removed: list[str]) -> None:
        consumer = self._consumer
        assert consumer is not None
        if removed:
            self._backend.update_subscription(
                self._context, sorted(set(consumer.topics) - set(removed))
            )
            await consumer.remove_topics(removed)
        for topic in added:
            made = await self._make_members(topic)
            self._backend.update_subscription(self._context, sorted({*consumer.topics, topic}))
            # Known to the consumer first: a message may come as soon as one subscribes.
            consumer.add_partitions(topic, made)
            try:
                await self._members.start_all(made)
            except MsgClientError:
                await consumer.remove_topics([topic])  # the next period tries again
                raise

    async def _release(self) -> None:
        await self._backend.close_subscription(self._context)
