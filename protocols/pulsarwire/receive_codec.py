"""Decoding a MESSAGE frame (one ledger entry) into the messages it carries.

An entry is one message, or a batch: ``num_messages_in_batch`` records, each
``[metadata size u32][SingleMessageMetadata][payload]``, the whole payload compressed as
the entry's metadata says. Pure functions: tests drive them with bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from google.protobuf.message import DecodeError

from msgclient.core.compression import CompressionType, get_codec
from msgclient.errors import MalformedFrameError
from msgclient.message import Message
from protocols.pulsarwire.framing import Frame
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

_U32 = struct.Struct(">I")


def decode_entry(frame: Frame, topic: str, partition: int) -> list[Message]:
    """The messages of one MESSAGE frame, minus batch indexes its ack set marks as acked."""
    command = frame.command.message
    metadata = frame.metadata
    if metadata is None or frame.payload is None:
        raise MalformedFrameError("MESSAGE frame without metadata or payload")
    payload = frame.payload
    if metadata.compression != pb.NONE:
        payload = get_codec(CompressionType(metadata.compression)).decompress(
            payload, metadata.uncompressed_size
        )
    ledger, entry = command.message_id.ledgerId, command.message_id.entryId
    redelivery_count = command.redelivery_count
    properties = {kv.key: kv.value for kv in metadata.properties} or None
    if not metadata.HasField("num_messages_in_batch"):
        return [
            Message(
                payload,
                PulsarMessageId(ledger, entry, partition),
                topic,
                partition_key=metadata.partition_key
                if metadata.HasField("partition_key")
                else None,
                ordering_key=metadata.ordering_key if metadata.HasField("ordering_key") else None,
                properties=properties,
                event_timestamp=metadata.event_time,
                publish_timestamp=metadata.publish_time,
                redelivery_count=redelivery_count,
                producer_name=metadata.producer_name,
                sequence_id=metadata.sequence_id,
            )
        ]
    count = metadata.num_messages_in_batch
    unacked = _unacked_indexes(command.ack_set, count)
    messages = []
    position = 0
    single = pb.SingleMessageMetadata()
    for index in range(count):
        try:
            (size,) = _U32.unpack_from(payload, position)
            position += 4
            single.Clear()
            single.ParseFromString(payload[position : position + size])
        except (struct.error, DecodeError) as error:
            raise MalformedFrameError(
                f"batch entry {ledger}:{entry} index {index} of {count}: bad metadata ({error})"
            ) from error
        position += size
        end = position + single.payload_size
        if end > len(payload):
            raise MalformedFrameError(
                f"batch entry {ledger}:{entry} index {index}: payload of {single.payload_size} "
                f"bytes overruns the entry ({len(payload)} bytes)"
            )
        value = payload[position:end]
        position = end
        if unacked is not None and index not in unacked:
            continue  # acked before, as the broker's ack set says
        messages.append(
            Message(
                value,
                PulsarMessageId(ledger, entry, partition, index, count),
                topic,
                partition_key=single.partition_key if single.HasField("partition_key") else None,
                ordering_key=single.ordering_key if single.HasField("ordering_key") else None,
                properties={kv.key: kv.value for kv in single.properties} or None,
                event_timestamp=single.event_time,
                publish_timestamp=metadata.publish_time,
                redelivery_count=redelivery_count,
                producer_name=metadata.producer_name,
                sequence_id=single.sequence_id
                if single.HasField("sequence_id")
                else metadata.sequence_id + index,
            )
        )
    return messages


def _unacked_indexes(ack_set: Sequence[int], count: int) -> set[int] | None:
    """Batch indexes still to deliver: set bits of the ack set (64-bit words, low bit
    first); None when the broker sent no ack set (deliver all)."""
    words = list(ack_set)
    if not words:
        return None
    return {i for i in range(count) if i // 64 < len(words) and (words[i // 64] >> (i % 64)) & 1}
