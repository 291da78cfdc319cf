"""Kafka framing, sans-IO: size-prefixed frames in, requests out.

Every Kafka frame is ``[int32 size][payload]``. Responses carry no type: the client knows it
from the correlation id of the request it sent, so decoding a response needs the request's
class and version. The envelopes (headers and bodies) are kafka-python's protocol classes,
generated from Kafka's own JSON message schemas; the record batches inside Produce and Fetch
are opaque bytes here (see the ``records`` package).
"""

from __future__ import annotations

import struct
from collections import deque
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
    """Splits a byte stream into frames; ``feed`` returns the complete ones.

    The bytes of an unfinished frame wait as the chunks they came in, joined once when the
    frame is complete: a Fetch response of megabytes comes in many reads, and a growing
    buffer would copy it again at each (and again to cut the frame out of it).
    """

    __slots__ = ("_buffered", "_chunks", "_offset", "_size", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # where the unread bytes of the first chunk start
        self._buffered = 0  # unread bytes in all chunks
        self._size = -1  # the size of the frame being received; -1: its size is still unread

    def feed(self, data: bytes) -> list[bytes]:
        if not data:
            return []
        self._chunks.append(data)
        self._buffered += len(data)
        frames: list[bytes] = []
        while True:
            if self._size < 0:
                if self._buffered < 4:
                    break
                (size,) = _SIZE.unpack(self._take(4))
                if size < 0:
                    raise MalformedFrameError(f"negative frame size {size}")
                if size > self.max_frame_size:
                    raise FrameTooLargeError(
                        f"frame of {size} bytes is over the limit of {self.max_frame_size}"
                    )
                self._size = size
            if self._buffered < self._size:
                break
            frames.append(self._take(self._size))
            self._size = -1
        return frames

    def _take(self, count: int) -> bytes:
        """The next ``count`` unread bytes (as many are buffered), read."""
        chunks, start = self._chunks, self._offset
        self._buffered -= count
        if not count:
            return b""
        first = chunks[0]
        end = start + count
        if end <= len(first):  # within the first chunk: small frames, size prefixes
            piece = first[start:end]
            if end == len(first):
                chunks.popleft()
                end = 0
            self._offset = end
            return piece
        pieces = [first[start:]]
        chunks.popleft()
        left = count - len(pieces[0])
        while left >= len(chunks[0]):  # whole chunks: copied once, by the join
            left -= len(chunks[0])
            pieces.append(chunks.popleft())
            if not left:
                break
        if left:
            pieces.append(chunks[0][:left])
        self._offset = left
        return b"".join(pieces)

    def eof(self) -> None:
        unread = self._buffered + (4 if self._size >= 0 else 0)
        if unread:
            raise TruncatedFrameError(
                f"connection closed with {unread} bytes of an unfinished frame"
            )
