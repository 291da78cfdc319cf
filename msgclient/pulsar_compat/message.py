"""Message: a received message with the official client's accessors and return types."""

from __future__ import annotations

from typing import Any

from msgclient import message as core
from msgclient.pulsar_compat.encryption import EncryptionContext
from msgclient.pulsar_compat.message_id import MessageId
from msgclient.schema import Schema
from protocols.pulsarwire.encryption import EncryptedMessage

# A schema of any value type, as the official API takes them (``schema=JsonSchema(User)``).
PayloadSchema = Schema[Any]


class Message:
    """A message from ``receive``, ``read_next`` or a listener. As in the official client,
    ``partition_key()`` and ``ordering_key()`` are str ('' when unset), ``value()`` is the
    payload decoded by the consumer's schema, ``data()`` the raw bytes."""

    __slots__ = ("_message", "_schema")

    def __init__(self, message: core.Message, schema: PayloadSchema) -> None:
        self._message = message
        self._schema = schema

    @property
    def msgclient_message(self) -> core.Message:
        return self._message

    def data(self) -> bytes:
        return self._message.data()

    def value(self) -> Any:
        """The payload decoded by the schema; None for a null value (a tombstone)."""
        if self._message.has_null_value():
            return None
        return self._schema.decode(self._message.data())

    def has_null_value(self) -> bool:
        return self._message.has_null_value()

    def properties(self) -> dict[str, str]:
        return self._message.properties()

    def partition_key(self) -> str:
        return self._message.partition_key() or ""

    def ordering_key(self) -> str:
        key = self._message.ordering_key()
        return "" if key is None else key.decode("utf-8", "surrogateescape")

    def publish_timestamp(self) -> int:
        return self._message.publish_timestamp()

    def event_timestamp(self) -> int:
        return self._message.event_timestamp()

    def message_id(self) -> MessageId:
        return MessageId.wrap(self._message.message_id(), self._message.topic_name())

    def topic_name(self) -> str:
        return self._message.topic_name()

    def redelivery_count(self) -> int:
        return self._message.redelivery_count()

    def producer_name(self) -> str:
        return self._message.producer_name()

    def schema_version(self) -> str:
        """The schema version the broker gave the message's producer, as the official
        client returns it: the version's bytes as str ('' without one, as on pulsar-lite,
        which has no schema registry). Bytes that are no UTF-8 come out as surrogates
        (``.encode("utf-8", "surrogateescape")`` gives them back) where the official
        client raises UnicodeDecodeError."""
        version = self._message.schema_version()
        return "" if version is None else version.decode("utf-8", "surrogateescape")

    def encryption_context(self) -> EncryptionContext | None:
        """How the message was encrypted (``is_decryption_failed()`` says whether it was
        delivered undecrypted, crypto_failure_action CONSUME); None if it was not."""
        if isinstance(self._message, EncryptedMessage):
            return EncryptionContext(self._message.encryption_context())
        return None

    def __repr__(self) -> str:
        return f"Message({self.message_id()}, topic={self.topic_name()!r})"
