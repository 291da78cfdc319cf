"""Pulsar binary protocol framing, sans-IO: bytes in, frames out, no sockets.

Wire layout, every integer big-endian (Pulsar binary protocol spec; Java ``Commands``)::

    simple command   [total_size u32][command_size u32][BaseCommand]
    payload command  [total_size u32][command_size u32][BaseCommand]
                     [0x0e02 u16][size u32][BrokerEntryMetadata]  optional, brokers -> MESSAGE
                     [0x0e01 u16][crc32c u32]                     optional checksum
                     [metadata_size u32][MessageMetadata][payload]

``total_size`` counts every byte after itself. The CRC32C covers everything after the
checksum field: ``metadata_size``, the metadata and the payload (not the broker entry
metadata, which the broker adds after the producer computed the checksum).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

import google_crc32c
from google.protobuf.message import DecodeError, Message

from msgclient.errors import (
    ChecksumMismatchError,
    FrameTooLargeError,
    MalformedFrameError,
    TruncatedFrameError,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

# Java Commands.DEFAULT_MAX_MESSAGE_SIZE and MESSAGE_SIZE_FRAME_PADDING: a frame holds one
# message (or batch) of at most max_message_size plus command and metadata overhead.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TWO_U32 = struct.Struct(">II")
_MAGIC_U32 = struct.Struct(">HI")

_M = TypeVar("_M", bound=Message)


def encode_command(cmd: pb.BaseCommand) -> bytes:
    """Frame a command that carries no payload.

    Raises ``google.protobuf.message.EncodeError`` if a required field is unset.
    """
    body = cmd.SerializeToString()
    return _TWO_U32.pack(len(body) + 4, len(body)) + body


def encode_payload_command(cmd: pb.BaseCommand, metadata: bytes, payload: bytes) -> bytes:
    """Frame a SEND (or MESSAGE) command with its checksum, metadata and payload.

    ``metadata`` is an already serialized ``MessageMetadata``. Raises
    ``google.protobuf.message.EncodeError`` if a required field of ``cmd`` is unset.
    """
    body = cmd.SerializeToString()
    metadata_size = _U32.pack(len(metadata))
    # extend() chains the CRC over the three parts, so they are never concatenated twice.
    checksum = google_crc32c.extend(
        google_crc32c.extend(google_crc32c.value(metadata_size), metadata), payload
    )
    # After total_size: command_size, command, magic + crc, metadata_size, metadata, payload.
    total_size = 4 + len(body) + 6 + 4 + len(metadata) + len(payload)
    return b"".join(
        (
            _TWO_U32.pack(total_size, len(body)),
            body,
            _MAGIC_U32.pack(MAGIC_CRC32C, checksum),
            metadata_size,
            metadata,
            payload,
        )
    )


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``metadata`` and ``payload`` are set when the frame has a payload section (SEND,
    MESSAGE); ``broker_entry_metadata`` only when the broker prepended one.
    ``checksum_error`` is set on a MESSAGE whose checksum does not match: the frame itself
    is sound, only that entry is corrupt, and the consumer discards it (as the Java client)
    instead of losing the connection to an entry the broker would send again.
    """

    command: pb.BaseCommand
    metadata: pb.MessageMetadata | None = None
    payload: bytes | None = None
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None
    checksum_error: ChecksumMismatchError | None = None


class FrameDecoder:
    """Incremental decoder: feed it received bytes, get back the frames they complete.

    Chunks may split frames at any byte and hold any number of them. Errors are the
    ``ProtocolError`` subclasses of ``msgclient.errors``. After an error the decoder is
    unusable, and frames decoded earlier in the same ``feed`` call are lost with it: the
    stream can no longer be trusted, so the connection must be closed.
    """

    __slots__ = ("_buffer", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        # Public: CONNECTED may announce a max_message_size, and the limit follows it
        # (max_message_size + MESSAGE_SIZE_FRAME_PADDING, as the Java client does).
        self.max_frame_size = max_frame_size
        # Holds only the start of an incomplete frame between feed() calls.
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes and return the frames completed by them, in order."""
        buffer = self._buffer
        chunk: bytes | bytearray
        if buffer:
            buffer += data
            chunk = buffer
        else:
            chunk = data  # the common case: decode straight from the caller's bytes
        frames: list[Frame] = []
        pos = 0
        size = len(chunk)
        with memoryview(chunk) as view:
            while size - pos >= 4:
                (total_size,) = _U32.unpack_from(view, pos)
                if total_size > self.max_frame_size:
                    raise FrameTooLargeError(
                        f"total_size {total_size} exceeds the maximum frame size "
                        f"{self.max_frame_size}"
                    )
                if total_size < 4:
                    raise MalformedFrameError(
                        f"total_size {total_size} is below 4, too small for command_size"
                    )
                end = pos + 4 + total_size
                if end > size:
                    break
                frames.append(_decode_frame(view, pos + 4, end))
                pos = end
        # One move of the incomplete tail per call keeps buffering linear in the input.
        if chunk is buffer:
            del buffer[:pos]
        else:
            buffer += memoryview(data)[pos:]
        return frames

    def eof(self) -> None:
        """Signal the end of the stream; raise if it ended inside a frame."""
        buffered = len(self._buffer)
        if not buffered:
            return
        expected = ""
        if buffered >= 4:
            expected = f" of a {4 + _U32.unpack_from(self._buffer)[0]}-byte frame"
        raise TruncatedFrameError(f"stream ended after {buffered} bytes{expected}")


def _decode_frame(view: memoryview, start: int, end: int) -> Frame:
    """Decode the frame whose bytes after total_size are ``view[start:end]``."""
    (command_size,) = _U32.unpack_from(view, start)
    command_end = start + 4 + command_size
    if command_end > end:
        raise MalformedFrameError(
            f"command_size {command_size} exceeds total_size {end - start} - 4"
        )
    command = _parse(pb.BaseCommand, view[start + 4 : command_end])
    if not command.HasField("type"):
        raise MalformedFrameError(
            f"BaseCommand ({command_size} bytes) has no type, or one this client does not know"
        )
    if command_end == end:
        return Frame(command)
    # Like the Java decoder, trust the sizes rather than the type: whatever follows the
    # command is a payload section.
    return _decode_payload(command, view, command_end, end)


def _decode_payload(command: pb.BaseCommand, view: memoryview, pos: int, end: int) -> Frame:
    """Decode the payload section ``view[pos:end]`` that follows ``command``.

    Without a magic the section starts with metadata_size, whose high half could read as a
    magic only for metadata over 235 MB, far above any frame limit: no ambiguity.
    """
    broker_entry_metadata = None
    entry_metadata_size = _tagged_u32(view, pos, end, MAGIC_BROKER_ENTRY_METADATA)
    if entry_metadata_size is not None:
        entry_metadata_end = pos + 6 + entry_metadata_size
        if entry_metadata_end > end:
            raise MalformedFrameError(
                f"broker entry metadata size {entry_metadata_size} overflows the frame: "
                f"{end - pos - 6} bytes left"
            )
        broker_entry_metadata = _parse(pb.BrokerEntryMetadata, view[pos + 6 : entry_metadata_end])
        pos = entry_metadata_end

    checksum = _tagged_u32(view, pos, end, MAGIC_CRC32C)
    if checksum is not None:
        pos += 6

    if end - pos < 4:
        raise MalformedFrameError(
            f"payload section has {end - pos} bytes left for the 4-byte metadata_size"
        )
    (metadata_size,) = _U32.unpack_from(view, pos)
    metadata_end = pos + 4 + metadata_size
    if metadata_end > end:
        raise MalformedFrameError(
            f"metadata_size {metadata_size} overflows the frame: {end - pos - 4} bytes left"
        )
    payload = bytes(view[metadata_end:end])
    if checksum is not None:
        # google_crc32c takes only bytes, so copy the small metadata part; the payload copy
        # is the one the frame keeps anyway.
        computed: int = google_crc32c.extend(
            google_crc32c.value(bytes(view[pos:metadata_end])), payload
        )
        if computed != checksum:
            error = ChecksumMismatchError(
                f"CRC32C mismatch: frame says 0x{checksum:08x}, computed 0x{computed:08x} "
                f"over {end - pos} bytes of metadata and payload"
            )
            if command.type != pb.BaseCommand.MESSAGE:
                raise error
            return Frame(command, None, payload, broker_entry_metadata, error)
    metadata = _parse(pb.MessageMetadata, view[pos + 4 : metadata_end])
    return Frame(command, metadata, payload, broker_entry_metadata)


def _tagged_u32(view: memoryview, pos: int, end: int, magic: int) -> int | None:
    """The u32 following ``magic`` at ``pos``, or None if the bytes there are not ``magic``."""
    if end - pos < 2 or _U16.unpack_from(view, pos)[0] != magic:
        return None
    if end - pos < 6:
        raise MalformedFrameError(
            f"magic 0x{magic:04x} with only {end - pos - 2} of its 4 value bytes in the frame"
        )
    value: int = _MAGIC_U32.unpack_from(view, pos)[1]
    return value


def _parse(cls: type[_M], data: memoryview) -> _M:
    """Parse ``data`` as a ``cls`` message.

    Required fields are not checked: upb does not, and IsInitialized() costs more than the
    parse itself. Handlers read the fields they need; BaseCommand.type is checked above.
    """
    try:
        return cls.FromString(data)  # type: ignore[arg-type]  # upb takes any buffer
    except DecodeError as exc:
        raise MalformedFrameError(f"undecodable {cls.__name__} ({len(data)} bytes): {exc}") from exc
