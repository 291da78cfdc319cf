"""Pulsar framing codec, driven by bytes only."""

from __future__ import annotations

import struct

import pytest

from msgclient.errors import (
    ChecksumMismatchError,
    FrameTooLargeError,
    MalformedFrameError,
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


def crc32c(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), independent of the
    library the codec uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def ping() -> pb.BaseCommand:
    return pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing())


def send(sequence_id: int = 7) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=pb.BaseCommand.SEND,
        send=pb.CommandSend(producer_id=1, sequence_id=sequence_id, num_messages=1),
    )


def metadata(sequence_id: int = 7) -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name="standalone-0-1", sequence_id=sequence_id, publish_time=1_700_000_000_000
    )


def message_command() -> pb.BaseCommand:
    return pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=3, message_id=pb.MessageIdData(ledgerId=10, entryId=20)
        ),
    )


def frame_bytes(command: bytes, payload_section: bytes = b"") -> bytes:
    """Assemble a frame by hand around already serialized parts."""
    body = struct.pack(">I", len(command)) + command + payload_section
    return struct.pack(">I", len(body)) + body


def checksummed(metadata_bytes: bytes, payload: bytes) -> bytes:
    """The [0x0e01][crc32c][metadata_size][metadata][payload] part of a payload frame."""
    rest = struct.pack(">I", len(metadata_bytes)) + metadata_bytes + payload
    return struct.pack(">HI", 0x0E01, crc32c(rest)) + rest


def decode_all(data: bytes) -> list[Frame]:
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    decoder.eof()
    return frames


# -- known-good bytes --------------------------------------------------------------------


def test_ping_encodes_to_the_bytes_of_the_spec() -> None:
    # BaseCommand{type: PING (18), ping: {}}: field 1 varint 18 -> 08 12; field 18, an
    # empty length-delimited message -> tag (18 << 3 | 2) = 146 = varint 92 01, length 00.
    # command_size 5, total_size 4 + 5 = 9.
    expected = bytes.fromhex("00000009 00000005 0812 920100")
    assert encode_command(ping()) == expected
    assert decode_all(expected) == [Frame(ping())]


def test_ping_without_its_empty_submessage_is_a_valid_smaller_frame() -> None:
    bare = bytes.fromhex("00000006 00000002 0812")
    assert encode_command(pb.BaseCommand(type=pb.BaseCommand.PING)) == bare
    (frame,) = decode_all(bare)
    assert frame.command.type == pb.BaseCommand.PING


def test_send_encodes_to_the_hand_built_bytes() -> None:
    command = pb.BaseCommand(
        type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0)
    )
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    # BaseCommand: type SEND (08 06), field 6 send (tag 32, length 04): producer_id 1
    # (08 01), sequence_id 0 (10 00; proto2 writes a set field even when zero).
    command_bytes = bytes.fromhex("0806 3204 0801 1000")
    # MessageMetadata: producer_name "p" (0a 01 70), sequence_id 0 (10 00), publish_time 1.
    metadata_bytes = bytes.fromhex("0a0170 1000 1801")
    checked = struct.pack(">I", 7) + metadata_bytes + b"hi"
    expected = (
        struct.pack(">II", 4 + 8 + 6 + 4 + 7 + 2, 8)
        + command_bytes
        + struct.pack(">HI", 0x0E01, crc32c(checked))
        + checked
    )
    assert meta.SerializeToString() == metadata_bytes
    assert encode_payload_command(command, metadata_bytes, b"hi") == expected
    assert decode_all(expected) == [Frame(command, meta, b"hi")]


def test_reference_crc32c_matches_the_standard_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


# -- round trips and chunking ------------------------------------------------------------


def test_simple_command_round_trip() -> None:
    connect = pb.BaseCommand(
        type=pb.BaseCommand.CONNECT,
        connect=pb.CommandConnect(
            client_version="msgclient 0.1.0",
            protocol_version=pb.v21,
            feature_flags=pb.FeatureFlags(supports_broker_entry_metadata=True),
        ),
    )
    assert decode_all(encode_command(connect)) == [Frame(connect)]


def test_payload_command_round_trip() -> None:
    payload = bytes(range(256)) * 40
    data = encode_payload_command(send(), metadata().SerializeToString(), payload)
    assert decode_all(data) == [Frame(send(), metadata(), payload)]


def test_empty_payload_round_trip() -> None:
    data = encode_payload_command(send(), metadata().SerializeToString(), b"")
    assert decode_all(data) == [Frame(send(), metadata(), b"")]


def test_every_split_point_of_two_frames_gives_the_same_frames() -> None:
    data = encode_command(ping()) + encode_payload_command(
        send(), metadata().SerializeToString(), b"payload"
    )
    expected = [Frame(ping()), Frame(send(), metadata(), b"payload")]
    for split in range(len(data) + 1):
        decoder = FrameDecoder()
        frames = decoder.feed(data[:split]) + decoder.feed(data[split:])
        decoder.eof()
        assert frames == expected, f"split at byte {split}"


def test_one_byte_at_a_time() -> None:
    data = encode_payload_command(send(), metadata().SerializeToString(), b"x" * 50) * 3
    decoder = FrameDecoder()
    frames = [frame for byte in data for frame in decoder.feed(bytes([byte]))]
    decoder.eof()
    assert frames == [Frame(send(), metadata(), b"x" * 50)] * 3


def test_many_frames_in_one_feed() -> None:
    parts = []
    expected = []
    for i in range(1000):
        if i % 2:
            parts.append(encode_command(ping()))
            expected.append(Frame(ping()))
        else:
            payload = str(i).encode()
            meta = metadata(sequence_id=i)
            parts.append(encode_payload_command(send(i), meta.SerializeToString(), payload))
            expected.append(Frame(send(i), meta, payload))
    assert decode_all(b"".join(parts)) == expected


def test_frames_are_returned_as_they_complete() -> None:
    one = encode_command(ping())
    decoder = FrameDecoder()
    assert decoder.feed(one + one[:3]) == [Frame(ping())]
    assert decoder.feed(one[3:-1]) == []
    assert decoder.feed(one[-1:]) == [Frame(ping())]
    decoder.eof()


# -- optional parts of the payload section -----------------------------------------------


def test_broker_entry_metadata_before_the_checksum() -> None:
    entry = pb.BrokerEntryMetadata(broker_timestamp=1_700_000_000_123, index=41)
    entry_bytes = entry.SerializeToString()
    data = frame_bytes(
        message_command().SerializeToString(),
        struct.pack(">HI", 0x0E02, len(entry_bytes))
        + entry_bytes
        + checksummed(metadata().SerializeToString(), b"body"),
    )
    assert decode_all(data) == [Frame(message_command(), metadata(), b"body", entry)]


def test_broker_entry_metadata_without_checksum() -> None:
    entry = pb.BrokerEntryMetadata(index=5)
    entry_bytes = entry.SerializeToString()
    meta_bytes = metadata().SerializeToString()
    data = frame_bytes(
        message_command().SerializeToString(),
        struct.pack(">HI", 0x0E02, len(entry_bytes))
        + entry_bytes
        + struct.pack(">I", len(meta_bytes))
        + meta_bytes
        + b"body",
    )
    assert decode_all(data) == [Frame(message_command(), metadata(), b"body", entry)]


def test_payload_without_checksum_magic() -> None:
    meta_bytes = metadata().SerializeToString()
    data = frame_bytes(
        message_command().SerializeToString(),
        struct.pack(">I", len(meta_bytes)) + meta_bytes + b"unchecked",
    )
    assert decode_all(data) == [Frame(message_command(), metadata(), b"unchecked")]


def test_command_type_without_a_message_in_our_subset_still_parses() -> None:
    # WATCH_TOPIC_LIST (64) with a body in field 64: the body is kept as an unknown field.
    command = bytes([0x08, 64, 0x82, 0x04, 2, 0x08, 1])
    (frame,) = decode_all(frame_bytes(command))
    assert frame.command.type == pb.BaseCommand.WATCH_TOPIC_LIST
    assert frame.command.SerializeToString() == command


# -- errors ------------------------------------------------------------------------------


def test_frame_above_the_maximum_is_refused_from_its_header() -> None:
    with pytest.raises(FrameTooLargeError, match=r"total_size 1001 exceeds .* 1000"):
        FrameDecoder(max_frame_size=1000).feed(struct.pack(">I", 1001))


def test_default_maximum_is_five_mib_plus_the_java_frame_padding() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 5 * 1024 * 1024 + 10 * 1024
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">I", DEFAULT_MAX_FRAME_SIZE)) == []
    with pytest.raises(FrameTooLargeError, match=str(DEFAULT_MAX_FRAME_SIZE + 1)):
        FrameDecoder().feed(struct.pack(">I", DEFAULT_MAX_FRAME_SIZE + 1))


def test_maximum_can_follow_the_brokers_max_message_size() -> None:
    decoder = FrameDecoder()
    decoder.max_frame_size = 100
    with pytest.raises(FrameTooLargeError, match=r"total_size 101 exceeds .* 100"):
        decoder.feed(struct.pack(">I", 101))


def test_total_size_too_small_for_command_size() -> None:
    with pytest.raises(MalformedFrameError, match=r"total_size 3 is below 4"):
        FrameDecoder().feed(struct.pack(">I", 3))


def test_command_size_larger_than_the_frame() -> None:
    data = struct.pack(">II", 6, 3) + b"\x08\x12"
    with pytest.raises(MalformedFrameError, match=r"command_size 3 exceeds total_size 6 - 4"):
        FrameDecoder().feed(data)


def test_garbage_protobuf() -> None:
    with pytest.raises(MalformedFrameError, match=r"undecodable BaseCommand \(3 bytes\)"):
        FrameDecoder().feed(frame_bytes(b"\xff\xff\xff"))


def test_missing_command_type() -> None:
    with pytest.raises(MalformedFrameError, match=r"BaseCommand \(0 bytes\) has no type"):
        FrameDecoder().feed(frame_bytes(b""))


def test_unknown_command_type() -> None:
    with pytest.raises(MalformedFrameError, match=r"has no type, or one this client"):
        FrameDecoder().feed(frame_bytes(b"\x08\x7f"))


def test_bad_checksum_names_both_values() -> None:
    data = bytearray(encode_payload_command(send(), metadata().SerializeToString(), b"data"))
    data[-1] ^= 0x01
    (declared,) = struct.unpack_from(">I", data, 4 + 4 + send().ByteSize() + 2)
    computed = crc32c(bytes(data[4 + 4 + send().ByteSize() + 6 :]))
    expected = rf"frame says 0x{declared:08x}, computed 0x{computed:08x}"
    with pytest.raises(ChecksumMismatchError, match=expected):
        FrameDecoder().feed(bytes(data))


def test_a_message_with_a_bad_checksum_is_delivered_marked_and_decoding_goes_on() -> None:
    # Only that entry is corrupt: the consumer discards it; the stream itself is sound.
    message = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2)
        ),
    )
    data = bytearray(encode_payload_command(message, metadata().SerializeToString(), b"data"))
    data[-1] ^= 0x01
    corrupt, ping = FrameDecoder().feed(
        bytes(data) + encode_command(pb.BaseCommand(type=pb.BaseCommand.PING))
    )
    assert isinstance(corrupt.checksum_error, ChecksumMismatchError)
    assert corrupt.metadata is None
    assert ping.command.type == pb.BaseCommand.PING


def test_metadata_size_overflowing_the_frame() -> None:
    section = struct.pack(">I", 100) + b"short"
    with pytest.raises(MalformedFrameError, match=r"metadata_size 100 overflows .* 5 bytes left"):
        FrameDecoder().feed(frame_bytes(send().SerializeToString(), section))


def test_payload_section_too_short_for_metadata_size() -> None:
    with pytest.raises(MalformedFrameError, match=r"2 bytes left for the 4-byte metadata_size"):
        FrameDecoder().feed(frame_bytes(send().SerializeToString(), b"\x00\x01"))


def test_checksum_magic_cut_short() -> None:
    section = struct.pack(">H", 0x0E01) + b"\x00\x00"
    with pytest.raises(MalformedFrameError, match=r"magic 0x0e01 with only 2 of its 4"):
        FrameDecoder().feed(frame_bytes(send().SerializeToString(), section))


def test_broker_entry_metadata_overflowing_the_frame() -> None:
    section = struct.pack(">HI", 0x0E02, 50) + b"\x08\x01"
    with pytest.raises(MalformedFrameError, match=r"broker entry metadata size 50 overflows"):
        FrameDecoder().feed(frame_bytes(message_command().SerializeToString(), section))


def test_garbage_message_metadata() -> None:
    with pytest.raises(MalformedFrameError, match=r"undecodable MessageMetadata \(2 bytes\)"):
        FrameDecoder().feed(frame_bytes(send().SerializeToString(), checksummed(b"\xff\xff", b"")))


def test_eof_inside_a_frame() -> None:
    data = encode_payload_command(send(), metadata().SerializeToString(), b"data")
    decoder = FrameDecoder()
    assert decoder.feed(data[:-1]) == []
    with pytest.raises(TruncatedFrameError, match=rf"after {len(data) - 1} bytes of a {len(data)}"):
        decoder.eof()


def test_eof_inside_the_size_field() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00")
    with pytest.raises(TruncatedFrameError, match=r"stream ended after 2 bytes$"):
        decoder.eof()


def test_eof_between_frames_is_clean() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(encode_command(ping()) * 2) == [Frame(ping())] * 2
    decoder.eof()
