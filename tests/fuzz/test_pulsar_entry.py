"""Pulsar entries: SendEncoder (send_codec.py) then decode_entry (receive_codec.py).

What a producer sends comes back field for field, batched or not, under every codec; a
MESSAGE entry with mutated metadata, payload or batch records, or with lying sizes, gives
only ProtocolError, and never decodes to more than ``max_size`` bytes whatever it declares.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Mapping

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.contract import OpSend
from msgclient.errors import MalformedFrameError, ProtocolError
from msgclient.message import Message, OutgoingMessage
from msgclient.options import CompressionType
from protocols.pulsarwire.compression import PULSAR_COMPRESSION_TYPES, get_codec
from protocols.pulsarwire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    FrameDecoder,
    encode_payload_command,
)
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.receive_codec import decode_entry
from protocols.pulsarwire.send_codec import SendEncoder
from tests.fuzz.strategies import (
    INTERESTING_SIZES,
    KIB,
    MIB,
    bounded,
    examples,
    mutated,
    text,
)

TOPIC = "persistent://public/default/fuzz"
LEDGER, ENTRY = 11, 22

# Codecs are made (and their packages imported) on first use: not inside a measured call.
for _kind in PULSAR_COMPRESSION_TYPES:
    get_codec(_kind)

_LOOP = asyncio.new_event_loop()  # the futures are never awaited; they need a loop to belong to
_LOOP.close()


class Sent:
    """What one message was sent with (the OutgoingMessage is consumed by the encoder)."""

    def __init__(
        self,
        value: bytes,
        sequence_id: int,
        key: str | bytes | None,
        ordering_key: bytes | None,
        properties: Mapping[str, str] | None,
        event_timestamp: int | None,
    ) -> None:
        self.value, self.sequence_id, self.key = value, sequence_id, key
        self.ordering_key, self.properties = ordering_key, properties
        self.event_timestamp = event_timestamp

    def outgoing(self) -> OutgoingMessage:
        return OutgoingMessage(
            self.value,
            _LOOP.create_future(),
            partition_key=self.key,
            ordering_key=self.ordering_key,
            properties=self.properties,
            event_timestamp=self.event_timestamp,
            sequence_id=self.sequence_id,
        )


# Half the messages are plain: the decoder's fast paths take those. Sequence ids are set
# by ops(): strategies are built once, here, as building one per draw is slow.
SENT = st.builds(
    Sent,
    st.binary(max_size=200),
    st.just(0),
    st.none(),
    st.none(),
    st.none(),
    st.none(),
) | st.builds(
    Sent,
    st.binary(max_size=200),
    st.just(0),
    st.none() | text(10) | st.binary(max_size=20),
    st.none() | st.binary(max_size=20),
    st.none() | st.dictionaries(text(10), text(10), max_size=3),
    st.none() | st.integers(0, 2**63 - 1),
)
FIRST_SEQUENCE_IDS = st.sampled_from([0, 1, 127, 128, 2**21 - 1, 2**21]) | st.integers(0, 2**62)


@st.composite
def ops(draw: st.DrawFn, max_messages: int = 12) -> tuple[list[Sent], bool]:
    """Messages of one op with consecutive sequence ids, and whether it is a batch."""
    batch = draw(st.booleans())
    sent = draw(st.lists(SENT, min_size=1, max_size=max_messages if batch else 1))
    first = draw(FIRST_SEQUENCE_IDS)
    for i, message in enumerate(sent):
        message.sequence_id = first + i
    return sent, batch


COMPRESSIONS = st.sampled_from(PULSAR_COMPRESSION_TYPES)


def send_frame(sent: list[Sent], batch: bool, compression: CompressionType) -> bytes:
    codec = None if compression is CompressionType.NONE else get_codec(compression)
    encoder = SendEncoder(7, compression, codec)
    encoder.producer_name = "fuzz-producer"
    return encoder.encode(OpSend([s.outgoing() for s in sent], batch, 0, 0.0))


def message_frame(
    metadata: bytes, payload: bytes, ack_set: list[int] | None = None, redelivery: int = 3
) -> bytes:
    """The MESSAGE frame a broker dispatches for an entry (valid checksum)."""
    command = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1,
            message_id=pb.MessageIdData(ledgerId=LEDGER, entryId=ENTRY),
            redelivery_count=redelivery,
            ack_set=ack_set or [],
        ),
    )
    return encode_payload_command(command, metadata, payload)


def entry_of(send: bytes) -> tuple[pb.MessageMetadata, bytes]:
    (frame,) = FrameDecoder().feed(send)
    assert frame.metadata is not None and frame.payload is not None
    return frame.metadata, frame.payload


def one_frame(data: bytes) -> Frame:
    (frame,) = FrameDecoder().feed(data)
    return frame


# -- round trip ----------------------------------------------------------------------------


def ack_words(indexes: set[int]) -> list[int]:
    """A java.util.BitSet of ``indexes`` as signed 64-bit words (written independently)."""
    words = [0] * ((max(indexes) // 64 + 1) if indexes else 0)
    for i in indexes:
        words[i // 64] |= 1 << (i % 64)
    return [w - 2**64 if w >= 2**63 else w for w in words]


@settings(max_examples=examples(0.3))
@given(ops(), COMPRESSIONS, st.integers(-1, 100), st.data())
def test_what_is_sent_is_received(
    op: tuple[list[Sent], bool], compression: CompressionType, partition: int, data: st.DataObject
) -> None:
    sent, batch = op
    metadata, payload = entry_of(send_frame(sent, batch, compression))
    # The broker's ack set lists the batch indexes still to deliver.
    unacked = data.draw(st.none() | st.sets(st.integers(0, len(sent) - 1))) if batch else None
    words = ack_words(unacked) if unacked else None
    frame = one_frame(message_frame(metadata.SerializeToString(), payload, words))
    received = decode_entry(frame, TOPIC, partition)
    indexes = sorted(unacked) if unacked else list(range(len(sent)))
    assert len(received) == len(indexes)
    for index, message in zip(indexes, received, strict=True):
        check(message, sent[index], index if batch else -1, len(sent) if batch else 0, partition)


@st.composite
def equal_batches(draw: st.DrawFn) -> list[Sent]:
    """A batch of plain messages of one size (what a busy producer writes; the decoder
    reads these by columns), at times with one message that is not plain, or of
    another size, among them (then record by record)."""
    size = draw(st.sampled_from([0, 1, 100, 127, 128, 300, 16384]))
    count = draw(st.integers(1, 300))
    first = draw(FIRST_SEQUENCE_IDS | st.sampled_from([120, 16370, 2**21 - 10]))
    step = draw(st.sampled_from([1, 1, 2, 129]))  # sequence ids set by the application too
    sent = [
        Sent(bytes([i % 256]) * size, first + i * step, None, None, None, None)
        for i in range(count)
    ]
    odd = draw(st.none() | st.integers(0, count - 1))
    if odd is not None:
        sent[odd] = draw(
            st.sampled_from(
                [
                    Sent(b"o" * (size + 1), first + odd * step, None, None, None, None),
                    Sent(b"o" * size, first + odd * step, "key", None, None, None),
                    Sent(b"o" * size, first + odd * step, None, None, None, 5),
                ]
            )
        )
    return sent


@settings(max_examples=examples(0.1))
@given(equal_batches(), COMPRESSIONS, st.integers(-1, 3))
def test_batches_of_equal_messages_are_received(
    sent: list[Sent], compression: CompressionType, partition: int
) -> None:
    """Their sequence ids cross varint widths (127 -> 128, 2**21) within a batch, too."""
    metadata, payload = entry_of(send_frame(sent, True, compression))
    received = decode_entry(
        one_frame(message_frame(metadata.SerializeToString(), payload)), TOPIC, partition
    )
    assert len(received) == len(sent)
    for index, message in enumerate(received):
        check(message, sent[index], index, len(sent), partition)


def check(message: Message, sent: Sent, index: int, size: int, partition: int) -> None:
    assert message.data() == sent.value
    assert message.message_id() == PulsarMessageId(LEDGER, ENTRY, partition, index, size)
    if index >= 0:
        message_id = message.message_id()
        assert isinstance(message_id, PulsarMessageId) and message_id.batch_size == size
    assert message.topic_name() == TOPIC
    # Bytes keys travel as base64, flagged (Java's keyBytes), and are read back as bytes.
    expected = sent.key.encode() if isinstance(sent.key, str) else sent.key
    assert message.key_bytes() == expected
    assert message.ordering_key() == sent.ordering_key
    assert message.properties() == dict(sent.properties or {})
    assert message.event_timestamp() == (sent.event_timestamp or 0)
    assert message.sequence_id() == sent.sequence_id
    assert message.producer_name() == "fuzz-producer"
    assert message.redelivery_count() == 3
    assert message.publish_timestamp() > 0


# -- mutated entries -----------------------------------------------------------------------

MAX_SIZES = st.sampled_from([64 * KIB, DEFAULT_MAX_FRAME_SIZE])
# Per byte of input or of allowed output: a 6-byte batch record becomes a Message, its id,
# its value and a sequence number, a few hundred bytes.
PER_BYTE, FIXED = 96, 64 * KIB


def record_size_fields(batch_payload: bytes) -> list[tuple[int, int]]:
    """(offset, 4) of each record's metadata size in an uncompressed batch payload."""
    fields, pos = [], 0
    single = pb.SingleMessageMetadata()
    while pos + 4 <= len(batch_payload):
        (size,) = struct.unpack_from(">I", batch_payload, pos)
        fields.append((pos, 4))
        try:
            single.ParseFromString(batch_payload[pos + 4 : pos + 4 + size])
        except Exception:
            break
        pos += 4 + size + single.payload_size
    return fields


def decode_within_bounds(frame_bytes: bytes, max_size: int) -> None:
    """Decode like the consumer: frame, then entry; only ProtocolError, bounded memory."""

    def decode() -> list[Message]:
        messages: list[Message] = []
        for frame in FrameDecoder().feed(frame_bytes):
            messages += decode_entry(frame, TOPIC, 0, max_size)
        return messages

    outcome = bounded(
        decode,
        (ProtocolError,),
        PER_BYTE * (len(frame_bytes) + max_size) + FIXED,
    )
    if outcome.error is None:
        # Whatever the entry declared, it decoded to at most max_size bytes.
        assert sum(len(m.data()) for m in outcome.result) <= max_size


@settings(max_examples=examples(0.35))
@given(ops(max_messages=8), COMPRESSIONS, MAX_SIZES, st.data())
def test_mutated_entries_raise_only_protocol_errors(
    op: tuple[list[Sent], bool], compression: CompressionType, max_size: int, data: st.DataObject
) -> None:
    sent, batch = op
    metadata, payload = entry_of(send_frame(sent, batch, compression))
    codec = get_codec(compression)
    target = data.draw(st.sampled_from(["frame", "metadata", "payload", "records", "fields"]))
    raw_metadata = metadata.SerializeToString()
    if target == "metadata":
        raw_metadata = data.draw(mutated(raw_metadata))
    elif target == "payload":  # the bytes on the wire: compressed ones go to the codec
        payload = data.draw(mutated(payload))
    elif target == "records":  # the batch inside, recompressed, its size honest
        inner = codec.decompress(payload, metadata.uncompressed_size)
        inner = data.draw(mutated(inner, record_size_fields(inner)))
        payload = codec.compress(inner)
        metadata.uncompressed_size = len(inner) if compression.value else 0
        raw_metadata = metadata.SerializeToString()
    elif target == "fields":  # lying counts and sizes in the metadata
        lies = st.sampled_from(INTERESTING_SIZES)
        metadata.num_messages_in_batch = data.draw(lies.map(lambda n: (n % 2**32) - 2**31))
        metadata.uncompressed_size = data.draw(lies.map(lambda n: n % 2**32))
        metadata.compression = data.draw(COMPRESSIONS).value  # type: ignore[assignment]
        raw_metadata = metadata.SerializeToString()
    frame = message_frame(raw_metadata, payload)
    if target == "frame":
        frame = data.draw(mutated(frame))
    decode_within_bounds(frame, max_size)


@settings(max_examples=examples(0.15))
@given(
    st.binary(max_size=400),
    st.binary(max_size=2000),
    st.sampled_from(PULSAR_COMPRESSION_TYPES),
    MAX_SIZES,
)
def test_random_metadata_and_payload_raise_only_protocol_errors(
    raw_metadata: bytes, payload: bytes, compression: CompressionType, max_size: int
) -> None:
    decode_within_bounds(message_frame(raw_metadata, payload), max_size)


# -- lying sizes ---------------------------------------------------------------------------


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from([1_000_000, 2**31 - 1]) | st.integers(2, 2**31 - 1),
    st.binary(max_size=6000),
)
@example(1_000_000, b"\0" * 6000)
def test_a_batch_claiming_a_million_records_fails_fast(count: int, payload: bytes) -> None:
    if count <= len(payload) // 6:
        count = len(payload) // 6 + 1  # a lie: more records than the bytes can hold
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=count
    )
    frame = one_frame(message_frame(metadata.SerializeToString(), payload))
    outcome = bounded(
        lambda: decode_entry(frame, TOPIC, 0), ProtocolError, 2 * len(payload) + 16 * KIB
    )
    assert isinstance(outcome.error, MalformedFrameError)


def compress_for(compression: CompressionType, data: bytes, *, record_size: bool = True) -> bytes:
    if compression is CompressionType.ZSTD and not record_size:
        import zstandard

        return zstandard.ZstdCompressor(write_content_size=False).compress(data)
    return get_codec(compression).compress(data)


LYING_MAX = 64 * KIB
CODECS = [c for c in PULSAR_COMPRESSION_TYPES if c.value]


@settings(max_examples=examples(0.15))
@given(
    st.sampled_from(CODECS),
    st.sampled_from([0, 1, 1000, LYING_MAX, 4 * MIB]),
    st.sampled_from([0, 1, 999, 1000, 1001, LYING_MAX, LYING_MAX + 1, 2**31, 2**32 - 1])
    | st.integers(0, 2**32 - 1),
    st.booleans(),
    st.binary(min_size=1, max_size=8),
)
def test_no_entry_decodes_past_the_max_size_whatever_it_declares(
    compression: CompressionType, actual: int, declared: int, sized: bool, pattern: bytes
) -> None:
    """Compressed bombs (4 MiB of a repeated pattern) and honest or lying declared sizes:
    at most LYING_MAX bytes come out, and decoding costs a small multiple of it."""
    payload = compress_for(compression, (pattern * actual)[:actual], record_size=sized)
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        compression=compression.value,  # type: ignore[arg-type]
        uncompressed_size=declared,
    )
    frame = one_frame(message_frame(metadata.SerializeToString(), payload))
    outcome = bounded(
        lambda: decode_entry(frame, TOPIC, 0, LYING_MAX),
        ProtocolError,
        4 * LYING_MAX + 2 * len(payload) + 16 * KIB,
    )
    if declared > LYING_MAX:
        assert isinstance(outcome.error, MalformedFrameError)
    if outcome.error is None:
        (message,) = outcome.result
        assert len(message.data()) == declared == actual


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("declared", [LYING_MAX + 1, 2**31, 2**32 - 1])
def test_an_honest_huge_entry_is_refused_before_decompressing(
    compression: CompressionType, declared: int
) -> None:
    payload = get_codec(compression).compress(b"\0" * 1000)
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        compression=compression.value,  # type: ignore[arg-type]
        uncompressed_size=declared,
    )
    frame = one_frame(message_frame(metadata.SerializeToString(), payload))
    outcome = bounded(lambda: decode_entry(frame, TOPIC, 0, LYING_MAX), ProtocolError, 16 * KIB)
    assert isinstance(outcome.error, MalformedFrameError)


def test_a_zlib_bomb_stops_at_the_declared_size() -> None:
    bomb = zlib.compress(b"\0" * (64 * MIB), 9)  # 64 KiB on the wire
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        compression=CompressionType.ZLIB.value,  # type: ignore[arg-type]
        uncompressed_size=LYING_MAX,
    )
    frame = one_frame(message_frame(metadata.SerializeToString(), bomb))
    outcome = bounded(
        lambda: decode_entry(frame, TOPIC, 0, LYING_MAX), ProtocolError, 4 * LYING_MAX + 4 * KIB
    )
    assert isinstance(outcome.error, ProtocolError)


# -- bugs found ----------------------------------------------------------------------------


def test_a_short_record_at_the_end_of_a_batch_is_malformed() -> None:
    """A batch whose last record says 5 metadata bytes where 2 remain (found by
    test_mutated_entries_raise_only_protocol_errors: _two_field_record read past the
    payload and an IndexError escaped)."""
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=1
    )
    payload = struct.pack(">I", 5) + b"\x18\x00"
    frame = one_frame(message_frame(metadata.SerializeToString(), payload))
    with pytest.raises(MalformedFrameError):
        decode_entry(frame, TOPIC, 0)
