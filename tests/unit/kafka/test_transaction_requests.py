"""What each error code of a transaction request asks the client to do (the Java client's
TransactionManager's handling), and the requests' shapes."""

from __future__ import annotations

import pytest

from protocols.kafkawire import transaction_requests as requests
from protocols.kafkawire.transaction_requests import ErrorClass


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (0, ErrorClass.NONE),
        (14, ErrorClass.COORDINATOR),  # COORDINATOR_LOAD_IN_PROGRESS
        (15, ErrorClass.COORDINATOR),  # COORDINATOR_NOT_AVAILABLE
        (16, ErrorClass.COORDINATOR),  # NOT_COORDINATOR
        (51, ErrorClass.RETRY),  # CONCURRENT_TRANSACTIONS
        (55, ErrorClass.RETRY),  # OPERATION_NOT_ATTEMPTED
        (3, ErrorClass.RETRY),  # UNKNOWN_TOPIC_OR_PARTITION
        (90, ErrorClass.FATAL),  # PRODUCER_FENCED
        (47, ErrorClass.FATAL),  # INVALID_PRODUCER_EPOCH
        (53, ErrorClass.FATAL),  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        (48, ErrorClass.FATAL),  # INVALID_TXN_STATE
        (22, ErrorClass.ABORTABLE),  # ILLEGAL_GENERATION (a zombie's TxnOffsetCommit)
        (25, ErrorClass.ABORTABLE),  # UNKNOWN_MEMBER_ID
        (29, ErrorClass.ABORTABLE),  # TOPIC_AUTHORIZATION_FAILED
        (30, ErrorClass.ABORTABLE),  # GROUP_AUTHORIZATION_FAILED
    ],
)
def test_classify(code: int, kind: ErrorClass) -> None:
    assert requests.classify(code) is kind


def test_txn_offset_commit_carries_the_members_generation() -> None:
    request = requests.txn_offset_commit(
        "tid", "group", 5, 2, 7, "member-1", None, {("a", 1): 10, ("a", 0): 4, ("b", 0): 3}
    )
    assert (request.generation_id, request.member_id, request.producer_epoch) == (7, "member-1", 2)
    assert {
        (t.name, p.partition_index): p.committed_offset
        for t in request.topics
        for p in t.partitions
    } == {("a", 1): 10, ("a", 0): 4, ("b", 0): 3}
