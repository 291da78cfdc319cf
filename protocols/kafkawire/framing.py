"""Kafka framing, sans-IO: size-prefixed frames in, requests out.

Every Kafka frame is ``[int32 size][payload]``. Responses carry no type: the client knows it
from the correlation id of the request it sent, so decoding a response needs the request's
class and version. The envelopes (headers and bodies) are kafka-python's protocol classes,
generated from Kafka's own JSON message schemas; the record batches inside Produce and Fetch
are opaque bytes here (see ``records.py``).
"""

from __future__ import annotations

import struct
from typing import Any

from msgclient.errors import FrameTooLargeError, MalformedFrameError, TruncatedFrameError

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
# Fetch responses are bounded by fetch_max_bytes (50 MiB by default); leave room for headers.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


def encode_request(request: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    """A framed request: size, header v1/v2 (flexible versions add tagged fields), body."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def correlation_id(frame: bytes) -> int:
    """The correlation id that starts every response header."""
    if len(frame) < _CORRELATION.size:
        raise MalformedFrameError(f"a response frame of {len(frame)} bytes has no header")
    return int(_CORRELATION.unpack_from(frame)[0])


def decode_response(response_class: Any, version: int, frame: bytes) -> Any:
    """The response in ``frame`` (header included); MalformedFrameError if it does not parse."""
    try:
        return response_class.decode(frame, version=version, header=True)
    except Exception as error:  # kafka-python raises struct.error, ValueError, IndexError...
        raise MalformedFrameError(
            f"cannot decode {response_class.name} v{version} ({len(frame)} bytes): {error!r}"
        ) from error


class FrameDecoder:
    """Splits a byte stream into frames; ``feed`` returns the complete ones."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0:
                raise MalformedFrameError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLargeError(
                    f"frame of {size} bytes is over the limit of {self.max_frame_size}"
                )
            if end - start - 4 < size:
                break
            frames.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]
        return frames

    def eof(self) -> None:
        if self._buffer:
            raise TruncatedFrameError(
                f"connection closed with {len(self._buffer)} bytes of an unfinished frame"
            )
