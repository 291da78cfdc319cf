"""Encoding a producer's op (a batch or one message) into a SEND frame.

This runs once per batch, and its inner loop once per message: the per-message
SingleMessageMetadata is written by hand (a few tagged varints) instead of through a
protobuf object, which is several times cheaper for the usual message without key or
properties. Field numbers are those of PulsarApi.proto's SingleMessageMetadata.
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Mapping
from itertools import repeat
from typing import TYPE_CHECKING

from msgclient.contract import OpSend, ValueColumns
from msgclient.core.send.routing import pulsar_key
from msgclient.errors import MessageTooBigError
from msgclient.message import OutgoingMessage
from msgclient.options import CompressionType
from protocols.pulsarwire.compression import Codec
from protocols.pulsarwire.encryption import encrypt_entry, encryption_overhead
from protocols.pulsarwire.framing import encode_payload_command
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.varint import uvarint

if TYPE_CHECKING:  # imported when used: cryptography is an optional extra
    from protocols.pulsarwire.message_crypto import DataKey, MessageEncryptor

_U32 = struct.Struct(">I").pack

# SingleMessageMetadata field tags: (field number << 3) | wire type
_PROPERTIES = b"\x0a"  # 1, length-delimited KeyValue
_PARTITION_KEY = b"\x12"  # 2, string
_PAYLOAD_SIZE = b"\x18"  # 3, varint
_EVENT_TIME = b"\x28"  # 5, varint
_KEY_B64_ENCODED = b"\x30\x01"  # 6, bool true: the partition key is base64 of bytes
_ORDERING_KEY = b"\x3a"  # 7, bytes
_SEQUENCE_ID = b"\x40"  # 8, varint
_NULL_VALUE = b"\x48\x01"  # 9, bool true: the producer sent None
_KV_KEY, _KV_VALUE = b"\x0a", b"\x12"  # KeyValue fields 1 and 2


def _length_delimited(tag: bytes, data: bytes) -> bytes:
    return tag + uvarint(len(data)) + data


def encode_properties(properties: Mapping[str, str]) -> bytes:
    return b"".join(
        _length_delimited(
            _PROPERTIES,
            _length_delimited(_KV_KEY, k.encode()) + _length_delimited(_KV_VALUE, v.encode()),
        )
        for k, v in properties.items()
    )


def single_message_metadata(message: OutgoingMessage) -> bytes:
    """The serialized SingleMessageMetadata of one message in a batch (fields in order)."""
    if (
        message.properties is None
        and message.partition_key is None
        and message.event_timestamp is None
        and message.ordering_key is None
        and not message.null_value
    ):
        return (
            _PAYLOAD_SIZE
            + uvarint(len(message.value))
            + _SEQUENCE_ID
            + uvarint(message.sequence_id)  # type: ignore[arg-type]
        )
    return _metadata(
        len(message.value),
        message.sequence_id,  # type: ignore[arg-type]
        message.properties,
        message.partition_key,
        message.event_timestamp,
        message.ordering_key,
        message.null_value,
    )


def _metadata(
    size: int,
    sequence_id: int,
    properties: Mapping[str, str] | None,
    key: str | bytes | None,
    event_timestamp: int | None,
    ordering_key: bytes | None,
    null_value: bool,
) -> bytes:
    """SingleMessageMetadata with whatever a message has, its fields in order."""
    parts = []
    if properties:
        parts.append(encode_properties(properties))
    if isinstance(key, bytes):
        parts.append(_length_delimited(_PARTITION_KEY, base64.b64encode(key)))
    elif key is not None:
        parts.append(_length_delimited(_PARTITION_KEY, key.encode()))
    parts.append(_PAYLOAD_SIZE + uvarint(size))
    if event_timestamp is not None:
        parts.append(_EVENT_TIME + uvarint(event_timestamp))
    if type(key) is bytes:
        parts.append(_KEY_B64_ENCODED)
    if ordering_key is not None:
        parts.append(_length_delimited(_ORDERING_KEY, ordering_key))
    parts.append(_SEQUENCE_ID + uvarint(sequence_id))
    if null_value:
        parts.append(_NULL_VALUE)
    return b"".join(parts)


def batch_payload(messages: list[OutgoingMessage]) -> bytes:
    """Each message as [metadata size u32][SingleMessageMetadata][payload], concatenated."""
    parts: list[bytes] = []
    append = parts.append
    for message in messages:
        if (
            message.properties is None
            and message.partition_key is None
            and (message.event_timestamp is None and message.ordering_key is None)
            and not message.null_value
        ):
            # Inlined plain case of single_message_metadata: most messages take it.
            metadata = (
                _PAYLOAD_SIZE
                + uvarint(len(message.value))
                + _SEQUENCE_ID
                + uvarint(message.sequence_id)  # type: ignore[arg-type]
            )
        else:
            metadata = single_message_metadata(message)
        append(_U32(len(metadata)))
        append(metadata)
        append(message.value)
    return b"".join(parts)


def batch_payload_columns(columns: ValueColumns, sequence_id: int) -> bytes:
    """``batch_payload`` of a bulk send's columns (numbered from ``sequence_id``), with no
    Python object made per message."""
    parts: list[bytes] = []
    append = parts.append
    count = len(columns.values)
    keys = repeat(None, count) if columns.keys is None else columns.keys
    properties = repeat(None, count) if columns.properties is None else columns.properties
    stamps = repeat(None, count) if columns.event_timestamps is None else columns.event_timestamps
    for value, key, props, stamp in zip(columns.values, keys, properties, stamps, strict=True):
        if key is None and value is not None and not props and stamp is None:
            metadata = _PAYLOAD_SIZE + uvarint(len(value)) + _SEQUENCE_ID + uvarint(sequence_id)
        else:
            size = 0 if value is None else len(value)
            metadata = _metadata(size, sequence_id, props, key, stamp, None, value is None)
            value = value or b""
        sequence_id += 1
        append(_U32(len(metadata)))
        append(metadata)
        append(value)
    return b"".join(parts)


class SendEncoder:
    """Encodes ops of one producer; holds what is the same for all of them."""

    def __init__(
        self,
        producer_id: int,
        compression: CompressionType,
        codec: Codec | None,
        encryptor: MessageEncryptor | None = None,
        chunk_limit: int | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_name = ""  # set by the broker at registration
        self.schema_version: bytes | None = None  # set by the broker at registration
        self._compression = compression.value
        self._codec = codec
        self._encryptor = encryptor
        # Chunking: the most bytes of one entry (metadata and payload; None: no chunking).
        # Public: the limit follows the broker's max message size on registration.
        self.chunk_limit = chunk_limit
        self.chunks = 1  # how many entries the last op encoded went as

    def encode(self, op: OpSend) -> bytes:
        if op.columns is not None:
            return self._encode_columns(op, op.columns)
        first = op.messages[0]
        metadata = pb.MessageMetadata(
            producer_name=self.producer_name,
            sequence_id=op.sequence_id,
            publish_time=int(time.time() * 1000),
        )
        send = pb.CommandSend(producer_id=self.producer_id, sequence_id=op.sequence_id)
        if self.schema_version is not None:
            metadata.schema_version = self.schema_version
        if op.is_batch:
            payload = batch_payload(op.messages)
            metadata.num_messages_in_batch = len(op.messages)
            metadata.highest_sequence_id = op.highest_sequence_id
            send.num_messages = len(op.messages)
            send.highest_sequence_id = op.highest_sequence_id
        else:
            payload = first.value
            if first.properties:
                metadata.properties.extend(
                    pb.KeyValue(key=k, value=v) for k, v in first.properties.items()
                )
            if first.event_timestamp is not None:
                metadata.event_time = first.event_timestamp
            if first.deliver_at is not None:
                metadata.deliver_at_time = first.deliver_at
            if first.null_value:
                metadata.null_value = True
        # As the Java client: a batch carries its first message's key and ordering key,
        # which is what Key_Shared dispatch looks at.
        if first.partition_key is not None:
            metadata.partition_key = pulsar_key(first.partition_key)
            if isinstance(first.partition_key, bytes):  # Java's keyBytes: base64, flagged
                metadata.partition_key_b64_encoded = True
        if first.ordering_key is not None:
            metadata.ordering_key = first.ordering_key
        if first.replicate_to:
            metadata.replicate_to.extend(first.replicate_to)
        return self._frame(send, metadata, payload)

    def _encode_columns(self, op: OpSend, columns: ValueColumns) -> bytes:
        """A batch of a bulk send; it carries its first key, as a batch of messages."""
        metadata = pb.MessageMetadata(
            producer_name=self.producer_name,
            sequence_id=op.sequence_id,
            publish_time=int(time.time() * 1000),
            num_messages_in_batch=op.count,
            highest_sequence_id=op.highest_sequence_id,
        )
        if self.schema_version is not None:
            metadata.schema_version = self.schema_version
        first_key = None if columns.keys is None else columns.keys[0]
        if first_key is not None:
            metadata.partition_key = pulsar_key(first_key)
            if isinstance(first_key, bytes):
                metadata.partition_key_b64_encoded = True
        send = pb.CommandSend(
            producer_id=self.producer_id,
            sequence_id=op.sequence_id,
            num_messages=op.count,
            highest_sequence_id=op.highest_sequence_id,
        )
        payload = batch_payload_columns(columns, op.sequence_id)
        return self._frame(send, metadata, payload)

    def _frame(self, send: pb.CommandSend, metadata: pb.MessageMetadata, payload: bytes) -> bytes:
        """The SEND frame: the payload compressed, then encrypted, as configured; or, over
        the chunk limit, the frames of its chunks."""
        if self._codec is not None:
            metadata.compression = self._compression  # type: ignore[assignment]
            metadata.uncompressed_size = len(payload)
            payload = self._codec.compress(payload)
        # One data key for the whole message, whatever it goes as (MessageEncryptor.data_key).
        data_key = None if self._encryptor is None else self._encryptor.data_key()
        self.chunks = 1
        limit = self.chunk_limit
        if limit is not None:
            added = 0 if data_key is None else encryption_overhead(metadata, data_key)
            if len(payload) + added > limit:
                return self._chunked(send, metadata, payload, limit, data_key, added)
        if data_key is not None:  # after compression, as the official clients
            payload = encrypt_entry(metadata, payload, data_key)
        command = pb.BaseCommand(type=pb.BaseCommand.SEND, send=send)
        return encode_payload_command(command, metadata.SerializeToString(), payload)

    def _chunked(
        self,
        send: pb.CommandSend,
        metadata: pb.MessageMetadata,
        payload: bytes,
        limit: int,
        data_key: DataKey | None,
        added: int,
    ) -> bytes:
        """One SEND frame per chunk, concatenated: as the Java client, every chunk has the
        message's sequence id, its uuid (producer name and sequence id), its index, the
        count and the whole (compressed) size; the broker receipts each. Encrypted, as the
        official clients: the compressed payload is cut, then each chunk encrypted on its
        own (its own IV); ``metadata`` already has the encryption fields and ``added`` is
        what the cipher adds to each chunk (encryption_overhead)."""
        metadata.uuid = f"{self.producer_name}-{send.sequence_id}"
        metadata.total_chunk_msg_size = len(payload)
        # Metadata counts toward the broker's limit: measure it with its widest chunk fields.
        metadata.num_chunks_from_msg = metadata.chunk_id = len(payload)
        size = limit - metadata.ByteSize() - added
        if size <= 0:
            cipher = f", encryption adds {added}" if added else ""
            raise MessageTooBigError(
                f"no room for payload under the chunk limit of {limit} bytes: a chunk's "
                f"metadata takes {metadata.ByteSize()} bytes{cipher}"
            )
        count = -(-len(payload) // size)
        metadata.num_chunks_from_msg = count
        send.is_chunk = True
        command = pb.BaseCommand(type=pb.BaseCommand.SEND, send=send)
        view = memoryview(payload)
        frames = []
        for index in range(count):
            metadata.chunk_id = index
            part = bytes(view[index * size : (index + 1) * size])
            if data_key is not None:
                part = encrypt_entry(metadata, part, data_key)
            frames.append(encode_payload_command(command, metadata.SerializeToString(), part))
        self.chunks = count
        return b"".join(frames)
