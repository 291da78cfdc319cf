"""The requests of Kafka transactions and what their error codes mean, sans-IO.

InitProducerId (with the transactional id), AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
go to the transaction coordinator, TxnOffsetCommit to the consumer group's coordinator.
Every error code falls in one of four classes, as the Java client's TransactionManager
handles them: retry at once at a freshly found coordinator, retry after a backoff, abort
the transaction (the producer stays usable), or give up on the producer (fenced).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from protocols.kafkawire import errors
from protocols.kafkawire.group_requests import by_topic

TopicPartition = tuple[str, int]

UNKNOWN_SERVER_ERROR = -1
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90


class ErrorClass(enum.Enum):
    NONE = "none"
    COORDINATOR = "find the coordinator again and retry"
    RETRY = "retry after a backoff"
    ABORTABLE = "abort the transaction"
    FATAL = "the producer is fenced or not authorized"


_FATAL = frozenset(
    {
        errors.INVALID_PRODUCER_EPOCH,
        PRODUCER_FENCED,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        TRANSACTION_COORDINATOR_FENCED,
        INVALID_TXN_STATE,
        INVALID_PRODUCER_ID_MAPPING,
        errors.UNSUPPORTED_VERSION,
    }
)
_RETRY = frozenset(
    {
        CONCURRENT_TRANSACTIONS,
        OPERATION_NOT_ATTEMPTED,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.REBALANCE_IN_PROGRESS,  # TxnOffsetCommit while the group rejoins
    }
)


def classify(code: int) -> ErrorClass:
    """What an error code of a transaction request asks the client to do."""
    if code == errors.NONE:
        return ErrorClass.NONE
    if code in errors.COORDINATOR_ERRORS:
        return ErrorClass.COORDINATOR
    if code in _RETRY:
        return ErrorClass.RETRY
    if code in _FATAL:
        return ErrorClass.FATAL
    return ErrorClass.ABORTABLE


def init_producer_id(
    transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
) -> Any:
    """Register the transactional id; with the current id and epoch (v3+), bump the epoch
    of this incarnation after an abort."""
    return InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=timeout_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def add_partitions(
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> Any:
    topic_class = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[
            topic_class(name=topic, partitions=indexes)
            for topic, indexes in by_topic(partitions).items()
        ],
    )


def add_partitions_errors(response: Any) -> dict[TopicPartition, int]:
    """Each partition's error code (0 where it joined)."""
    if response.error_code:  # v4+ only: a top-level error for the whole request
        raise errors.kafka_error(response.error_code, "AddPartitionsToTxn")
    return {
        (topic.name, result.partition_index): int(result.partition_error_code)
        for topic in response.results_by_topic_v3_and_below
        for result in topic.results_by_partition
    }


def add_offsets(transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> Any:
    return AddOffsetsToTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        group_id=group_id,
    )


def end_txn(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Any:
    return EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        committed=commit,
    )


def txn_offset_commit(
    transactional_id: str,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    offsets: Mapping[TopicPartition, int],
) -> Any:
    """Offsets that commit with the transaction; v3+ carries the member's generation, so a
    member that has left it (a zombie) cannot commit (KIP-447)."""
    topic_class = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    partition_class = topic_class.TxnOffsetCommitRequestPartition
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            topic_class(
                name=topic,
                partitions=[
                    partition_class(
                        partition_index=p,
                        committed_offset=offsets[(topic, p)],
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in indexes
                ],
            )
            for topic, indexes in by_topic(offsets).items()
        ],
    )
