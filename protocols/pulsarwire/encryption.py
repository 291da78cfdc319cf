"""End-to-end encryption on the Pulsar wire: the MessageMetadata fields it fills and reads.

An encrypted entry's metadata carries one ``EncryptionKeys`` per key name (the name, the
wrapped data key, the reader's metadata) and the IV in ``encryption_param``; its payload
is the AES-GCM ciphertext + tag of the (compressed) payload. ``encryption_algo`` is left
unset, as the official clients leave it. The producer also says ``encrypted`` in its
PRODUCER command (the broker may require it). The cryptography is in
protocols/pulsarwire/message_crypto.py.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from msgclient.crypto_key_reader import CryptoError, CryptoKeyReader, EncryptionKey
from msgclient.errors import InvalidConfigurationError
from msgclient.message import Message, MessageId
from msgclient.options import CompressionType
from protocols.pulsarwire.framing import Frame
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

if TYPE_CHECKING:  # imported when used: cryptography is an optional extra
    from protocols.pulsarwire.message_crypto import MessageDecryptor, MessageEncryptor


def make_encryptor(key_names: Sequence[str], reader: CryptoKeyReader) -> MessageEncryptor:
    """A producer's encryptor with its first data key wrapped for every key name, so that
    a key that cannot be read or used fails the producer's creation (CryptoError), as in
    the Java client, not each send."""
    _require_cryptography()
    from protocols.pulsarwire.message_crypto import MessageEncryptor

    encryptor = MessageEncryptor(key_names, reader)
    encryptor.renew_data_key()
    return encryptor


def make_decryptor(reader: CryptoKeyReader) -> MessageDecryptor:
    _require_cryptography()
    from protocols.pulsarwire.message_crypto import MessageDecryptor

    return MessageDecryptor(reader)


def _require_cryptography() -> None:
    if importlib.util.find_spec("cryptography") is None:
        raise InvalidConfigurationError(
            "option crypto_key_reader needs the cryptography package: "
            "pip install 'msgclient[crypto]'"
        )


def encrypt_entry(
    metadata: pb.MessageMetadata, payload: bytes, encryptor: MessageEncryptor
) -> bytes:
    """The payload to send; ``metadata`` gets the wrapped keys and the IV. CryptoError when
    a key cannot be read or used."""
    encrypted = encryptor.encrypt(payload)
    for key in encrypted.keys:
        metadata.encryption_keys.add(
            key=key.key,
            value=key.value,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in key.metadata.items()],
        )
    metadata.encryption_param = encrypted.iv
    return encrypted.payload


def encryption_keys(metadata: pb.MessageMetadata) -> tuple[EncryptionKey, ...]:
    return tuple(
        EncryptionKey(k.key, k.value, {kv.key: kv.value for kv in k.metadata})
        for k in metadata.encryption_keys
    )


def decrypt_entry(
    metadata: pb.MessageMetadata, payload: bytes, decryptor: MessageDecryptor | None
) -> bytes:
    """The payload of an encrypted entry, still compressed; CryptoError when the consumer
    has no crypto_key_reader or none of the entry's keys opens it."""
    if decryptor is None:
        raise CryptoError("the message is encrypted and the consumer has no crypto_key_reader")
    return decryptor.decrypt(encryption_keys(metadata), metadata.encryption_param, payload)


@attrs.frozen
class EncryptionContext:
    """How a message was encrypted (the official client's EncryptionContext, with
    attributes for its methods); an application decrypts an undecrypted one itself.
    ``batch_size`` is -1 for a message that is not a batch; a batch is delivered as one
    message whose data is the whole encrypted entry."""

    keys: tuple[EncryptionKey, ...]
    param: bytes
    algorithm: str
    compression_type: CompressionType
    uncompressed_message_size: int
    batch_size: int
    is_decryption_failed: bool


class EncryptedMessage(Message):
    """A message that came end-to-end encrypted, with how it was encrypted."""

    __slots__ = ("_encryption_context",)

    _encryption_context: EncryptionContext

    def encryption_context(self) -> EncryptionContext:
        return self._encryption_context


class UndecryptedMessage(EncryptedMessage):
    """A message delivered still encrypted (crypto_failure_action CONSUME): ``data()`` is
    the encrypted (and still compressed) entry payload."""

    __slots__ = ()

    def __init__(
        self,
        value: bytes,
        message_id: MessageId,
        topic: str,
        partition_key: str | None,
        ordering_key: bytes | None,
        properties: Mapping[str, str] | None,
        event_timestamp: int,
        publish_timestamp: int,
        redelivery_count: int,
        producer_name: str,
        sequence_id: int,
        encryption_context: EncryptionContext,
    ) -> None:
        super().__init__(
            value,
            message_id,
            topic,
            partition_key,
            ordering_key,
            properties,
            event_timestamp,
            publish_timestamp,
            redelivery_count,
            producer_name,
            sequence_id,
        )
        self._encryption_context = encryption_context


class DecryptedMessage(EncryptedMessage):
    """A message of an entry the consumer decrypted; its context says how it had been
    encrypted (``is_decryption_failed`` False), as the official client gives it."""

    __slots__ = ()


def decrypted_messages(
    messages: Sequence[Message], metadata: pb.MessageMetadata
) -> list[DecryptedMessage]:
    """``messages`` (those of one decrypted entry) with the entry's encryption context:
    copied field by field, on the path of encrypted entries only."""
    context = encryption_context(metadata, failed=False)
    made = []
    for message in messages:
        decrypted = DecryptedMessage.__new__(DecryptedMessage)
        for field in _MESSAGE_FIELDS:
            setattr(decrypted, field, getattr(message, field))
        decrypted._encryption_context = context
        made.append(decrypted)
    return made


_MESSAGE_FIELDS = Message.__slots__


def encryption_context(metadata: pb.MessageMetadata, *, failed: bool) -> EncryptionContext:
    batched = metadata.HasField("num_messages_in_batch")
    return EncryptionContext(
        keys=encryption_keys(metadata),
        param=metadata.encryption_param,
        algorithm=metadata.encryption_algo,
        compression_type=CompressionType(metadata.compression),
        uncompressed_message_size=metadata.uncompressed_size,
        batch_size=metadata.num_messages_in_batch if batched else -1,
        is_decryption_failed=failed,
    )


def undecrypted_message(frame: Frame, topic: str, partition: int) -> UndecryptedMessage:
    """The entry of ``frame`` as one message, its payload as it came (the official client's
    CONSUME: a batch is not split, its message id has no batch index)."""
    metadata, payload = frame.metadata, frame.payload
    assert metadata is not None and payload is not None  # decode_entry checked them
    message_id = frame.command.message.message_id
    context = encryption_context(metadata, failed=True)
    return UndecryptedMessage(
        payload,
        PulsarMessageId(message_id.ledgerId, message_id.entryId, partition),
        topic,
        metadata.partition_key if metadata.HasField("partition_key") else None,
        metadata.ordering_key if metadata.HasField("ordering_key") else None,
        {kv.key: kv.value for kv in metadata.properties} or None,
        metadata.event_time,
        metadata.publish_time,
        frame.command.message.redelivery_count,
        metadata.producer_name,
        metadata.sequence_id,
        context,
    )
