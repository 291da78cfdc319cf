"""The official client's exceptions, with its names and hierarchy (every one derives from
``PulsarException``), and the translation of msgclient's typed errors into them.

The facade raises these in place of msgclient's errors, the original chained as the
cause (``raise Timeout(...) from ReceiveTimeoutError(...)``), so ``except pulsar.Timeout``
works as it does with the official client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from msgclient import crypto_key_reader, errors
from msgclient.pulsar_compat.enums import Result


class PulsarException(Exception):
    """Base class of every error of the client."""


class UnknownError(PulsarException): ...


class InvalidConfiguration(PulsarException): ...


class Timeout(PulsarException): ...


class LookupError(PulsarException): ...


class ConnectError(PulsarException): ...


class ReadError(PulsarException): ...


class AuthenticationError(PulsarException): ...


class AuthorizationError(PulsarException): ...


class ErrorGettingAuthenticationData(PulsarException): ...


class BrokerMetadataError(PulsarException): ...


class BrokerPersistenceError(PulsarException): ...


class ChecksumError(PulsarException): ...


class ConsumerBusy(PulsarException): ...


class NotConnected(PulsarException): ...


class AlreadyClosed(PulsarException): ...


class InvalidMessage(PulsarException): ...


class ConsumerNotInitialized(PulsarException): ...


class ProducerNotInitialized(PulsarException): ...


class ProducerBusy(PulsarException): ...


class TooManyLookupRequestException(PulsarException): ...


class InvalidTopicName(PulsarException): ...


class InvalidUrl(PulsarException, ValueError):
    """A ValueError too: the official client raises ValueError for a URL without a
    scheme (``Client("fakeServiceUrl")``)."""


class ServiceUnitNotReady(PulsarException): ...


class OperationNotSupported(PulsarException): ...


class ProducerBlockedQuotaExceededError(PulsarException): ...


class ProducerBlockedQuotaExceededException(PulsarException): ...


class ProducerQueueIsFull(PulsarException): ...


class MessageTooBig(PulsarException): ...


class TopicNotFound(PulsarException): ...


class SubscriptionNotFound(PulsarException): ...


class ConsumerNotFound(PulsarException): ...


class UnsupportedVersionError(PulsarException): ...


class TopicTerminated(PulsarException): ...


class CryptoError(PulsarException): ...


class IncompatibleSchema(PulsarException): ...


class ConsumerAssignError(PulsarException): ...


class CumulativeAcknowledgementNotAllowedError(PulsarException): ...


class TransactionCoordinatorNotFoundError(PulsarException): ...


class InvalidTxnStatusError(PulsarException): ...


class NotAllowedError(PulsarException): ...


class TransactionConflict(PulsarException): ...


class TransactionNotFound(PulsarException): ...


class ProducerFenced(PulsarException): ...


class MemoryBufferIsFull(PulsarException): ...


class Interrupted(PulsarException, KeyboardInterrupt):
    """A blocking call was interrupted by Ctrl-C (SIGINT). The official client raises
    this; it is also a KeyboardInterrupt here, so ``except KeyboardInterrupt`` works too."""


# msgclient's error classes, most specific first (the first match wins).
_BY_CLASS: list[tuple[type[errors.MsgClientError], type[PulsarException]]] = [
    (errors.ReceiveTimeoutError, Timeout),
    (errors.SendTimeoutError, Timeout),
    (errors.OperationTimeoutError, Timeout),
    (errors.InvalidServiceUrlError, InvalidUrl),
    (errors.InvalidTopicNameError, InvalidTopicName),
    (errors.InvalidConfigurationError, InvalidConfiguration),
    (errors.MessageTooBigError, MessageTooBig),
    (errors.MessageEncodingError, InvalidMessage),
    (errors.ChecksumMismatchError, ChecksumError),
    (errors.ProtocolError, ReadError),
    (errors.ConnectError, ConnectError),
    (errors.ConnectionClosedError, NotConnected),
    (errors.AuthenticationError, AuthenticationError),
    (errors.TopicLookupError, LookupError),
    (errors.TooManyRequestsError, TooManyLookupRequestException),
    (errors.NotSupportedError, OperationNotSupported),
    (errors.AlreadyClosedError, AlreadyClosed),
    (errors.ProducerQueueIsFullError, ProducerQueueIsFull),
    (errors.MemoryBufferIsFullError, MemoryBufferIsFull),
    (crypto_key_reader.CryptoError, CryptoError),
]

# The broker's ServerError names (BrokerError.code) whose official name differs.
_BY_SERVER_ERROR: dict[str, type[PulsarException]] = {
    "MetadataError": BrokerMetadataError,
    "PersistenceError": BrokerPersistenceError,
    "ServiceNotReady": ServiceUnitNotReady,
    "TopicTerminatedError": TopicTerminated,
    "TooManyRequests": TooManyLookupRequestException,
    "TransactionCoordinatorNotFound": TransactionCoordinatorNotFoundError,
    "InvalidTxnStatus": InvalidTxnStatusError,
}


def pulsar_exception_class(error: BaseException) -> type[PulsarException]:
    """The official exception class for a msgclient error (UnknownError for others)."""
    if isinstance(error, PulsarException):
        return type(error)
    if isinstance(error, errors.BrokerError):
        same_name = globals().get(error.code)
        if isinstance(same_name, type) and issubclass(same_name, PulsarException):
            return same_name
        return _BY_SERVER_ERROR.get(error.code, UnknownError)
    for source, target in _BY_CLASS:
        if isinstance(error, source):
            return target
    return UnknownError


def as_pulsar_exception(error: BaseException) -> PulsarException:
    if isinstance(error, PulsarException):
        return error
    translated = pulsar_exception_class(error)(str(error))
    translated.__cause__ = error
    return translated


def result_of(error: BaseException | None) -> Result:
    """The ``Result`` code a send callback gets for ``error`` (``Ok`` for None)."""
    if error is None:
        return Result.Ok
    return Result[pulsar_exception_class(error).__name__]


@contextmanager
def pulsar_errors() -> Iterator[None]:
    """Raise msgclient's errors as the official client's exceptions, and Ctrl-C during a
    blocking call as ``Interrupted``."""
    try:
        yield
    except errors.MsgClientError as error:
        raise as_pulsar_exception(error) from error
    except KeyboardInterrupt as interrupt:
        if isinstance(interrupt, Interrupted):
            raise
        raise Interrupted("interrupted by Ctrl-C (SIGINT)") from interrupt
