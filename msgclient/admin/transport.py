"""AdminTransport: what a protocol adapter implements for the admin API.

The core (``msgclient.admin.Admin``) checks and normalizes what the caller passes, then
asks the adapter's transport (``ProtocolBackend.admin_transport()``). An operation the
protocol or the broker cannot do keeps the default here: NotSupportedError, in the words
of the adapter's ``not_supported`` (Pulsar's names its REST admin API).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

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
from msgclient.errors import NotSupportedError

ConfigChanges = dict[ConfigResource, dict[str, str | None]]  # None: back to the default


class AdminTransport(ABC):
    """Topics, configs, groups and offsets of one client's cluster."""

    @abstractmethod
    def not_supported(self, operation: str) -> NotSupportedError:
        """The error for an ``operation`` (a method name) this protocol cannot do."""

    @abstractmethod
    async def list_topics(self, namespace: str | None, include_internal: bool) -> list[str]:
        """Every topic's name (of ``namespace`` where topics have one), sorted."""

    @abstractmethod
    async def describe_topics(self, topics: list[str]) -> ItemResults[str, TopicDescription]:
        """Partitions and their leaders; a topic that does not exist fails on its own."""

    async def create_topics(
        self, topics: list[NewTopic], validate_only: bool
    ) -> ItemResults[str, None]:
        raise self.not_supported("create_topics")

    async def delete_topics(self, topics: list[str]) -> ItemResults[str, None]:
        raise self.not_supported("delete_topics")

    async def create_partitions(self, totals: dict[str, int]) -> ItemResults[str, None]:
        raise self.not_supported("create_partitions")

    async def describe_configs(
        self, resources: list[ConfigResource]
    ) -> ItemResults[ConfigResource, dict[str, ConfigEntry]]:
        raise self.not_supported("describe_configs")

    async def incremental_alter_configs(
        self, changes: ConfigChanges
    ) -> ItemResults[ConfigResource, None]:
        raise self.not_supported("incremental_alter_configs")

    async def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        raise self.not_supported("list_consumer_groups")

    async def describe_consumer_groups(
        self, group_ids: list[str]
    ) -> ItemResults[str, ConsumerGroupDescription]:
        raise self.not_supported("describe_consumer_groups")

    async def delete_consumer_groups(self, group_ids: list[str]) -> ItemResults[str, None]:
        raise self.not_supported("delete_consumer_groups")

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (-1: none) of ``partitions``, or of every
        partition it committed for (None)."""
        raise self.not_supported("list_consumer_group_offsets")

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, int]
    ) -> ItemResults[TopicPartition, None]:
        raise self.not_supported("alter_consumer_group_offsets")

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> ItemResults[TopicPartition, None]:
        raise self.not_supported("delete_consumer_group_offsets")

    async def list_offsets(
        self, specs: dict[TopicPartition, OffsetSpec]
    ) -> ItemResults[TopicPartition, ListedOffset]:
        raise self.not_supported("list_offsets")

    async def delete_records(
        self, before: dict[TopicPartition, int]
    ) -> ItemResults[TopicPartition, int]:
        """Delete each partition's records before an offset (-1: all): its new low
        watermark."""
        raise self.not_supported("delete_records")
