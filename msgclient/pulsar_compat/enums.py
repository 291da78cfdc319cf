"""The official client's enums, with its member names and numbers.

They are distinct from msgclient's own enums (whose names and numbers sometimes differ:
``CompressionType.ZLib`` is msgclient's ``ZLIB``; the official ``UseSinglePartition`` is 0):
``to_msgclient`` maps a member onto msgclient's by name.
"""

from __future__ import annotations

import enum
from typing import TypeVar

E = TypeVar("E", bound=enum.Enum)


class Result(enum.Enum):
    """Outcome codes of the official client; a send callback gets ``Result.Ok`` or the
    code of the error (each exception class has the name of its code)."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


class CompressionType(enum.Enum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class ConsumerType(enum.Enum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(enum.Enum):
    Latest = 0
    Earliest = 1


class PartitionsRoutingMode(enum.Enum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class BatchingType(enum.Enum):
    Default = 0
    KeyBased = 1


class LoggerLevel(enum.Enum):
    Debug = 0
    Info = 1
    Warn = 2
    Error = 3


class KeySharedMode(enum.Enum):
    AutoSplit = 0
    Sticky = 1


class ProducerAccessMode(enum.Enum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class RegexSubscriptionMode(enum.Enum):
    """Which domains a pattern subscription's topics are in (persistent by default)."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class ConsumerCryptoFailureAction(enum.Enum):
    """What a consumer does with a message it cannot decrypt (docs/encryption.md)."""

    FAIL = 0
    DISCARD = 1
    CONSUME = 2


_RENAMED = {"ZLib": "ZLIB"}  # official name -> msgclient name, where they differ
_OFFICIAL_NAMES = {ours: official for official, ours in _RENAMED.items()}


def to_msgclient(member: enum.Enum, kind: type[E]) -> E:
    """The msgclient member of ``kind`` with the same meaning as ``member``."""
    return kind[_RENAMED.get(member.name, member.name)]


def from_msgclient(member: enum.Enum, kind: type[E]) -> E:
    """The official member of ``kind`` with the same meaning as msgclient's ``member``."""
    return kind[_OFFICIAL_NAMES.get(member.name, member.name)]
