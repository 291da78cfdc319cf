"""The classic consumer group protocol's requests, and their answers boiled down.

Each builder fills every field any version in ``api.SUPPORTED`` may carry; kafka-python
writes only those of the version the connection negotiated (LeaveGroup's ``member_id`` for
v1-2, its ``members`` for v3+, and so on). The parsers return what ``GroupMembership``
acts on: an error code, or the decoded payload.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from msgclient.errors import BrokerError, TopicNotFoundError
from protocols.kafkawire import errors
from protocols.kafkawire.assignors import (
    Assignment,
    Assignor,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from protocols.kafkawire.metadata import KafkaLookupService

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

PROTOCOL_TYPE = "consumer"  # every Kafka consumer group's protocol type
GROUP_KEY_TYPE = 0  # FindCoordinator: a group
TRANSACTION_KEY_TYPE = 1  # FindCoordinator: a transactional id
NO_GENERATION = -1


class RebalanceInProgressError(BrokerError):
    """The group is rebalancing: the commit can be made again once it has rejoined."""

    def __init__(self, message: str) -> None:
        super().__init__("REBALANCE_IN_PROGRESS", message, retriable=True)


class CommitFailedError(BrokerError):
    """The group no longer counts this member in the generation of the commit (its
    partitions may be another member's by now): the offsets cannot be committed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, retriable=False)


@attrs.frozen
class JoinAnswer:
    """A successful JoinGroup: the generation and, for the leader, every member's metadata."""

    generation_id: int
    protocol_name: str
    leader: str
    member_id: str
    members: tuple[tuple[str, bytes], ...]
    skip_assignment: bool


# -- FindCoordinator ----------------------------------------------------------------------


def find_coordinator(key: str, key_type: int = GROUP_KEY_TYPE) -> Any:
    return FindCoordinatorRequest(key=key, key_type=key_type)


def coordinator_address(response: Any, what: str) -> str:
    """``host:port`` of the coordinator of ``what`` (a group, a transactional id), or the
    typed error."""
    if response.error_code:
        raise errors.kafka_error(
            response.error_code, f"FindCoordinator for {what}", response.error_message
        )
    return f"{response.host}:{response.port}"


# -- JoinGroup and SyncGroup --------------------------------------------------------------


def join_group(
    group_id: str,
    member_id: str,
    instance_id: str | None,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: Iterable[tuple[str, bytes]],
) -> Any:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=PROTOCOL_TYPE,
        protocols=[protocol(name=name, metadata=metadata) for name, metadata in protocols],
        reason=None,
    )


def join_answer(response: Any) -> JoinAnswer:
    return JoinAnswer(
        generation_id=response.generation_id,
        protocol_name=response.protocol_name or "",
        leader=response.leader,
        member_id=response.member_id,
        members=tuple((m.member_id, bytes(m.metadata or b"")) for m in response.members or ()),
        # v9+: a static leader that rejoined unchanged must not reassign (KIP-814)
        skip_assignment=bool(getattr(response, "skip_assignment", False)),
    )


def join_protocols(
    assignors: Iterable[Assignor],
    topics: tuple[str, ...],
    owned: tuple[TopicPartition, ...],
    generation_id: int,
) -> list[tuple[str, bytes]]:
    """One protocol per assignor, preferred first: its name and our subscription (the
    owned partitions and generation matter to the cooperative assignor)."""
    return [
        (
            a.name,
            encode_subscription(
                Subscription(topics, a.user_data(owned, generation_id), owned, generation_id)
            ),
        )
        for a in assignors
    ]


async def leader_assignments(
    assignor: Assignor, members: Iterable[tuple[str, bytes]], lookup: KafkaLookupService
) -> dict[str, bytes]:
    """The leader's SyncGroup payload: the assignor's result over every member's
    subscription (empty assignments included), with fresh partition counts."""
    subscriptions = {member: decode_subscription(data) for member, data in members}
    counts: dict[str, int] = {}
    for topic in sorted({t for sub in subscriptions.values() for t in sub.topics}):
        lookup.invalidate(topic)  # partitions may have been added since
        try:
            counts[topic] = await lookup.get_partition_count(topic)
        except TopicNotFoundError as error:  # Java leaves out topics it cannot see
            log.warning("topic %r left out of the assignment: %s", topic, error)
    result = assignor.assign(counts, subscriptions)
    return {m: encode_assignment(result.get(m, Assignment(()))) for m in subscriptions}


def sync_group(
    group_id: str,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    protocol_name: str,
    assignments: Mapping[str, bytes],
) -> Any:
    assignment = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol_name,
        assignments=[assignment(member_id=m, assignment=data) for m, data in assignments.items()],
    )


# -- Heartbeat and LeaveGroup -------------------------------------------------------------


def heartbeat(group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> Any:
    return HeartbeatRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
    )


def leave_group(group_id: str, member_id: str, instance_id: str | None) -> Any:
    identity = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest(
        group_id=group_id,
        member_id=member_id,  # v1-2
        members=[identity(member_id=member_id, group_instance_id=instance_id, reason="closing")],
    )


def leave_error(response: Any) -> int:
    """The group's error, else the first member's (v3+ answers per member)."""
    if response.error_code:
        return int(response.error_code)
    for member in getattr(response, "members", None) or ():
        if member.error_code:
            return int(member.error_code)
    return errors.NONE


# -- OffsetCommit and OffsetFetch ---------------------------------------------------------


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


def offset_commit(
    group_id: str,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    offsets: Mapping[TopicPartition, int],
) -> Any:
    topic_class = OffsetCommitRequest.OffsetCommitRequestTopic
    partition_class = topic_class.OffsetCommitRequestPartition
    topics = [
        topic_class(
            name=topic,
            partitions=[
                partition_class(
                    partition_index=p,
                    committed_offset=offsets[(topic, p)],
                    committed_leader_epoch=-1,
                    commit_timestamp=-1,
                    committed_metadata="",
                )
                for p in partitions
            ],
        )
        for topic, partitions in by_topic(offsets).items()
    ]
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=-1,  # v2-4: the broker's offsets.retention.minutes
        topics=topics,
    )


def commit_error(response: Any) -> int:
    """The first partition's error: one commit succeeds or fails as a whole for us."""
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                return int(partition.error_code)
    return errors.NONE


def offset_fetch(group_id: str, partitions: Iterable[TopicPartition]) -> Any:
    topic_class = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        group_id=group_id,
        topics=[
            topic_class(name=topic, partition_indexes=numbers)
            for topic, numbers in by_topic(partitions).items()
        ],
        require_stable=False,
    )


def fetched_offsets(response: Any) -> tuple[int, dict[TopicPartition, int]]:
    """(error code, offsets): the group's error (v2+), else the first partition's; the
    offsets say -1 where the group has none."""
    code = int(getattr(response, "error_code", 0) or 0)
    offsets: dict[TopicPartition, int] = {}
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code and not code:
                code = int(partition.error_code)
            offset = int(partition.committed_offset)
            offsets[(topic.name, partition.partition_index)] = offset if offset >= 0 else -1
    return code, offsets
