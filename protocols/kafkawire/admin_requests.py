"""The admin API's Kafka requests, and their answers as msgclient's admin types.

Sans-IO, as group_requests.py: builders fill every field the versions in ``api.SUPPORTED``
may carry (kafka-python writes those of the negotiated version); parsers turn an answer
into per-item results, each item's error code a typed exception of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest, OffsetDeleteRequest
from kafka.protocol.metadata import MetadataRequest

from msgclient.admin.types import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ItemResults,
    ListedOffset,
    MemberDescription,
    NewTopic,
    PartitionInfo,
    TopicDescription,
    TopicPartition,
)
from msgclient.errors import MalformedFrameError, MsgClientError
from protocols.kafkawire import errors
from protocols.kafkawire.assignors import decode_assignment
from protocols.kafkawire.group_requests import by_topic

K = TypeVar("K")
V = TypeVar("V")

GROUP_ID_NOT_FOUND = 69
# IncrementalAlterConfigs operations
SET, DELETE = 0, 1
# DescribeConfigs config sources: DEFAULT_CONFIG is 5 (v1+ say the source, not is_default)
DEFAULT_CONFIG_SOURCE = 5


class Outcomes(dict[K, V | MsgClientError]):
    """Answers being collected, item by item: ``results()`` splits them."""

    def results(self) -> ItemResults[K, V]:
        failed = {k: v for k, v in self.items() if isinstance(v, MsgClientError)}
        succeeded: dict[K, V] = {k: v for k, v in self.items() if k not in failed}  # type: ignore[misc]
        return ItemResults(succeeded, failed)


def outcome(code: int, context: str, message: str | None, answer: V) -> V | MsgClientError:
    return errors.kafka_error(code, context, message) if code else answer


# -- Metadata -------------------------------------------------------------------------------


@attrs.frozen
class Cluster:
    """One Metadata answer: brokers by node id, the controller, topics as described."""

    brokers: Mapping[int, str]
    controller: str | None
    topics: Mapping[str, TopicDescription | MsgClientError]


def metadata(topics: Iterable[str] | None) -> Any:
    """Metadata of ``topics`` (None: every topic), creating none."""
    topic = MetadataRequest.MetadataRequestTopic
    return MetadataRequest(
        topics=None if topics is None else [topic(name=name) for name in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def cluster(response: Any) -> Cluster:
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
    topics: dict[str, TopicDescription | MsgClientError] = {}
    for answer in response.topics:
        if answer.error_code:
            topics[answer.name] = errors.kafka_error(answer.error_code, f"topic {answer.name!r}")
            continue
        partitions = sorted(answer.partitions, key=lambda p: int(p.partition_index))
        topics[answer.name] = TopicDescription(
            answer.name,
            tuple(
                PartitionInfo(
                    p.partition_index,
                    brokers.get(p.leader_id),
                    tuple(brokers.get(r, str(r)) for r in p.replica_nodes),
                    tuple(brokers.get(r, str(r)) for r in p.isr_nodes),
                )
                for p in partitions
            ),
            internal=bool(answer.is_internal),
        )
    return Cluster(brokers, brokers.get(response.controller_id), topics)


# -- topics -----------------------------------------------------------------------------------


def create_topics(topics: Iterable[NewTopic], timeout_ms: int, validate_only: bool) -> Any:
    creatable = CreateTopicsRequest.CreatableTopic
    config = creatable.CreatableTopicConfig
    return CreateTopicsRequest(
        topics=[
            creatable(
                name=t.name,
                num_partitions=t.partitions,
                replication_factor=t.replication_factor,
                assignments=[],
                configs=[config(name=k, value=v) for k, v in t.configs.items()],
            )
            for t in topics
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def created_topics(response: Any) -> Outcomes[str, None]:
    return Outcomes(
        (t.name, outcome(t.error_code, f"CreateTopics {t.name!r}", t.error_message, None))
        for t in response.topics
    )


def delete_topics(topics: list[str], timeout_ms: int) -> Any:
    state = DeleteTopicsRequest.DeleteTopicState
    return DeleteTopicsRequest(
        topics=[state(name=name, topic_id=None) for name in topics],  # v6+
        topic_names=topics,  # v0-5
        timeout_ms=timeout_ms,
    )


def deleted_topics(response: Any) -> Outcomes[str, None]:
    return Outcomes(
        (
            t.name,
            outcome(
                t.error_code, f"DeleteTopics {t.name!r}", getattr(t, "error_message", None), None
            ),
        )
        for t in response.responses
    )


def create_partitions(totals: Mapping[str, int], timeout_ms: int) -> Any:
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest(
        topics=[topic(name=name, count=count, assignments=None) for name, count in totals.items()],
        timeout_ms=timeout_ms,
        validate_only=False,
    )


def created_partitions(response: Any) -> Outcomes[str, None]:
    return Outcomes(
        (t.name, outcome(t.error_code, f"CreatePartitions {t.name!r}", t.error_message, None))
        for t in response.results
    )


# -- configs ----------------------------------------------------------------------------------


def describe_configs(resources: Iterable[ConfigResource]) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(
        resources=[
            resource(resource_type=r.type.value, resource_name=r.name, configuration_keys=None)
            for r in resources
        ],
        include_synonyms=False,
        include_documentation=False,
    )


def described_configs(response: Any) -> Outcomes[ConfigResource, dict[str, ConfigEntry]]:
    found: Outcomes[ConfigResource, dict[str, ConfigEntry]] = Outcomes()
    for r in response.results:
        key = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
        entries = {
            c.name: ConfigEntry(
                c.name,
                c.value,
                read_only=bool(c.read_only),
                is_default=_is_default(c),
                sensitive=bool(c.is_sensitive),
            )
            for c in r.configs
        }
        found[key] = outcome(
            r.error_code, f"DescribeConfigs {r.resource_name!r}", r.error_message, entries
        )
    return found


def _is_default(config: Any) -> bool:
    source = getattr(config, "config_source", None)
    if source is None or source == -1:  # v0 says is_default itself
        return bool(getattr(config, "is_default", False))
    return bool(source == DEFAULT_CONFIG_SOURCE)


def incremental_alter_configs(changes: Mapping[ConfigResource, Mapping[str, str | None]]) -> Any:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    return IncrementalAlterConfigsRequest(
        resources=[
            resource(
                resource_type=r.type.value,
                resource_name=r.name,
                configs=[
                    config(name=k, config_operation=SET if v is not None else DELETE, value=v)
                    for k, v in entries.items()
                ],
            )
            for r, entries in changes.items()
        ],
        validate_only=False,
    )


def altered_configs(response: Any) -> Outcomes[ConfigResource, None]:
    return Outcomes(
        (
            ConfigResource(ConfigResourceType(r.resource_type), r.resource_name),
            outcome(
                r.error_code, f"IncrementalAlterConfigs {r.resource_name!r}", r.error_message, None
            ),
        )
        for r in response.responses
    )


# -- consumer groups ------------------------------------------------------------------------


def list_groups() -> Any:
    return ListGroupsRequest(states_filter=[], types_filter=[])


def listed_groups(response: Any, broker: str) -> list[ConsumerGroupListing]:
    if response.error_code:
        raise errors.kafka_error(response.error_code, f"ListGroups at {broker}")
    return [
        ConsumerGroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", None) or None)
        for g in response.groups
    ]


def describe_groups(group_ids: list[str]) -> Any:
    return DescribeGroupsRequest(groups=group_ids, include_authorized_operations=False)


def described_groups(response: Any) -> Outcomes[str, ConsumerGroupDescription]:
    found: Outcomes[str, ConsumerGroupDescription] = Outcomes()
    for g in response.groups:
        context = f"DescribeGroups {g.group_id!r}"
        code = g.error_code
        if not code and g.group_state == "Dead":  # Kafka's answer for a group it does not know
            code = GROUP_ID_NOT_FOUND
        found[g.group_id] = outcome(
            code,
            context,
            getattr(g, "error_message", None),
            ConsumerGroupDescription(
                g.group_id,
                g.group_state,
                g.protocol_type,
                g.protocol_data,
                tuple(_member(m, g.protocol_type) for m in g.members),
            ),
        )
    return found


def _member(member: Any, protocol_type: str) -> MemberDescription:
    assignment: tuple[TopicPartition, ...] = ()
    data = bytes(member.member_assignment or b"")
    if data and protocol_type == "consumer":  # other protocols (connect) have other shapes
        try:
            assignment = tuple(TopicPartition(*tp) for tp in decode_assignment(data).partitions)
        except MalformedFrameError:
            assignment = ()
    return MemberDescription(
        member.member_id,
        member.client_id,
        member.client_host,
        assignment,
        getattr(member, "group_instance_id", None),
    )


def delete_groups(group_ids: list[str]) -> Any:
    return DeleteGroupsRequest(groups_names=group_ids)


def deleted_groups(response: Any) -> Outcomes[str, None]:
    return Outcomes(
        (g.group_id, outcome(g.error_code, f"DeleteGroups {g.group_id!r}", None, None))
        for g in response.results
    )


def committed_partitions(response: Any, group_id: str) -> Outcomes[TopicPartition, None]:
    """OffsetCommit's answer, partition by partition."""
    return _per_partition(response, f"OffsetCommit of group {group_id!r}", lambda _: None)


def offset_delete(group_id: str, partitions: Iterable[TopicPartition]) -> Any:
    topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
    partition = topic.OffsetDeleteRequestPartition
    return OffsetDeleteRequest(
        group_id=group_id,
        topics=[
            topic(name=name, partitions=[partition(partition_index=p) for p in numbers])
            for name, numbers in by_topic(partitions).items()
        ],
    )


def deleted_offsets(
    response: Any, group_id: str, partitions: Iterable[TopicPartition]
) -> Outcomes[TopicPartition, None]:
    """OffsetDelete's answer; a group error (an unknown group...) fails every partition."""
    context = f"OffsetDelete of group {group_id!r}"
    if response.error_code:
        return Outcomes((tp, errors.kafka_error(response.error_code, context)) for tp in partitions)
    return _per_partition(response, context, lambda _: None)


# -- offsets and records ----------------------------------------------------------------------


def list_offsets(
    specs: Mapping[TopicPartition, int], timeout_ms: int, isolation_level: int = 0
) -> Any:
    """ListOffsets of partitions (one leader's) at timestamps (-2 earliest, -1 latest);
    read_committed (isolation level 1): latest is the last stable offset."""
    topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=_by_topic(
            topic,
            lambda p, timestamp: topic.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=timestamp
            ),
            specs,
        ),
        timeout_ms=timeout_ms,
    )


def listed_offsets(response: Any) -> Outcomes[TopicPartition, ListedOffset]:
    return _per_partition(
        response, "ListOffsets", lambda p: ListedOffset(int(p.offset), int(p.timestamp))
    )


def delete_records(before: Mapping[TopicPartition, int], timeout_ms: int) -> Any:
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(
        topics=_by_topic(
            topic,
            lambda p, offset: topic.DeleteRecordsPartition(partition_index=p, offset=offset),
            before,
        ),
        timeout_ms=timeout_ms,
    )


def deleted_records(response: Any) -> Outcomes[TopicPartition, int]:
    return _per_partition(response, "DeleteRecords", lambda p: int(p.low_watermark))


def _by_topic(
    topic_class: Any, partition: Callable[[int, int], Any], items: Mapping[TopicPartition, int]
) -> list[Any]:
    """The request's topics, each with its partitions (``partition(index, value)``)."""
    return [
        topic_class(
            name=name, partitions=[partition(p, items[TopicPartition(name, p)]) for p in numbers]
        )
        for name, numbers in by_topic(items).items()
    ]


def _per_partition(
    response: Any, what: str, answer: Callable[[Any], V]
) -> Outcomes[TopicPartition, V]:
    """An answer of topics of partitions, each with its error code."""
    return Outcomes(
        (
            TopicPartition(t.name, p.partition_index),
            outcome(p.error_code, f"{what} ({t.name}-{p.partition_index})", None, answer(p)),
        )
        for t in response.topics
        for p in t.partitions
    )
