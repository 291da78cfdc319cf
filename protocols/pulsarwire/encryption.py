"""End-to-end encryption on the Pulsar wire: the MessageMetadata fields it fills and reads.

An encrypted entry's metadata carries one ``EncryptionKeys`` per key name (the name, the
wrapped data key, the reader's metadata) and the IV in ``encryption_param``; its payload
is the AES-GCM ciphertext + tag of the (compressed) payload. ``encryption_algo`` is left
unset, as the official clients leave it. The producer also says ``encrypted`` in its
PRODUCER command (the broker may require it). The cryptography is in
protocols/pulsarwire/message_crypto.py.

A chunked message is encrypted chunk by chunk, as the official producers do: the whole
payload is compressed, cut into chunks, and each chunk encrypted on its own (its own IV in
its own ``encryption_param``); a consumer decrypts each chunk, joins them, then
decompresses the whole.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from msgclient.crypto_key_reader import CryptoError, CryptoKeyReader, EncryptionKey
from msgclient.errors import InvalidConfigurationError
from msgclient.message import Message, MessageId
from msgclient.options import CompressionType
from protocols.pulsarwire.framing import Frame
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

if TYPE_CHECKING:  # imported when used: cryptography is an optional extra
    from protocols.pulsarwire.message_crypto import DataKey, MessageDecryptor, MessageEncryptor

# The bytes AES-GCM's tag adds after each ciphertext: message_crypto.TAG_SIZE, said here
# too for a consumer without the cryptography package, which still delivers encrypted
# chunks as stored (crypto_failure_action CONSUME) and counts their plaintext size.
GCM_TAG_SIZE = 16


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


def encrypt_entry(metadata: pb.MessageMetadata, payload: bytes, data_key: DataKey) -> bytes:
    """The payload to send; ``metadata`` gets the wrapped keys and the IV, in place of any
    it had (each chunk of a message is encrypted in turn with one metadata: the official
    C++ producer appends instead, so its chunk N carries the keys N + 1 times)."""
    encrypted = data_key.encrypt(payload)
    del metadata.encryption_keys[:]
    for key in encrypted.keys:
        metadata.encryption_keys.add(
            key=key.key,
            value=key.value,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in key.metadata.items()],
        )
    metadata.encryption_param = encrypted.iv
    return encrypted.payload


def encryption_overhead(metadata: pb.MessageMetadata, data_key: DataKey) -> int:
    """The bytes the cipher adds to a payload under ``data_key``; ``metadata`` gets that
    key's encryption fields (an IV of the size each entry's has), so that its size is that
    of an encrypted entry's: what a chunk must leave room for. Measured by encrypting
    nothing: AES-GCM adds its tag whatever the size."""
    return len(encrypt_entry(metadata, b"", data_key))


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


def decrypt_chunk(frame: Frame, decryptor: MessageDecryptor | None) -> Frame:
    """A chunk's frame with its payload decrypted (still compressed: the whole message is
    decompressed once joined); CryptoError when it cannot be."""
    metadata, payload = frame.metadata, frame.payload
    assert metadata is not None and payload is not None  # a chunk: the caller saw
    return dataclasses.replace(frame, payload=decrypt_entry(metadata, payload, decryptor))


@attrs.frozen
class EncryptedChunk:
    """One chunk of a chunked message delivered undecrypted: how it was encrypted and how
    many bytes of the message's ``data()`` it is (in chunk order), so that an application
    can decrypt each chunk itself."""

    keys: tuple[EncryptionKey, ...]
    param: bytes
    size: int

    @classmethod
    def of(cls, frame: Frame) -> EncryptedChunk:
        """The chunk of ``frame``, as stored."""
        metadata, payload = frame.metadata, frame.payload
        assert metadata is not None and payload is not None  # a chunk: the caller saw
        return cls(encryption_keys(metadata), metadata.encryption_param, len(payload))

    @property
    def plain_size(self) -> int:
        """Its share of the message's ``total_chunk_msg_size`` (which counts no tag)."""
        return max(self.size - GCM_TAG_SIZE, 0)


@attrs.frozen
class EncryptionContext:
    """How a message was encrypted (the official client's EncryptionContext, with
    attributes for its methods); an application decrypts an undecrypted one itself.
    ``batch_size`` is -1 for a message that is not a batch; a batch is delivered as one
    message whose data is the whole encrypted entry. A chunked message delivered
    undecrypted has its chunks in ``chunks`` (each with its own IV; ``keys`` and ``param``
    are its last chunk's, as the official client gives them); ``chunks`` is empty for any
    other message."""

    keys: tuple[EncryptionKey, ...]
    param: bytes
    algorithm: str
    compression_type: CompressionType
    uncompressed_message_size: int
    batch_size: int
    is_decryption_failed: bool
    chunks: tuple[EncryptedChunk, ...] = ()


class EncryptedMessage(Message):
    """A message that came end-to-end encrypted, with how it was encrypted."""

    __slots__ = ("_encryption_context",)

    _encryption_context: EncryptionContext

    def encryption_context(self) -> EncryptionContext:
        return self._encryption_context


class UndecryptedMessage(EncryptedMessage):
    """A message delivered still encrypted (crypto_failure_action CONSUME): ``data()`` is
    the encrypted (and still compressed) entry payload; of a chunked message, its chunks'
    encrypted payloads joined."""

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


def encryption_context(
    metadata: pb.MessageMetadata, *, failed: bool, chunks: tuple[EncryptedChunk, ...] = ()
) -> EncryptionContext:
    batched = metadata.HasField("num_messages_in_batch")
    return EncryptionContext(
        keys=encryption_keys(metadata),
        param=metadata.encryption_param,
        algorithm=metadata.encryption_algo,
        compression_type=CompressionType(metadata.compression),
        uncompressed_message_size=metadata.uncompressed_size,
        batch_size=metadata.num_messages_in_batch if batched else -1,
        is_decryption_failed=failed,
        chunks=chunks,
    )


def undecrypted_message(
    frame: Frame,
    topic: str,
    partition: int,
    chunk_ids: Sequence[PulsarMessageId] | None = None,
    chunks: tuple[EncryptedChunk, ...] = (),
) -> UndecryptedMessage:
    """The entry of ``frame`` as one message, its payload as it came (the official client's
    CONSUME: a batch is not split, its message id has no batch index). ``chunk_ids`` and
    ``chunks``: the frame is a chunked message's last chunk with every chunk's payload,
    none decrypted (its id a ChunkMessageId)."""
    metadata, payload = frame.metadata, frame.payload
    assert metadata is not None and payload is not None  # decode_entry checked them
    message_id = frame.command.message.message_id
    context = encryption_context(metadata, failed=True, chunks=chunks)
    return UndecryptedMessage(
        payload,
        PulsarMessageId(message_id.ledgerId, message_id.entryId, partition)
        if chunk_ids is None
        else ChunkMessageId.of_chunks(chunk_ids),
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
