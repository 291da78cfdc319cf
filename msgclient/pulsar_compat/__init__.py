"""The official ``pulsar`` module's names on msgclient: ``from msgclient import
pulsar_compat as pulsar`` ports a program written for pulsar-client 3.x.

Same classes, enums, exceptions (and their hierarchy), signatures, defaults and return
types as the official client; ``msgclient.pulsar_compat.asyncio`` mirrors
``pulsar.asyncio``. What is not offered, and why, is in ``not_offered.NOT_OFFERED`` and
docs/pulsar_compat.md; looking such a name up raises AttributeError saying why.
"""

from __future__ import annotations

from msgclient.pulsar_compat import exceptions, schema, tableview
from msgclient.pulsar_compat.authentication import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)
from msgclient.pulsar_compat.client import Client
from msgclient.pulsar_compat.consumer import Consumer
from msgclient.pulsar_compat.encryption import CryptoKeyReader, EncryptionContext, EncryptionKey
from msgclient.pulsar_compat.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    LoggerLevel,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from msgclient.pulsar_compat.exceptions import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    BrokerMetadataError,
    BrokerPersistenceError,
    ChecksumError,
    ConnectError,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    ConsumerNotInitialized,
    CryptoError,
    CumulativeAcknowledgementNotAllowedError,
    ErrorGettingAuthenticationData,
    IncompatibleSchema,
    Interrupted,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTopicName,
    InvalidTxnStatusError,
    InvalidUrl,
    LookupError,
    MemoryBufferIsFull,
    MessageTooBig,
    NotAllowedError,
    NotConnected,
    OperationNotSupported,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerFenced,
    ProducerNotInitialized,
    ProducerQueueIsFull,
    PulsarException,
    ReadError,
    ServiceUnitNotReady,
    SubscriptionNotFound,
    Timeout,
    TooManyLookupRequestException,
    TopicNotFound,
    TopicTerminated,
    TransactionConflict,
    TransactionCoordinatorNotFoundError,
    TransactionNotFound,
    UnknownError,
    UnsupportedVersionError,
)
from msgclient.pulsar_compat.failover import AutoClusterFailover, ServiceInfo, ServiceInfoProvider
from msgclient.pulsar_compat.loggers import ConsoleLogger, FileLogger
from msgclient.pulsar_compat.message import Message
from msgclient.pulsar_compat.message_id import MessageId
from msgclient.pulsar_compat.not_offered import NOT_OFFERED
from msgclient.pulsar_compat.policies import (
    BatchReceivePolicy,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    DeadLetterPolicy,
    DeadLetterPolicyBuilder,
    KeySharedPolicy,
)
from msgclient.pulsar_compat.producer import Producer
from msgclient.pulsar_compat.reader import Reader
from msgclient.pulsar_compat.schema import BytesSchema
from msgclient.pulsar_compat.tableview import TableView


def __getattr__(name: str) -> object:
    reason = NOT_OFFERED.get(name)
    if reason is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise AttributeError(f"msgclient.pulsar_compat does not offer {name}: {reason}")


__all__ = [
    "NOT_OFFERED",
    "AlreadyClosed",
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationError",
    "AuthenticationOauth2",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AuthorizationError",
    "AutoClusterFailover",
    "BatchReceivePolicy",
    "BatchingType",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "BytesSchema",
    "ChecksumError",
    "Client",
    "CompressionType",
    "ConnectError",
    "ConsoleLogger",
    "Consumer",
    "ConsumerAssignError",
    "ConsumerBatchReceivePolicy",
    "ConsumerBusy",
    "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerNotFound",
    "ConsumerNotInitialized",
    "ConsumerType",
    "CryptoError",
    "CryptoKeyReader",
    "CumulativeAcknowledgementNotAllowedError",
    "DeadLetterPolicy",
    "DeadLetterPolicyBuilder",
    "EncryptionContext",
    "EncryptionKey",
    "ErrorGettingAuthenticationData",
    "FileLogger",
    "IncompatibleSchema",
    "InitialPosition",
    "Interrupted",
    "InvalidConfiguration",
    "InvalidMessage",
    "InvalidTopicName",
    "InvalidTxnStatusError",
    "InvalidUrl",
    "KeySharedMode",
    "KeySharedPolicy",
    "LoggerLevel",
    "LookupError",
    "MemoryBufferIsFull",
    "Message",
    "MessageId",
    "MessageTooBig",
    "NotAllowedError",
    "NotConnected",
    "OperationNotSupported",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotInitialized",
    "ProducerQueueIsFull",
    "PulsarException",
    "ReadError",
    "Reader",
    "RegexSubscriptionMode",
    "Result",
    "ServiceInfo",
    "ServiceInfoProvider",
    "ServiceUnitNotReady",
    "SubscriptionNotFound",
    "TableView",
    "Timeout",
    "TooManyLookupRequestException",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFound",
    "UnknownError",
    "UnsupportedVersionError",
    "exceptions",
    "schema",
    "tableview",
]
