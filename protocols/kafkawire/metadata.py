"""KafkaLookupService: partitions and their leaders, from Metadata requests.

The cluster's metadata is cached per topic and refreshed when it is older than
``metadata_max_age_ms`` (Kafka's metadata.max.age.ms, 5 minutes), or at once after a
transport reports that it is stale (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
LEADER_NOT_AVAILABLE, a lost connection). Concurrent lookups of one topic share one request
(the core's LookupService), and the retry loops of the callers supply the backoff.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence

import attrs
from kafka.protocol.metadata import MetadataRequest

from msgclient.core.network.lookup import BrokerAddress, LookupService
from msgclient.errors import ConnectError, TopicLookupError
from protocols.kafkawire import errors
from protocols.kafkawire.connection import KafkaConnection

Connect = Callable[[str], Awaitable[KafkaConnection]]


@attrs.frozen
class TopicMetadata:
    """One topic: the leader's address of each partition (None while it has no leader)."""

    leaders: tuple[str | None, ...]
    fetched_at: float


def split_partition_name(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``: the Kafka adapter's partition names."""
    topic, _, index = name.rpartition("-")
    return topic, int(index)


class KafkaLookupService(LookupService):
    """Lookups go to any broker that answers: the bootstrap list first, then known ones."""

    def __init__(self, connect: Connect, bootstrap: Sequence[str], max_age: float) -> None:
        super().__init__()
        self._connect = connect
        self._bootstrap = list(bootstrap)
        self._next_bootstrap = itertools.count()
        self._max_age = max_age
        self._topics: dict[str, TopicMetadata] = {}
        self._loop = asyncio.get_running_loop()

    def invalidate(self, topic: str) -> None:
        """The cached leaders of ``topic`` are stale: the next lookup asks a broker."""
        self._topics.pop(topic, None)

    async def leader(self, topic: str, partition: int) -> str:
        """``host:port`` of the partition's leader."""
        address = await self.get_broker(f"{topic}-{partition}")
        return address.physical

    async def any_broker(self) -> KafkaConnection:
        """A connection to some broker: bootstrap servers in turn until one answers."""
        errors_seen: list[str] = []
        start = next(self._next_bootstrap)
        for i in range(len(self._bootstrap)):
            address = self._bootstrap[(start + i) % len(self._bootstrap)]
            try:
                return await self._connect(address)
            except ConnectError as error:
                errors_seen.append(str(error))
        raise ConnectError("no bootstrap server answered: " + "; ".join(errors_seen))

    # -- LookupService ------------------------------------------------------------------

    async def _fetch_partition_count(self, topic: str) -> int:
        return len((await self._topic(topic)).leaders)

    async def _fetch_broker(self, topic: str) -> BrokerAddress:
        name, partition = split_partition_name(topic)
        leaders = (await self._topic(name)).leaders
        if partition >= len(leaders):
            raise TopicLookupError(f"{name} has {len(leaders)} partitions, not {partition + 1}")
        leader = leaders[partition]
        if leader is None:
            self.invalidate(name)
            raise errors.kafka_error(errors.LEADER_NOT_AVAILABLE, f"partition {topic}")
        return BrokerAddress(leader, leader)

    async def _topic(self, topic: str) -> TopicMetadata:
        cached = self._topics.get(topic)
        if cached is not None and self._loop.time() - cached.fetched_at < self._max_age:
            return cached
        fetched = await self._once(("metadata", topic), lambda: self._request(topic))
        self._topics[topic] = fetched
        return fetched

    async def _request(self, topic: str) -> TopicMetadata:
        connection = await self.any_broker()
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=True,
        )
        response = await connection.request(request)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        (answer,) = [t for t in response.topics if t.name == topic] or [None]
        if answer is None:
            raise TopicLookupError(f"the metadata answer does not mention topic {topic!r}")
        if answer.error_code:
            raise errors.kafka_error(answer.error_code, f"metadata of topic {topic!r}")
        by_index = {p.partition_index: p for p in answer.partitions}
        if not by_index:
            raise errors.kafka_error(
                errors.LEADER_NOT_AVAILABLE, f"topic {topic!r} has no partitions yet"
            )
        leaders = tuple(
            brokers.get(by_index[i].leader_id)
            if i in by_index and not by_index[i].error_code
            else None
            for i in range(max(by_index) + 1)
        )
        return TopicMetadata(leaders, self._loop.time())
