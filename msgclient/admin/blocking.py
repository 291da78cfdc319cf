"""BlockingAdmin: the admin API for code without an event loop
(``msgclient.blocking.Client.admin()``); each method as ``Admin``'s, waited for."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from msgclient.admin.admin import Admin, PairT
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
from msgclient.message import MessageId

T = TypeVar("T")


class Runner(Protocol):
    """What runs a coroutine on the blocking client's loop and waits for it."""

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T: ...


class BlockingAdmin:
    def __init__(self, admin: Admin, runner: Runner) -> None:
        self._admin = admin
        self._runner = runner

    def last_message_ids(self, topic: str) -> dict[str, MessageId | None]:
        return self._runner.run(self._admin.last_message_ids(topic))

    def list_topics(
        self, namespace: str | None = None, *, include_internal: bool = False
    ) -> list[str]:
        admin = self._admin
        return self._runner.run(admin.list_topics(namespace, include_internal=include_internal))

    def describe_topics(self, topics: Iterable[str]) -> ItemResults[str, TopicDescription]:
        return self._runner.run(self._admin.describe_topics(topics))

    def create_topics(
        self, topics: Iterable[NewTopic], *, validate_only: bool = False
    ) -> ItemResults[str, None]:
        return self._runner.run(self._admin.create_topics(topics, validate_only=validate_only))

    def delete_topics(self, topics: Iterable[str]) -> ItemResults[str, None]:
        return self._runner.run(self._admin.delete_topics(topics))

    def create_partitions(self, totals: Mapping[str, int]) -> ItemResults[str, None]:
        return self._runner.run(self._admin.create_partitions(totals))

    def describe_configs(
        self, resources: Iterable[ConfigResource]
    ) -> ItemResults[ConfigResource, dict[str, ConfigEntry]]:
        return self._runner.run(self._admin.describe_configs(resources))

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> ItemResults[ConfigResource, None]:
        return self._runner.run(self._admin.incremental_alter_configs(changes))

    def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        return self._runner.run(self._admin.list_consumer_groups())

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> ItemResults[str, ConsumerGroupDescription]:
        return self._runner.run(self._admin.describe_consumer_groups(group_ids))

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> ItemResults[str, None]:
        return self._runner.run(self._admin.delete_consumer_groups(group_ids))

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, int]:
        return self._runner.run(self._admin.list_consumer_group_offsets(group_id, partitions))

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[PairT, int]
    ) -> ItemResults[TopicPartition, None]:
        return self._runner.run(self._admin.alter_consumer_group_offsets(group_id, offsets))

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> ItemResults[TopicPartition, None]:
        return self._runner.run(self._admin.delete_consumer_group_offsets(group_id, partitions))

    def list_offsets(
        self, specs: Mapping[PairT, OffsetSpec]
    ) -> ItemResults[TopicPartition, ListedOffset]:
        return self._runner.run(self._admin.list_offsets(specs))

    def delete_records(self, before: Mapping[PairT, int]) -> ItemResults[TopicPartition, int]:
        return self._runner.run(self._admin.delete_records(before))
