"""MessageId: the official client's message id, over msgclient's Pulsar message id."""

from __future__ import annotations

from typing import ClassVar

from msgclient import message as core
from msgclient.errors import MalformedFrameError
from msgclient.options import InitialPosition
from msgclient.pulsar_compat.exceptions import pulsar_errors
from protocols.pulsarwire.message_id import INT64_MAX, PulsarMessageId


class MessageId:
    """Where a message is stored: ``MessageId(partition, ledger_id, entry_id, batch_index)``
    as the official constructor takes it. ``MessageId.earliest`` and ``MessageId.latest``
    name the ends of a topic (for readers and ``seek``)."""

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    __slots__ = ("_id", "_topic")

    def __init__(
        self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1
    ) -> None:
        self._id = PulsarMessageId(ledger_id, entry_id, partition, batch_index)
        self._topic: str | None = None

    @classmethod
    def wrap(cls, message_id: core.MessageId | MessageId, topic: str | None = None) -> MessageId:
        """The facade's id for one of msgclient's (a Pulsar one: the facade serves Pulsar
        only), or for one of the facade's own (as the official ``wrap`` takes what
        ``send`` returned)."""
        if isinstance(message_id, MessageId):
            return cls.wrap(message_id.msgclient_id, topic or message_id.topic)
        if not isinstance(message_id, PulsarMessageId):
            raise TypeError(f"not a Pulsar message id: {message_id!r}")
        wrapped = cls.__new__(cls)
        wrapped._id = message_id
        wrapped._topic = topic
        return wrapped

    @property
    def msgclient_id(self) -> PulsarMessageId:
        return self._id

    @property
    def topic(self) -> str | None:
        """The topic given to ``deserialize`` or where the message was received, if known."""
        return self._topic

    def ledger_id(self) -> int:
        return self._id.ledger_id

    def entry_id(self) -> int:
        return self._id.entry_id

    def batch_index(self) -> int:
        return self._id.batch_index

    def partition(self) -> int:
        return self._id.partition

    def serialize(self) -> bytes:
        """Bytes (the MessageIdData protobuf, as the official clients write) that
        ``MessageId.deserialize`` turns back into an equal id."""
        return self._id.serialize()

    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> MessageId:
        """The id ``serialize`` wrote (by this client or the official one). ``topic`` names
        the message's topic, which a consumer of several topics needs to acknowledge it."""
        with pulsar_errors():
            try:
                return MessageId.wrap(PulsarMessageId.deserialize(message_id_bytes), topic)
            except TypeError as error:  # protobuf refuses a str
                raise MalformedFrameError(f"not a serialized message id: {error}") from error

    def __str__(self) -> str:
        return str(self._id)

    def __repr__(self) -> str:
        return f"MessageId({self._id})"

    def __hash__(self) -> int:
        return hash(self._id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._id == other._id

    def __lt__(self, other: MessageId) -> bool:
        return self._id < other._id

    def __le__(self, other: MessageId) -> bool:
        return self._id <= other._id

    def __gt__(self, other: MessageId) -> bool:
        return self._id > other._id

    def __ge__(self, other: MessageId) -> bool:
        return self._id >= other._id


def seek_position(messageid: object) -> core.MessageId | int:
    """What ``seek`` takes: a MessageId, or a publish time in ms since the epoch."""
    if isinstance(messageid, MessageId):
        return messageid.msgclient_id
    if isinstance(messageid, int) and not isinstance(messageid, bool):
        return messageid
    raise ValueError(f"invalid seek_arg type {type(messageid)}")


def reader_start(start_message_id: MessageId) -> core.MessageId | InitialPosition:
    """What msgclient's ``create_reader`` takes for the official start: the ends of the
    topic as initial positions, any other id as msgclient's."""
    if start_message_id == MessageId.earliest:
        return InitialPosition.Earliest
    if start_message_id == MessageId.latest:
        return InitialPosition.Latest
    return start_message_id.msgclient_id


# The official client's values: (-1, -1) before the first entry, (INT64_MAX, INT64_MAX)
# after the last.
MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, INT64_MAX, INT64_MAX, -1)
