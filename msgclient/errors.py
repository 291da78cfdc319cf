"""Typed exceptions raised by msgclient.

Every failure msgclient detects is one of these, so that ``except MsgClientError`` catches
them all and the subclass says what went wrong. (Calling with an argument of the wrong
Python type raises TypeError, as usual; exceptions of user callbacks pass through.)
Names follow the official pulsar-client (``ProducerQueueIsFull`` ->
``ProducerQueueIsFullError``) where one exists.
"""

from __future__ import annotations


class MsgClientError(Exception):
    """Base class of every msgclient error."""


# -- configuration and input ------------------------------------------------------------


class InvalidConfigurationError(MsgClientError, ValueError):
    """An option has a bad value; the message names the option and what it accepts."""


class InvalidServiceUrlError(InvalidConfigurationError):
    """The service URL cannot be parsed or names no known protocol."""


class UnknownProtocolError(InvalidServiceUrlError):
    """No installed protocol adapter handles the service URL's scheme."""


class AdapterLoadError(MsgClientError, ImportError):
    """The adapter registered for a URL scheme cannot be imported (a module of the same
    name shadowing it on sys.path, a broken install); the message names what was found."""


class InvalidTopicNameError(InvalidConfigurationError):
    """The topic name is not valid for the protocol."""


class MessageTooBigError(MsgClientError, ValueError):
    """The message is larger than the broker accepts."""


class MessageEncodingError(MsgClientError):
    """A batch or message could not be encoded or compressed for the wire; the messages
    it carried fail with this error (the cause is chained)."""


# -- connections and protocol ------------------------------------------------------------


class ConnectError(MsgClientError):
    """A connection to the broker could not be established."""


class ConnectionClosedError(MsgClientError):
    """The connection closed while an operation was in flight."""


class ProtocolError(MsgClientError):
    """The peer sent bytes that do not follow the wire protocol."""


class MalformedFrameError(ProtocolError):
    """A frame's structure is invalid (bad sizes, undecodable command, unknown magic)."""


class ChecksumMismatchError(ProtocolError):
    """A frame's checksum does not match its content."""


class FrameTooLargeError(ProtocolError):
    """A frame announces a size above the configured maximum."""


class TruncatedFrameError(ProtocolError):
    """The connection ended in the middle of a frame."""


class OperationTimeoutError(MsgClientError, TimeoutError):
    """A request to the broker got no answer within ``operation_timeout``."""


class AuthenticationError(MsgClientError):
    """The broker rejected the client's credentials."""


class TopicLookupError(MsgClientError):
    """The broker owning a topic could not be found (includes too many redirects)."""


class TooManyRequestsError(MsgClientError):
    """The broker refused a request because too many are in flight."""


class BrokerError(MsgClientError):
    """The broker answered a request with an error.

    ``code`` is the protocol's own error name (e.g. ``"ServiceNotReady"``,
    ``"NOT_LEADER_OR_FOLLOWER"``) so callers can branch on it without parsing the text.
    ``retriable`` says that the protocol defines the error as transient.
    """

    def __init__(self, code: str, message: str, *, retriable: bool = False) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.broker_message = message
        self.retriable = retriable


class TopicNotFoundError(BrokerError):
    """The topic does not exist and the broker will not create it."""


class TopicAlreadyExistsError(BrokerError):
    """A topic of that name exists already (creating it)."""


class ConsumerBusyError(BrokerError):
    """The subscription is exclusive and another consumer holds it (or its type differs)."""


class ProducerBusyError(BrokerError):
    """Another producer with the same name is connected to the topic."""


class ProducerFencedError(BrokerError):
    """The broker fenced this producer off the topic."""


class NotSupportedError(MsgClientError):
    """The protocol or the broker cannot do what was asked (the message says why)."""


# -- client-side state and limits -------------------------------------------------------


class AlreadyClosedError(MsgClientError):
    """The client, producer or consumer was already closed."""


class SendTimeoutError(MsgClientError, TimeoutError):
    """A message was not confirmed by the broker within ``send_timeout``."""


class ReceiveTimeoutError(MsgClientError, TimeoutError):
    """No message arrived within the receive timeout."""


class ProducerQueueIsFullError(MsgClientError):
    """``max_pending_messages`` are already pending and ``block_if_queue_full`` is off."""


class MemoryBufferIsFullError(MsgClientError):
    """The client's ``memory_limit`` is reached and ``block_if_queue_full`` is off."""


# -- transactions (docs/transactions.md) ------------------------------------------------


class TransactionError(MsgClientError):
    """A transaction could not do what was asked; the subclass says what may follow."""


class TransactionStateError(TransactionError):
    """The call does not fit the transaction's state (commit without begin, begin twice,
    a send outside a transaction on a transactional producer); nothing was changed."""


class TransactionAbortableError(TransactionError):
    """The open transaction failed (a send refused, offsets not committed): abort it; the
    producer can begin another one afterwards."""


class TransactionTimeoutError(TransactionAbortableError, TimeoutError):
    """The transaction stayed open longer than ``transaction_timeout_ms``: the coordinator
    aborts it; abort it here too."""


class TransactionFatalError(TransactionError):
    """The producer can no longer take part in transactions (another producer with the same
    transactional id fenced it, or it is not authorized): close it."""
