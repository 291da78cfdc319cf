"""Pulsar framing (protocols/pulsarwire/framing.py): frames round-trip through any chunking;
random, mutated and lying bytes give only ProtocolError, in memory bounded by the input."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import (
    FrameTooLargeError,
    MalformedFrameError,
    ProtocolError,
    TruncatedFrameError,
)
from protocols.pulsarwire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    FrameDecoder,
    encode_command,
    encode_payload_command,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.fuzz.strategies import KIB, bounded, chunked, examples, mutated, text

U64 = st.integers(0, 2**64 - 1)
U32 = st.integers(0, 2**32 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
Type = pb.BaseCommand


def _message_id() -> st.SearchStrategy[pb.MessageIdData]:
    return st.builds(
        lambda ledger, entry, ack_set: pb.MessageIdData(
            ledgerId=ledger, entryId=entry, ack_set=ack_set
        ),
        U64,
        U64,
        st.lists(I64, max_size=2),
    )


def _key_values() -> st.SearchStrategy[list[pb.KeyValue]]:
    return st.lists(
        st.builds(lambda k, v: pb.KeyValue(key=k, value=v), text(8), text(8)), max_size=2
    )


COMMANDS: st.SearchStrategy[pb.BaseCommand] = st.one_of(
    st.just(pb.BaseCommand(type=Type.PING, ping=pb.CommandPing())),
    st.just(pb.BaseCommand(type=Type.PONG, pong=pb.CommandPong())),
    st.builds(
        lambda c, p: pb.BaseCommand(
            type=Type.FLOW, flow=pb.CommandFlow(consumer_id=c, messagePermits=p)
        ),
        U64,
        U32,
    ),
    st.builds(
        lambda c, kind, ids: pb.BaseCommand(
            type=Type.ACK, ack=pb.CommandAck(consumer_id=c, ack_type=kind, message_id=ids)
        ),
        U64,
        st.sampled_from([pb.CommandAck.Individual, pb.CommandAck.Cumulative]),
        st.lists(_message_id(), max_size=4),
    ),
    st.builds(
        lambda topic, p, r, name, kv: pb.BaseCommand(
            type=Type.PRODUCER,
            producer=pb.CommandProducer(
                topic=topic, producer_id=p, request_id=r, producer_name=name, metadata=kv
            ),
        ),
        text(),
        U64,
        U64,
        text(),
        _key_values(),
    ),
    st.builds(
        lambda r, message: pb.BaseCommand(
            type=Type.ERROR,
            error=pb.CommandError(request_id=r, error=pb.ServiceNotReady, message=message),
        ),
        U64,
        text(),
    ),
)

PAYLOAD_COMMANDS: st.SearchStrategy[pb.BaseCommand] = st.one_of(
    st.builds(
        lambda p, s, n: pb.BaseCommand(
            type=Type.SEND, send=pb.CommandSend(producer_id=p, sequence_id=s, num_messages=n)
        ),
        U64,
        U64,
        st.integers(0, 2**31 - 1),
    ),
    st.builds(
        lambda c, mid, r, ack: pb.BaseCommand(
            type=Type.MESSAGE,
            message=pb.CommandMessage(
                consumer_id=c, message_id=mid, redelivery_count=r, ack_set=ack
            ),
        ),
        U64,
        _message_id(),
        U32,
        st.lists(I64, max_size=2),
    ),
)

METADATA: st.SearchStrategy[pb.MessageMetadata] = st.builds(
    lambda name, seq, t, kv, key, n: pb.MessageMetadata(
        producer_name=name,
        sequence_id=seq,
        publish_time=t,
        properties=kv,
        partition_key=key,
        num_messages_in_batch=n,
    ),
    text(),
    U64,
    U64,
    _key_values(),
    text(),
    st.integers(0, 2**31 - 1),
)

ENTRY_METADATA = st.builds(
    lambda t, i: pb.BrokerEntryMetadata(broker_timestamp=t, index=i), U64, U64
)

Expected = tuple[
    pb.BaseCommand, pb.MessageMetadata | None, bytes | None, pb.BrokerEntryMetadata | None
]


def with_entry_metadata(frame: bytes, entry: pb.BrokerEntryMetadata) -> bytes:
    """A payload frame as a broker dispatches it: broker entry metadata before the checksum."""
    (total, command_size) = struct.unpack_from(">II", frame)
    at = 8 + command_size
    raw = entry.SerializeToString()
    section = struct.pack(">HI", 0x0E02, len(raw)) + raw
    return struct.pack(">I", total + len(section)) + frame[4:at] + section + frame[at:]


@st.composite
def frames(draw: st.DrawFn, max_frames: int = 4) -> tuple[bytes, list[Expected]]:
    """Encoded frames back to back, and what each decodes to."""
    stream: list[bytes] = []
    expected: list[Expected] = []
    for _ in range(draw(st.integers(1, max_frames))):
        if draw(st.booleans()):
            command = draw(COMMANDS)
            stream.append(encode_command(command))
            expected.append((command, None, None, None))
            continue
        command, metadata = draw(PAYLOAD_COMMANDS), draw(METADATA)
        payload = draw(st.binary(max_size=200))
        frame = encode_payload_command(command, metadata.SerializeToString(), payload)
        entry = draw(st.none() | ENTRY_METADATA) if command.type == Type.MESSAGE else None
        if entry is not None:
            frame = with_entry_metadata(frame, entry)
        stream.append(frame)
        expected.append((command, metadata, payload, entry))
    return b"".join(stream), expected


def feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[Frame]:
    out: list[Frame] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    decoder.eof()
    return out


def size_fields(stream: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every frame's total_size, command_size and metadata_size."""
    fields, pos = [], 0
    while pos + 8 <= len(stream):
        total, command_size = struct.unpack_from(">II", stream, pos)
        fields += [(pos, 4), (pos + 4, 4)]
        after = pos + 8 + command_size
        if after + 2 <= len(stream) and stream[after : after + 2] == b"\x0e\x02":
            fields.append((after + 2, 4))
            after += 6 + struct.unpack_from(">I", stream, after + 2)[0]
        if after + 2 <= len(stream) and stream[after : after + 2] == b"\x0e\x01":
            after += 6
        if after < pos + 4 + total:
            fields.append((after, 4))  # metadata_size
        pos += 4 + total
    return fields


# -- round trips ---------------------------------------------------------------------------


@settings(max_examples=examples(0.3))
@given(frames(), st.lists(st.integers(0, 2**16), max_size=8))
def test_frames_round_trip_through_any_chunking(
    encoded: tuple[bytes, list[Expected]], cuts: list[int]
) -> None:
    stream, expected = encoded
    decoded = feed_all(FrameDecoder(), chunked(stream, cuts))
    assert len(decoded) == len(expected)
    for frame, (command, metadata, payload, entry) in zip(decoded, expected, strict=True):
        assert frame.command == command
        assert frame.metadata == metadata
        assert frame.payload == payload
        assert frame.broker_entry_metadata == entry
        assert frame.checksum_error is None


# -- random and mutated bytes --------------------------------------------------------------

# A Frame and its protobuf objects cost a few hundred bytes, and a frame can be 6 bytes:
# the bound is per input byte, plus the decoder's fixed costs.
PER_BYTE, FIXED = 96, 64 * KIB


def decode_bounded(chunks: list[bytes], max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
    size = sum(map(len, chunks))
    bounded(
        lambda: feed_all(FrameDecoder(max_frame_size), chunks),
        ProtocolError,
        PER_BYTE * size + FIXED,
    )


@settings(max_examples=examples(0.2))
@given(st.binary(max_size=2048), st.lists(st.integers(0, 2**12), max_size=6))
@example(b"\x00\x00\x00\x00", [])
@example(b"\xff\xff\xff\xff", [])
@example(b"\x00\x00\x00\x04\x00\x00\x00\x00", [])
def test_random_bytes_raise_only_protocol_errors(data: bytes, cuts: list[int]) -> None:
    decode_bounded(chunked(data, cuts))


@settings(max_examples=examples(0.35))
@given(st.data())
def test_mutated_frames_raise_only_protocol_errors(data: st.DataObject) -> None:
    stream, _ = data.draw(frames(max_frames=3))
    bad = data.draw(mutated(stream, size_fields(stream)))
    cuts = data.draw(st.lists(st.integers(0, 2**12), max_size=4))
    max_frame_size = data.draw(st.sampled_from([DEFAULT_MAX_FRAME_SIZE, 64, 2**32]))
    decode_bounded(chunked(bad, cuts), max_frame_size)


@settings(max_examples=examples(0.05))
@given(frames(max_frames=3), st.lists(st.integers(0, 2**12), max_size=4))
def test_same_frames_or_same_error_whatever_the_chunking(
    encoded: tuple[bytes, list[Expected]], cuts: list[int]
) -> None:
    stream, _ = encoded
    whole = feed_all(FrameDecoder(), [stream])
    assert [f.command for f in feed_all(FrameDecoder(), chunked(stream, cuts))] == [
        f.command for f in whole
    ]


# -- lying sizes ---------------------------------------------------------------------------


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from([DEFAULT_MAX_FRAME_SIZE + 1, 2**31 - 1, 2**31, 2**32 - 1]),
    st.binary(max_size=64),
)
def test_a_frame_over_the_limit_fails_before_anything_is_buffered(
    total_size: int, rest: bytes
) -> None:
    outcome = bounded(
        lambda: FrameDecoder().feed(struct.pack(">I", total_size) + rest),
        FrameTooLargeError,
        4 * KIB,
    )
    assert isinstance(outcome.error, FrameTooLargeError)


@settings(max_examples=examples(0.05))
@given(st.sampled_from([2**31 - 1, 2**31, 2**32 - 1]), st.binary(max_size=4096))
def test_a_2_gib_frame_under_a_raised_limit_buffers_only_what_arrived(
    total_size: int, rest: bytes
) -> None:
    """Even allowed, a huge declared frame costs only the bytes received so far."""
    decoder = FrameDecoder(max_frame_size=2**32)
    head = struct.pack(">I", total_size) + rest
    outcome = bounded(lambda: decoder.feed(head), ProtocolError, 2 * len(head) + 4 * KIB)
    assert outcome.result == []
    with pytest.raises(TruncatedFrameError):
        decoder.eof()


@pytest.mark.parametrize("lie", [2**31, 2**32 - 1, 2**31 - 1, 100])
@pytest.mark.parametrize("field", ["command_size", "broker_entry_size", "metadata_size"])
def test_inner_sizes_over_the_frame_are_malformed(lie: int, field: str) -> None:
    command = pb.BaseCommand(
        type=Type.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2)
        ),
    )
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    frame = bytearray(
        with_entry_metadata(
            encode_payload_command(command, metadata.SerializeToString(), b"x" * 10),
            pb.BrokerEntryMetadata(index=5),
        )
    )
    (command_size,) = struct.unpack_from(">I", frame, 4)
    entry_at = 8 + command_size + 2
    (entry_size,) = struct.unpack_from(">I", frame, entry_at)
    at = {
        "command_size": 4,
        "broker_entry_size": entry_at,
        "metadata_size": entry_at + 4 + entry_size + 6,
    }[field]
    struct.pack_into(">I", frame, at, lie)
    if field == "metadata_size":  # keep the checksum right: the size is the lie, not the CRC
        crc_at = at - 4
        struct.pack_into(">I", frame, crc_at, google_crc32c.value(bytes(frame[at:])))
    outcome = bounded(lambda: FrameDecoder().feed(bytes(frame)), ProtocolError, 16 * KIB)
    assert isinstance(outcome.error, MalformedFrameError)
