"""decode_entry: MESSAGE frames (single and batched, compressed, with ack sets) to Messages."""

from __future__ import annotations

import asyncio

import pytest

from msgclient.contract import OpSend
from msgclient.errors import MalformedFrameError, ProtocolError
from msgclient.message import OutgoingMessage
from msgclient.message_batch import MessageBlock
from msgclient.options import CompressionType
from protocols.pulsarwire.compression import PULSAR_COMPRESSION_TYPES, get_codec
from protocols.pulsarwire.framing import FrameDecoder, encode_payload_command
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.receive_codec import decode_entry
from protocols.pulsarwire.send_codec import SendEncoder

TOPIC = "persistent://public/default/t"


def outgoing(value: bytes, sequence_id: int, **options: object) -> OutgoingMessage:
    future = asyncio.get_running_loop().create_future()
    message = OutgoingMessage(value, future, **options)  # type: ignore[arg-type]
    message.sequence_id = sequence_id
    return message


def as_message_frame(
    send_frame: bytes, ledger: int = 7, entry: int = 9, ack_set: list[int] | None = None
) -> bytes:
    """Turn our SEND frame into the MESSAGE frame a broker would dispatch for it."""
    (frame,) = FrameDecoder().feed(send_frame)
    assert frame.metadata is not None and frame.payload is not None
    command = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1,
            message_id=pb.MessageIdData(ledgerId=ledger, entryId=entry),
            redelivery_count=2,
            ack_set=ack_set or [],
        ),
    )
    return encode_payload_command(command, frame.metadata.SerializeToString(), frame.payload)


def decode(data: bytes, partition: int = -1) -> list:  # type: ignore[type-arg]
    (frame,) = FrameDecoder().feed(data)
    return decode_entry(frame, TOPIC, partition)


@pytest.mark.parametrize("compression", PULSAR_COMPRESSION_TYPES)
async def test_batch_round_trips_through_our_encoder(compression: CompressionType) -> None:
    codec = None if compression is CompressionType.NONE else get_codec(compression)
    encoder = SendEncoder(1, compression, codec)
    encoder.producer_name = "p"
    messages = [
        outgoing(b"plain", 10),
        outgoing(b"", 11, partition_key="k", properties={"a": "1"}, event_timestamp=123),
        outgoing(b"x" * 1000, 12, ordering_key=b"ok"),
    ]
    received = decode(as_message_frame(encoder.encode(OpSend(messages, True, 0, 0.0))), 3)
    assert [m.data() for m in received] == [b"plain", b"", b"x" * 1000]
    assert [m.message_id() for m in received] == [PulsarMessageId(7, 9, 3, i, 3) for i in range(3)]
    assert received[1].partition_key() == "k"
    assert received[1].properties() == {"a": "1"}
    assert received[1].event_timestamp() == 123
    assert received[2].ordering_key() == b"ok"
    assert [m.sequence_id() for m in received] == [10, 11, 12]
    assert all(m.redelivery_count() == 2 and m.producer_name() == "p" for m in received)


async def test_single_message_entry() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    message = outgoing(b"one", 5, partition_key="key", properties={"p": "v"}, event_timestamp=9)
    (received,) = decode(as_message_frame(encoder.encode(OpSend([message], False, 3, 0.0))))
    assert received.data() == b"one"
    assert received.message_id() == PulsarMessageId(7, 9)
    assert (received.partition_key(), received.properties(), received.event_timestamp()) == (
        "key",
        {"p": "v"},
        9,
    )


async def test_ack_set_skips_acked_batch_indexes() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    messages = [outgoing(b"m%d" % i, i) for i in range(4)]
    frame = encoder.encode(OpSend(messages, True, 0, 0.0))
    # bits set = still to deliver: indexes 1 and 3
    received = decode(as_message_frame(frame, ack_set=[0b1010]))
    assert [m.data() for m in received] == [b"m1", b"m3"]


async def test_batch_overrunning_its_entry_is_malformed() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    frame = encoder.encode(OpSend([outgoing(b"abc", 1), outgoing(b"def", 2)], True, 0, 0.0))
    (decoded,) = FrameDecoder().feed(as_message_frame(frame))
    assert decoded.payload is not None
    decoded.payload = decoded.payload[:-2]  # the last record is cut short
    with pytest.raises(MalformedFrameError, match="overruns"):
        decode_entry(decoded, TOPIC, -1)


async def test_deliver_at_travels_in_the_metadata_of_an_unbatched_message() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    message = outgoing(b"later", 3)
    message.deliver_at = 1_700_000_000_000
    (frame,) = FrameDecoder().feed(encoder.encode(OpSend([message], False, 5, 0.0)))
    assert frame.metadata is not None
    assert frame.metadata.deliver_at_time == 1_700_000_000_000


def message_frame(metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    command = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1, message_id=pb.MessageIdData(ledgerId=7, entryId=9)
        ),
    )
    return encode_payload_command(command, metadata.SerializeToString(), payload)


def lying_metadata(**fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, **fields)


@pytest.mark.parametrize("compression", [c for c in PULSAR_COMPRESSION_TYPES if c.value])
def test_an_entry_declaring_more_than_the_max_message_size_is_refused(
    compression: CompressionType,
) -> None:
    """An honest 200 MiB payload (here: its declaration) is refused before decompressing."""
    payload = get_codec(compression).compress(b"\0" * 1000)
    metadata = lying_metadata(compression=compression.value, uncompressed_size=200 << 20)
    with pytest.raises(MalformedFrameError, match="over the maximum message size"):
        decode(message_frame(metadata, payload))


def test_a_batch_claiming_a_million_records_fails_fast() -> None:
    metadata = lying_metadata(num_messages_in_batch=1_000_000)
    with pytest.raises(MalformedFrameError, match="claims 1000000 records in 6000 bytes"):
        decode(message_frame(metadata, b"\0" * 6000))


def test_a_zstd_frame_recording_more_than_declared_is_refused() -> None:
    """zstandard allocates what a frame records: the frame must not out-claim the metadata."""
    payload = get_codec(CompressionType.ZSTD).compress(b"\0" * 100_000)
    metadata = lying_metadata(compression=CompressionType.ZSTD.value, uncompressed_size=10)
    with pytest.raises(ProtocolError, match="ZSTD frame says 100000 bytes"):
        decode(message_frame(metadata, payload))


async def test_a_batch_entry_is_a_block_whose_columns_are_its_messages() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    messages = [
        outgoing(b"plain", 0),
        outgoing(b"keyed", 1, partition_key="k", properties={"p": "v"}, event_timestamp=5),
        outgoing(b"", 2, null_value=True),
    ]
    frame = encoder.encode(OpSend(messages, True, 0, 0.0))
    block = decode(as_message_frame(frame))
    assert isinstance(block, MessageBlock)
    made = list(block)
    assert block.values(0, 3) == [m.value() for m in made] == [b"plain", b"keyed", None]
    assert block.key_bytes(0, 3) == [None, b"k", None]
    assert block.properties(0, 3) == [None, {"p": "v"}, None]
    assert block.event_timestamps(0, 3) == [0, 5, 0]
    assert block.publish_timestamps(1, 3) == [made[1].publish_timestamp()] * 2
    assert block.message_ids(0, 3) == [m.message_id() for m in made]
    assert block[1] is made[1] and block[-1] is made[2] and block[0:2] == made[0:2]
    # All of it: the entry id. Part of it: one id per message.
    assert block.ack_ids(0, 3) == [PulsarMessageId(7, 9, -1)]
    assert block.ack_ids(1, 3) == [made[1].message_id(), made[2].message_id()]


async def test_an_entry_cut_by_its_ack_set_keeps_the_batch_indexes() -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    frame = encoder.encode(OpSend([outgoing(b"m%d" % i, i) for i in range(4)], True, 0, 0.0))
    block = decode(as_message_frame(frame, ack_set=[0b1010]))
    assert isinstance(block, MessageBlock)
    ids = block.message_ids(0, 2)
    assert [i.batch_index for i in ids] == [1, 3]  # type: ignore[attr-defined]
    assert [m.message_id() for m in block] == ids
    assert block.ack_ids(0, 2) == [PulsarMessageId(7, 9, -1)]  # the rest was acked before


def test_a_sequence_id_written_twice_reads_as_the_last() -> None:
    """Protobuf keeps the last of a repeated field: records of ``payload_size, sequence_id,
    sequence_id`` are not read as one long sequence id, though all are alike."""
    record = b"\x18\x01\x40\x01\x40\x02"  # payload_size 1, sequence_id 1, sequence_id 2
    payload = (len(record).to_bytes(4, "big") + record + b"v") * 3
    metadata = lying_metadata(num_messages_in_batch=3)
    received = decode(message_frame(metadata, payload))
    assert [m.sequence_id() for m in received] == [2, 2, 2]
    assert [m.data() for m in received] == [b"v"] * 3
