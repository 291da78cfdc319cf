"""Kafka error codes as msgclient's typed exceptions.

The names and the retriable flag come from kafka-python's table of Kafka's error codes
(``kafka.errors``), which follows the broker's ``Errors`` enum.
"""

from __future__ import annotations

import kafka.errors

from msgclient.errors import (
    AuthenticationError,
    BrokerError,
    MsgClientError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_SASL_MECHANISM = 33
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
NOT_CONTROLLER = 41
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82

# Errors after which the client's view of partition leaders is stale: refresh metadata.
METADATA_ERRORS = frozenset(
    {UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, 74, 75}
)
COORDINATOR_ERRORS = frozenset(
    {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
)


def kafka_error(code: int, context: str, message: str | None = None) -> MsgClientError:
    """The exception for a non-zero Kafka error code; ``context`` says what was asked."""
    error_class = kafka.errors.for_code(code)
    name = error_class.message if error_class.errno is not None else f"KAFKA_ERROR_{code}"
    text = f"{context}: {message or error_class.description}"
    if code in (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM):
        return AuthenticationError(f"{name}: {text}")
    if code == UNKNOWN_TOPIC_OR_PARTITION:
        return TopicNotFoundError(name, text, retriable=True)
    if code == TOPIC_ALREADY_EXISTS:
        return TopicAlreadyExistsError(name, text)
    return BrokerError(name, text, retriable=bool(error_class.retriable))
