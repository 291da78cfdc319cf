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

from msgclient.consumer import Consumer
from msgclient.contract import ProtocolBackend
from msgclient.core.receive.partition_consumer import PartitionConsumer
from msgclient.core.receive.topic_discovery import TopicDiscovery
from msgclient.errors import MsgClientError
from msgclient.options import ConsumerOptions

MakeMembers = Callable[[str], Awaitable[list[PartitionConsumer]]]
StartAll = Callable[[list[PartitionConsumer]], Awaitable[None]]


class PatternSubscription:
    """Joins and drops the topics of one pattern consumer."""

    def __init__(
        self,
        backend: ProtocolBackend[Any],
        context: Any,
        pattern: re.Pattern[str],
        options: ConsumerOptions,
        make_members: MakeMembers,
        start_all: StartAll,
    ) -> None:
        self._backend = backend
        self._context = context
        self._pattern = pattern
        self._options = options
        self._make_members = make_members
        self._start_all = start_all
        self._consumer: Consumer | None = None
        self.discovery: TopicDiscovery | None = None

    async def list_topics(self) -> list[str]:
        return await self._backend.list_topics(self._pattern, self._options.regex_subscription_mode)

    async def members_of(self, topics: list[str]) -> list[PartitionConsumer]:
        """The (unstarted) members of ``topics``, the backend told of them."""
        made = await asyncio.gather(*(self._make_members(t) for t in topics))
        self._backend.update_subscription(self._context, topics)
        return [member for members in made for member in members]

    def run(self, consumer: Consumer) -> None:
        """Start the discovery for ``consumer`` (which has the first listing's topics)."""
        self._consumer = consumer
        self.discovery = TopicDiscovery(
            self.list_topics,
            lambda: consumer.topics,
            self._apply,
            self._options.pattern_auto_discovery_period,
            f"pattern {self._pattern.pattern!r} of {consumer.subscription_name}",
        )
        consumer.attach_discovery(self.discovery.close, self._release)
        self.discovery.start()

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
                await self._start_all(made)
            except MsgClientError:
                await consumer.remove_topics([topic])  # the next period tries again
                raise

    async def _release(self) -> None:
        await self._backend.close_subscription(self._context)
