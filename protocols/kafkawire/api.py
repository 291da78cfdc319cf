"""The Kafka APIs msgclient speaks, the versions it can speak, and the negotiation.

A connection starts with ApiVersions; for every API the client then uses the highest version
both sides support. The ranges below are what this adapter builds requests for: the upper
bounds stop before a request changes shape (Fetch v13 and Produce v13 name topics by id,
OffsetFetch v8 and FindCoordinator v4 batch groups), the lower bounds are where record
batches v2 and the fields we need exist (Kafka 2.1, 2018, and newer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from msgclient.errors import MsgClientError

# request class -> (lowest, highest) version msgclient writes
SUPPORTED: dict[Any, tuple[int, int]] = {
    ApiVersionsRequest: (0, 3),
    MetadataRequest: (4, 12),
    ProduceRequest: (3, 11),
    FetchRequest: (4, 12),
    ListOffsetsRequest: (1, 8),
    InitProducerIdRequest: (0, 4),
    FindCoordinatorRequest: (1, 3),
    JoinGroupRequest: (2, 9),
    SyncGroupRequest: (1, 5),
    HeartbeatRequest: (1, 4),
    LeaveGroupRequest: (1, 5),
    OffsetCommitRequest: (2, 8),
    OffsetFetchRequest: (1, 7),
    # the admin API
    CreateTopicsRequest: (2, 7),
    DeleteTopicsRequest: (1, 6),
    CreatePartitionsRequest: (0, 3),
    DescribeConfigsRequest: (1, 4),
    IncrementalAlterConfigsRequest: (0, 1),
    ListGroupsRequest: (0, 5),
    DescribeGroupsRequest: (0, 5),
    DeleteGroupsRequest: (0, 2),
    OffsetDeleteRequest: (0, 0),
    DeleteRecordsRequest: (0, 2),
    SaslHandshakeRequest: (0, 1),
    SaslAuthenticateRequest: (0, 2),
    # transactions; v4 of AddPartitionsToTxn batches transactional ids (broker to broker)
    AddPartitionsToTxnRequest: (0, 3),
    AddOffsetsToTxnRequest: (0, 3),
    EndTxnRequest: (0, 3),
    TxnOffsetCommitRequest: (0, 3),  # v3: the member's generation (KIP-447)
}

# The version of the first ApiVersions request; a broker that does not know it answers
# UNSUPPORTED_VERSION at v0 with its own range, and the client asks again at v0.
API_VERSIONS_FIRST = 3


class UnsupportedVersionError(MsgClientError):
    """The broker does not speak any version of an API that msgclient can write."""


class ApiVersionTable:
    """The versions negotiated on one connection: ``version(RequestClass)``."""

    def __init__(self, broker_ranges: Mapping[int, tuple[int, int]], address: str) -> None:
        self._broker = dict(broker_ranges)
        self._address = address
        self._chosen: dict[Any, int] = {}

    def version(self, request_class: Any) -> int:
        chosen = self._chosen.get(request_class)
        if chosen is None:
            chosen = self._chosen[request_class] = self._negotiate(request_class)
        return chosen

    def supports(self, request_class: Any) -> bool:
        try:
            self.version(request_class)
        except UnsupportedVersionError:
            return False
        return True

    def _negotiate(self, request_class: Any) -> int:
        ours = SUPPORTED[request_class]
        theirs = self._broker.get(request_class.API_KEY)
        name = request_class.name.removesuffix("Request")
        if theirs is None:
            raise UnsupportedVersionError(
                f"the broker at {self._address} does not support {name}: msgclient needs "
                f"{name} v{ours[0]}+ (Kafka 2.1 or newer)"
            )
        chosen = min(ours[1], theirs[1])
        if chosen < max(ours[0], theirs[0]):
            raise UnsupportedVersionError(
                f"the broker at {self._address} supports {name} v{theirs[0]}-{theirs[1]}; "
                f"msgclient writes v{ours[0]}-{ours[1]} (Kafka 2.1 or newer needed)"
            )
        return chosen
