"""Admin: topics, configs, consumer groups and offsets, through the client's connections.

``admin = client.admin()``; names follow Kafka's AdminClient (as confluent-kafka's admin
does). Arguments are checked here, the same for both brokers, before anything is sent: a
bad topic name, partition count or offset raises InvalidConfigurationError naming it. What
a protocol cannot do raises NotSupportedError saying why (docs/admin.md lists them).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from msgclient.admin.transport import AdminTransport
from msgclient.admin.types import (
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ItemResults,
    ListedOffset,
    NewTopic,
    OffsetSpec,
    TopicDescription,
    TopicPartition,
)
from msgclient.consumer import Consumer
from msgclient.errors import InvalidConfigurationError, MsgClientError
from msgclient.message import MessageId
from msgclient.options import ConsumerType, InitialPosition, SubscriptionMode

Subscribe = Callable[..., Awaitable[Consumer]]  # Client.subscribe
PROBE: dict[str, Any] = {
    "consumer_type": ConsumerType.Exclusive,
    "subscription_mode": SubscriptionMode.NonDurable,
    "initial_position": InitialPosition.Latest,
    "receiver_queue_size": 1,
    # Kafka: a fetch from the end waits this long on the broker, and the ListOffsets of
    # last_message_ids would queue behind it on the connection (measured on tansu).
    "fetch_max_wait_ms": 10,
}

# (topic, partition) keys: TopicPartition or plain tuples (Mapping keys are invariant)
PairT = TypeVar("PairT", bound=tuple[str, int])


class Admin:
    """The admin API of one client (``client.admin()``); it closes with the client."""

    def __init__(
        self,
        transport: AdminTransport,
        normalize_topic: Callable[[str], str],
        check_open: Callable[[], None],
        subscribe: Subscribe,
    ) -> None:
        self._transport = transport
        self._normalize_topic = normalize_topic
        self._check_open = check_open
        self._subscribe = subscribe

    # -- topics -------------------------------------------------------------------------

    async def list_topics(
        self, namespace: str | None = None, *, include_internal: bool = False
    ) -> list[str]:
        """Every topic's name, sorted. Pulsar: of ``namespace`` (default
        ``public/default``), partitioned topics by their own name. Kafka: no namespaces;
        internal topics (``__consumer_offsets``) only with ``include_internal``."""
        self._check_open()
        return await self._transport.list_topics(namespace, include_internal)

    async def describe_topics(self, topics: Iterable[str]) -> ItemResults[str, TopicDescription]:
        """Each topic's partitions and their leaders."""
        self._check_open()
        return await self._transport.describe_topics(self._topics(topics))

    async def create_topics(
        self, topics: Iterable[NewTopic], *, validate_only: bool = False
    ) -> ItemResults[str, None]:
        """Create topics; with ``validate_only`` the broker only checks the request."""
        self._check_open()
        new = list(topics)
        for topic in new:
            if not isinstance(topic, NewTopic):
                raise InvalidConfigurationError(f"create_topics takes NewTopic, not {topic!r}")
            _at_least(1, f"partitions of topic {topic.name!r}", topic.partitions, default=-1)
            _at_least(
                1, f"replication_factor of topic {topic.name!r}", topic.replication_factor, -1
            )
        names = self._topics(t.name for t in new)
        return await self._transport.create_topics(
            [attrs.evolve(t, name=name) for t, name in zip(new, names, strict=True)], validate_only
        )

    async def delete_topics(self, topics: Iterable[str]) -> ItemResults[str, None]:
        self._check_open()
        return await self._transport.delete_topics(self._topics(topics))

    async def create_partitions(self, totals: Mapping[str, int]) -> ItemResults[str, None]:
        """Grow topics to these partition counts (the new total of each)."""
        self._check_open()
        for topic, total in totals.items():
            _at_least(1, f"partition count of topic {topic!r}", total)
        return await self._transport.create_partitions(
            dict(zip(self._topics(totals), totals.values(), strict=True))
        )

    # -- configs ------------------------------------------------------------------------

    async def describe_configs(
        self, resources: Iterable[ConfigResource]
    ) -> ItemResults[ConfigResource, dict[str, ConfigEntry]]:
        self._check_open()
        return await self._transport.describe_configs([self._resource(r) for r in resources])

    async def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> ItemResults[ConfigResource, None]:
        """Set configs (``{resource: {name: value}}``); a value None deletes the config,
        back to its default. Configs not named stay as they are."""
        self._check_open()
        checked: dict[ConfigResource, dict[str, str | None]] = {}
        for resource, entries in changes.items():
            for name, value in entries.items():
                if not isinstance(name, str) or not (value is None or isinstance(value, str)):
                    raise InvalidConfigurationError(
                        f"config {name!r}={value!r} of {resource.name!r}: names and values "
                        "are strings (None deletes the config)"
                    )
            checked[self._resource(resource)] = dict(entries)
        return await self._transport.incremental_alter_configs(checked)

    # -- consumer groups ----------------------------------------------------------------

    async def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        self._check_open()
        return await self._transport.list_consumer_groups()

    async def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> ItemResults[str, ConsumerGroupDescription]:
        self._check_open()
        return await self._transport.describe_consumer_groups(_group_ids(group_ids))

    async def delete_consumer_groups(self, group_ids: Iterable[str]) -> ItemResults[str, None]:
        """Delete groups that have no members, with their committed offsets."""
        self._check_open()
        return await self._transport.delete_consumer_groups(_group_ids(group_ids))

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, int]:
        """The offsets ``group_id`` committed (the next record it reads) for
        ``partitions``, -1 where it has none; every partition it committed for when
        ``partitions`` is None. Only committed transactions count."""
        self._check_open()
        (group,) = _group_ids([group_id])
        asked = None if partitions is None else self._partitions(partitions)
        return await self._transport.list_consumer_group_offsets(group, asked)

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[PairT, int]
    ) -> ItemResults[TopicPartition, None]:
        """Commit these offsets for a group with no active member (a reset)."""
        self._check_open()
        (group,) = _group_ids([group_id])
        for (topic, partition), offset in offsets.items():
            _at_least(0, f"offset of {topic}/{partition}", offset)
        return await self._transport.alter_consumer_group_offsets(
            group, dict(zip(self._partitions(offsets), offsets.values(), strict=True))
        )

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> ItemResults[TopicPartition, None]:
        """Forget the group's committed offsets of these partitions."""
        self._check_open()
        (group,) = _group_ids([group_id])
        return await self._transport.delete_consumer_group_offsets(
            group, self._partitions(partitions)
        )

    # -- offsets and records ------------------------------------------------------------

    async def list_offsets(
        self, specs: Mapping[PairT, OffsetSpec]
    ) -> ItemResults[TopicPartition, ListedOffset]:
        """The earliest or latest offset of each partition, or the first at or after a
        time (``{("t", 0): OffsetSpec.latest()}``)."""
        self._check_open()
        for partition, spec in specs.items():
            if not isinstance(spec, OffsetSpec):
                raise InvalidConfigurationError(
                    f"list_offsets of {partition!r}: expected an OffsetSpec, got {spec!r}"
                )
        return await self._transport.list_offsets(
            dict(zip(self._partitions(specs), specs.values(), strict=True))
        )

    async def delete_records(self, before: Mapping[PairT, int]) -> ItemResults[TopicPartition, int]:
        """Delete each partition's records before an offset (-1: every record): each
        partition's new low watermark."""
        self._check_open()
        for (topic, partition), offset in before.items():
            _at_least(0, f"offset of {topic}/{partition}", offset, default=-1)
        return await self._transport.delete_records(
            dict(zip(self._partitions(before), before.values(), strict=True))
        )

    async def last_message_ids(self, topic: str) -> dict[str, MessageId | None]:
        """The id of the last message of each partition of ``topic`` (by the partition's
        topic name; None where it is empty), both brokers: what a reader started at the
        end now would read after. Kafka: read_committed (the last stable offset). Asked
        through a non-durable probe subscription, removed afterwards."""
        self._check_open()
        consumer = await self._subscribe(topic, f"msgclient-probe-{uuid.uuid4().hex}", **PROBE)
        try:
            return await consumer.last_message_ids()
        finally:
            try:
                await consumer.unsubscribe()  # pulsar-lite keeps non-durable subscriptions
            except MsgClientError:  # Kafka: nothing to delete
                await consumer.close()

    # -- checks -------------------------------------------------------------------------

    def _topics(self, topics: Iterable[str]) -> list[str]:
        if isinstance(topics, str):  # a name would iterate as letters
            raise InvalidConfigurationError(f"expected a list of topics, got the string {topics!r}")
        return [self._normalize_topic(topic) for topic in topics]

    def _partitions(self, partitions: Iterable[tuple[str, int]]) -> list[TopicPartition]:
        checked = []
        for pair in partitions:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidConfigurationError(f"expected a (topic, partition) pair, got {pair!r}")
            topic, partition = pair
            _at_least(0, f"partition of topic {topic!r}", partition)
            checked.append(TopicPartition(self._normalize_topic(topic), partition))
        return checked

    def _resource(self, resource: ConfigResource) -> ConfigResource:
        if not isinstance(resource, ConfigResource):
            raise InvalidConfigurationError(f"expected a ConfigResource, got {resource!r}")
        return resource


def _group_ids(group_ids: Iterable[str]) -> list[str]:
    if isinstance(group_ids, str):
        raise InvalidConfigurationError(f"expected a list of group ids, got {group_ids!r}")
    checked = list(group_ids)
    for group in checked:
        if not isinstance(group, str) or not group:
            raise InvalidConfigurationError(f"invalid group id {group!r}: a non-empty string")
    return checked


def _at_least(low: int, what: str, value: object, default: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigurationError(f"{what} is {value!r}: expected an integer")
    if value < low and value != default:
        allowed = f"at least {low}" + (f" (or {default})" if default is not None else "")
        raise InvalidConfigurationError(f"{what} is {value}: expected {allowed}")
