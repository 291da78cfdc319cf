"""KafkaAdmin: the admin API over the client's Kafka connections.

Each request goes where Kafka serves it: Metadata and configs of topics to any broker,
topic creation and deletion to the controller, a broker's configs to that broker, group
requests to the group's coordinator (a CoordinatorLink of the call's own), ListOffsets
and DeleteRecords to each partition's leader (one request per leader), ListGroups to
every broker (each lists the groups it coordinates). Requests and answers are built and
read in admin_requests.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from msgclient.admin.transport import AdminTransport, ConfigChanges
from msgclient.admin.types import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ItemResults,
    ListedOffset,
    NewTopic,
    OffsetSpec,
    TopicDescription,
    TopicPartition,
)
from msgclient.errors import (
    InvalidConfigurationError,
    MsgClientError,
    NotSupportedError,
    TopicNotFoundError,
)
from protocols.kafkawire import admin_requests as requests
from protocols.kafkawire import errors
from protocols.kafkawire.admin_requests import Cluster, Outcomes
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.group_coordinator import CoordinatorLink
from protocols.kafkawire.group_requests import fetched_offsets, offset_commit, offset_fetch

V = TypeVar("V")


class KafkaAdmin(AdminTransport):
    def __init__(self, context: KafkaContext) -> None:
        self._context = context
        self._timeout_ms = int(context.operation_timeout * 1000)

    def not_supported(self, operation: str) -> NotSupportedError:
        return NotSupportedError(f"{operation} is not supported by the Kafka adapter")

    # -- topics ---------------------------------------------------------------------------

    async def list_topics(self, namespace: str | None, include_internal: bool) -> list[str]:
        if namespace is not None:
            raise InvalidConfigurationError(
                f"namespace={namespace!r}: Kafka topics have no namespaces (a Pulsar option)"
            )
        found = await self._cluster(None)
        return sorted(
            name
            for name, topic in found.topics.items()
            if include_internal or not (isinstance(topic, TopicDescription) and topic.internal)
        )

    async def describe_topics(self, topics: list[str]) -> ItemResults[str, TopicDescription]:
        found = await self._cluster(topics)
        described: Outcomes[str, TopicDescription] = Outcomes()
        for name in topics:
            described[name] = found.topics.get(name) or _no_topic(name)
        return described.results()

    async def create_topics(
        self, topics: list[NewTopic], validate_only: bool
    ) -> ItemResults[str, None]:
        request = requests.create_topics(topics, self._timeout_ms, validate_only)
        response = await (await self._controller()).request(request)
        return requests.created_topics(response).results()

    async def delete_topics(self, topics: list[str]) -> ItemResults[str, None]:
        response = await (await self._controller()).request(
            requests.delete_topics(topics, self._timeout_ms)
        )
        for name in topics:
            self._context.lookup.invalidate(name)
        return requests.deleted_topics(response).results()

    async def create_partitions(self, totals: dict[str, int]) -> ItemResults[str, None]:
        controller = await self._controller()
        response = await controller.request(requests.create_partitions(totals, self._timeout_ms))
        for name in totals:
            self._context.lookup.invalidate(name)
        return requests.created_partitions(response).results()

    # -- configs --------------------------------------------------------------------------

    async def describe_configs(
        self, resources: list[ConfigResource]
    ) -> ItemResults[ConfigResource, dict[str, ConfigEntry]]:
        found: Outcomes[ConfigResource, dict[str, ConfigEntry]] = Outcomes()
        for connection, group in await self._by_config_broker(resources):
            response = await connection.request(requests.describe_configs(group))
            found.update(requests.described_configs(response))
        return found.results()

    async def incremental_alter_configs(
        self, changes: ConfigChanges
    ) -> ItemResults[ConfigResource, None]:
        altered: Outcomes[ConfigResource, None] = Outcomes()
        for connection, group in await self._by_config_broker(list(changes)):
            request = requests.incremental_alter_configs({r: changes[r] for r in group})
            altered.update(requests.altered_configs(await connection.request(request)))
        return altered.results()

    async def _by_config_broker(
        self, resources: list[ConfigResource]
    ) -> list[tuple[KafkaConnection, list[ConfigResource]]]:
        """A broker's configs are that broker's to answer; a topic's, any broker's."""
        brokers = [r for r in resources if r.type is ConfigResourceType.BROKER]
        topics = [r for r in resources if r.type is ConfigResourceType.TOPIC]
        groups: list[tuple[KafkaConnection, list[ConfigResource]]] = []
        if topics:
            groups.append((await self._context.lookup.any_broker(), topics))
        if brokers:
            addresses = (await self._cluster([])).brokers
            for resource in brokers:
                address = addresses.get(int(resource.name)) if resource.name.isdigit() else None
                if address is None:
                    raise InvalidConfigurationError(
                        f"broker {resource.name!r}: no such node id (brokers: "
                        f"{', '.join(map(str, sorted(addresses)))})"
                    )
                groups.append((await self._connection(address), [resource]))
        return groups

    # -- consumer groups ------------------------------------------------------------------

    async def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        brokers = (await self._cluster([])).brokers.values()
        answers = await asyncio.gather(
            *(self._list_groups_at(address) for address in sorted(brokers))
        )
        return sorted((g for found in answers for g in found), key=lambda g: g.group_id)

    async def _list_groups_at(self, address: str) -> list[ConsumerGroupListing]:
        response = await (await self._connection(address)).request(requests.list_groups())
        return requests.listed_groups(response, address)

    async def describe_consumer_groups(
        self, group_ids: list[str]
    ) -> ItemResults[str, ConsumerGroupDescription]:
        found: Outcomes[str, ConsumerGroupDescription] = Outcomes()
        for group_id in group_ids:  # each group's own coordinator
            response = await self._at_coordinator(group_id, requests.describe_groups([group_id]))
            found.update(requests.described_groups(response))
        return found.results()

    async def delete_consumer_groups(self, group_ids: list[str]) -> ItemResults[str, None]:
        deleted: Outcomes[str, None] = Outcomes()
        for group_id in group_ids:
            response = await self._at_coordinator(group_id, requests.delete_groups([group_id]))
            deleted.update(requests.deleted_groups(response))
        return deleted.results()

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        if partitions is not None:
            found = await self._fetch_offsets(group_id, partitions)
            return {tp: found.get(tp, -1) for tp in partitions}
        # Every partition of every topic, not Kafka's "topics: null" (all the group's):
        # tansu answers that with a malformed response (brokers.md).
        cluster = await self._cluster(None)
        every = [
            TopicPartition(name, p.partition)
            for name, topic in cluster.topics.items()
            if isinstance(topic, TopicDescription)
            for p in topic.partitions
        ]
        found = await self._fetch_offsets(group_id, every) if every else {}
        return {tp: offset for tp, offset in sorted(found.items()) if offset >= 0}

    async def _fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        response = await self._at_coordinator(group_id, offset_fetch(group_id, partitions))
        code, offsets = fetched_offsets(response)
        if code:
            raise errors.kafka_error(code, f"OffsetFetch of group {group_id!r}")
        return {TopicPartition(*tp): offset for tp, offset in offsets.items()}

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, int]
    ) -> ItemResults[TopicPartition, None]:
        # generation -1 and no member id: a commit from outside the group, which Kafka
        # accepts only while the group has no active member.
        commits = {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}
        request = offset_commit(group_id, -1, "", None, commits)
        response = await self._at_coordinator(group_id, request)
        return requests.committed_partitions(response, group_id).results()

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> ItemResults[TopicPartition, None]:
        response = await self._at_coordinator(
            group_id, requests.offset_delete(group_id, partitions)
        )
        return requests.deleted_offsets(response, group_id, partitions).results()

    async def _at_coordinator(self, group_id: str, request: Any) -> Any:
        link = CoordinatorLink(self._context, group_id)
        try:
            _, response = await link.request(request)
            return response
        finally:
            link.close()

    # -- offsets and records --------------------------------------------------------------

    async def list_offsets(
        self, specs: dict[TopicPartition, OffsetSpec]
    ) -> ItemResults[TopicPartition, ListedOffset]:
        timestamps = {tp: spec.timestamp for tp, spec in specs.items()}
        return await self._per_leader(
            timestamps,
            lambda part: requests.list_offsets(part, self._timeout_ms),
            requests.listed_offsets,
        )

    async def delete_records(
        self, before: dict[TopicPartition, int]
    ) -> ItemResults[TopicPartition, int]:
        return await self._per_leader(
            before,
            lambda part: requests.delete_records(part, self._timeout_ms),
            requests.deleted_records,
        )

    async def _per_leader(
        self,
        items: Mapping[TopicPartition, int],
        build: Callable[[dict[TopicPartition, int]], Any],
        parse: Callable[[Any], Outcomes[TopicPartition, V]],
    ) -> ItemResults[TopicPartition, V]:
        """One request per partition leader, with that leader's partitions; a partition
        with no leader (or no such partition) fails on its own."""
        cluster = await self._cluster(sorted({tp.topic for tp in items}))
        answers: Outcomes[TopicPartition, V] = Outcomes()
        by_leader: dict[str, dict[TopicPartition, int]] = {}
        for tp, value in items.items():
            leader = _leader(cluster, tp)
            if isinstance(leader, MsgClientError):
                answers[tp] = leader
            else:
                by_leader.setdefault(leader, {})[tp] = value
        for address, part in by_leader.items():
            response = await (await self._connection(address)).request(build(part))
            answers.update(parse(response))
        return answers.results()

    # -- connections ----------------------------------------------------------------------

    async def _cluster(self, topics: Iterable[str] | None) -> Cluster:
        connection = await self._context.lookup.any_broker()
        return requests.cluster(await connection.request(requests.metadata(topics)))

    async def _controller(self) -> KafkaConnection:
        cluster = await self._cluster([])
        if cluster.controller is None:
            raise errors.kafka_error(errors.NOT_CONTROLLER, "Metadata names no controller")
        return await self._connection(cluster.controller)

    async def _connection(self, address: str) -> KafkaConnection:
        return await self._context.pool.get_connection(address)


def _no_topic(name: str) -> MsgClientError:
    return errors.kafka_error(errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")


def _leader(cluster: Cluster, tp: TopicPartition) -> str | MsgClientError:
    topic = cluster.topics.get(tp.topic) or _no_topic(tp.topic)
    if isinstance(topic, MsgClientError):
        return topic
    for partition in topic.partitions:
        if partition.partition == tp.partition:
            if partition.leader is None:
                return errors.kafka_error(errors.LEADER_NOT_AVAILABLE, f"{tp.topic}-{tp.partition}")
            return partition.leader
    return TopicNotFoundError(
        "UNKNOWN_TOPIC_OR_PARTITION",
        f"topic {tp.topic!r} has {len(topic.partitions)} partitions: no partition {tp.partition}",
    )
