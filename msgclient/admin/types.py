"""What the admin API takes and answers: plain frozen records, the same on both brokers.

Names follow Kafka's AdminClient (``NewTopic``, ``ConfigResource``, ``OffsetSpec``...), as
the official clients' admin APIs do. A request naming several items answers an
``ItemResults``: each item succeeded or failed on its own (partial failure is normal).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, NamedTuple, TypeVar

import attrs

from msgclient.errors import MsgClientError

K = TypeVar("K")
V = TypeVar("V")


class TopicPartition(NamedTuple):
    """One partition of a topic; a plain ``(topic, partition)`` tuple compares equal."""

    topic: str
    partition: int


@attrs.frozen
class ItemResults(Generic[K, V]):
    """The outcome of each item of one request: ``succeeded`` (item -> answer) and
    ``failed`` (item -> its error). ``result(item)`` returns an item's answer or raises its
    error; ``all()`` returns every answer or raises the first failure."""

    succeeded: Mapping[K, V]
    failed: Mapping[K, MsgClientError]

    def result(self, item: K) -> V:
        error = self.failed.get(item)
        if error is not None:
            raise error
        return self.succeeded[item]

    def all(self) -> Mapping[K, V]:
        for error in self.failed.values():
            raise error
        return self.succeeded


@attrs.frozen
class NewTopic:
    """A topic to create: ``partitions`` and ``replication_factor`` -1 take the broker's
    defaults; ``configs`` are topic configs (``{"retention.ms": "60000"}``)."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class PartitionInfo:
    """A partition's leader and replicas, as broker addresses (``host:port``); Pulsar has
    no replicas in Kafka's sense: its leader is the broker that owns the partition."""

    partition: int
    leader: str | None
    replicas: tuple[str, ...] = ()
    in_sync_replicas: tuple[str, ...] = ()


@attrs.frozen
class TopicDescription:
    name: str
    partitions: tuple[PartitionInfo, ...]
    internal: bool = False
    partitioned: bool = True  # False: a Pulsar topic that is not partitioned (one "partition")


class ConfigResourceType(enum.Enum):
    TOPIC = 2  # Kafka's resource type numbers
    BROKER = 4


@attrs.frozen
class ConfigResource:
    """Whose configs: ``ConfigResource.topic("t")`` or ``ConfigResource.broker(1)``."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(node_id))


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    sensitive: bool = False


@attrs.frozen
class ConsumerGroupListing:
    group_id: str
    protocol_type: str  # "consumer" for consumer groups
    state: str | None = None  # as the broker names it (Stable, Empty...), if it says


@attrs.frozen
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()
    group_instance_id: str | None = None


@attrs.frozen
class ConsumerGroupDescription:
    group_id: str
    state: str
    protocol_type: str
    assignor: str  # the group's protocol (range, roundrobin, cooperative-sticky...)
    members: tuple[MemberDescription, ...]


@attrs.frozen
class OffsetSpec:
    """Which offset ``list_offsets`` finds: ``OffsetSpec.earliest()``, ``latest()`` or
    ``for_timestamp(ms)`` (the first record at or after that time)."""

    timestamp: int  # Kafka's ListOffsets encoding: -2 earliest, -1 latest, else ms

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(-2)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(-1)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError(f"timestamp {timestamp_ms} is negative: use earliest() or latest()")
        return cls(timestamp_ms)


@attrs.frozen
class ListedOffset:
    """An offset ``list_offsets`` found (-1: no record at or after the timestamp) and the
    timestamp of its record (-1 for earliest and latest)."""

    offset: int
    timestamp: int = -1
