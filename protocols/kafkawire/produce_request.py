"""The Produce request, encoded by hand as a list of byte strings, sans-IO.

Every other request goes through kafka-python's classes (``framing.encode_request``); this
one carries the producer's record batches, which are already encoded and which the
producer keeps until the broker answers. kafka-python would copy them into its pooled
encode buffer (kept afterwards at the size of the largest request) and then into the frame.
Here the batches stay the caller's objects: the request is the small envelope pieces
between them, and the connection writes the pieces in order. A busy producer's request is
megabytes, so this saves two copies of everything in flight and most of the encoding time.

Layout (versions 3 to 12; flexible from 9: compact strings, arrays and bytes, and a tagged
field count after each structure):

    size int32, header (api_key int16, api_version int16, correlation_id int32,
    client_id nullable string [, tagged fields v9+]), transactional_id nullable string,
    acks int16, timeout_ms int32, [topic: name string, [partition: index int32, records
    nullable bytes]]
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from protocols.varint import uvarint

__all__ = ["MAX_PRODUCE_VERSION", "MIN_PRODUCE_VERSION", "encode_produce_request"]

PRODUCE_API_KEY = 0
MIN_PRODUCE_VERSION = 3  # record batches v2, transactional_id
MAX_PRODUCE_VERSION = 12  # v13 names topics by id
_FIRST_FLEXIBLE = 9

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_NO_TAGS = b"\x00"

# Record batches at least this long are their own piece; shorter ones are joined with the
# envelope around them (a piece is a transport write: a system call when the socket has room).
_OWN_PIECE = 32 * 1024

# (topic, [(partition, record batch)])
TopicBatches = tuple[str, Sequence[tuple[int, bytes]]]


def encode_produce_request(
    version: int,
    correlation_id: int,
    client_id: str,
    acks: int,
    timeout_ms: int,
    topics: Sequence[TopicBatches],
    transactional_id: str | None = None,
) -> list[bytes]:
    """The framed request as pieces to write in order: ``b"".join`` of them is the frame.
    A transactional producer's requests carry its ``transactional_id``."""
    if not MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        raise ValueError(f"Produce v{version} is not encoded here")
    flexible = version >= _FIRST_FLEXIBLE
    client = client_id.encode()
    head = bytearray(_HEADER.pack(PRODUCE_API_KEY, version, correlation_id, len(client)))
    head += client
    if flexible:
        head += _NO_TAGS  # header v2
    if transactional_id is None:
        head += uvarint(0) if flexible else _INT16.pack(-1)  # null (compact: length + 1)
    else:
        transactional = transactional_id.encode()
        head += _string_length(len(transactional), flexible)
        head += transactional
    head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    head += _count(len(topics), flexible)
    pieces: list[bytes] = []
    envelope = head  # the envelope bytes since the last piece
    size = 0
    for name, partitions in topics:
        topic = name.encode()
        envelope += _string_length(len(topic), flexible)
        envelope += topic
        envelope += _count(len(partitions), flexible)
        for partition, records in partitions:
            envelope += _INT32.pack(partition)
            envelope += _bytes_length(len(records), flexible)
            if len(records) >= _OWN_PIECE:
                pieces.append(bytes(envelope))
                pieces.append(records)
                size += len(envelope) + len(records)
                envelope = bytearray()
            else:
                envelope += records
            if flexible:
                envelope += _NO_TAGS  # partition
        if flexible:
            envelope += _NO_TAGS  # topic
    if flexible:
        envelope += _NO_TAGS  # request
    pieces.append(bytes(envelope))
    size += len(envelope)
    pieces[0] = _SIZE.pack(size) + pieces[0]
    return pieces


def _string_length(length: int, flexible: bool) -> bytes:
    # Compact lengths (flexible versions) are length + 1 as an unsigned varint.
    return uvarint(length + 1) if flexible else _INT16.pack(length)


def _bytes_length(length: int, flexible: bool) -> bytes:
    return uvarint(length + 1) if flexible else _INT32.pack(length)


def _count(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _INT32.pack(count)
