"""Kafka framing (protocols/kafkawire/framing.py): size-prefixed frames round-trip through any
chunking; random, mutated and lying bytes into the FrameDecoder and into decode_response
(every response the client reads, at every version it speaks) give only ProtocolError."""

from __future__ import annotations

import contextlib
import importlib
import struct
import warnings
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import FrameTooLargeError, MalformedFrameError, ProtocolError
from protocols.kafkawire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    correlation_id,
    decode_response,
)
from tests.fuzz.strategies import KIB, bounded, chunked, examples, mutated, text

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchResponse
    from kafka.protocol.metadata import MetadataResponse

    from protocols.kafkawire.api import SUPPORTED

# kafka-python loads its message schemas lazily, through a deprecated importlib call.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _response_class(request_class: Any) -> Any:
    module = importlib.import_module(request_class.__module__)
    return getattr(module, request_class.__name__.replace("Request", "Response"))


# Every (response class, version) the adapter decodes.
RESPONSES = [
    (_response_class(request), version)
    for request, (low, high) in SUPPORTED.items()
    for version in range(low, high + 1)
]


def _warm_up() -> None:
    """Decode each response once: kafka-python builds and caches its decoders on first use,
    which the memory bound of a fuzz example must not be charged with."""
    for response_class, version in RESPONSES:
        response = response_class(version=version)
        response.with_header(correlation_id=1)
        response_class.decode(bytes(response.encode(header=True)), version=version, header=True)
        for data in (b"", b"\x00" * 64, b"\xff" * 64):
            with contextlib.suppress(Exception):
                response_class.decode(data, version=version, header=True)


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    _warm_up()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    decoder.eof()
    return out


# -- frames --------------------------------------------------------------------------------


@settings(max_examples=examples(0.15))
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8), st.lists(st.integers(0, 4096)))
def test_frames_round_trip_through_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(map(frame, payloads))
    assert feed_all(FrameDecoder(), chunked(stream, cuts)) == payloads


def decode_bounded(chunks: list[bytes], max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
    # Frames are copies of the input; the buffer holds at most the input.
    size = sum(map(len, chunks))
    bounded(
        lambda: feed_all(FrameDecoder(max_frame_size), chunks),
        ProtocolError,
        4 * size + 64 * 40 * (size // 4 + 1) + 16 * KIB,
    )


@settings(max_examples=examples(0.1))
@given(st.binary(max_size=2048), st.lists(st.integers(0, 4096), max_size=6))
@example(b"\xff\xff\xff\xff", [])
@example(b"\x7f\xff\xff\xff", [])
@example(b"\x80\x00\x00\x00", [])
def test_random_bytes_raise_only_protocol_errors(data: bytes, cuts: list[int]) -> None:
    decode_bounded(chunked(data, cuts))


@settings(max_examples=examples(0.15))
@given(st.lists(st.binary(max_size=100), min_size=1, max_size=4), st.data())
def test_mutated_streams_raise_only_protocol_errors(
    payloads: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(map(frame, payloads))
    offsets, at = [], 0
    for payload in payloads:
        offsets.append((at, 4))
        at += 4 + len(payload)
    bad = data.draw(mutated(stream, offsets))
    cuts = data.draw(st.lists(st.integers(0, 4096), max_size=4))
    limit = data.draw(st.sampled_from([DEFAULT_MAX_FRAME_SIZE, 16, 2**31 - 1]))
    decode_bounded(chunked(bad, cuts), limit)


@settings(max_examples=examples(0.05))
@given(
    st.sampled_from([DEFAULT_MAX_FRAME_SIZE + 1, 2**31 - 1, -1, -(2**31)]),
    st.binary(max_size=64),
)
def test_a_lying_size_fails_before_anything_is_buffered(size: int, rest: bytes) -> None:
    outcome = bounded(
        lambda: FrameDecoder().feed(struct.pack(">i", size) + rest), ProtocolError, 4 * KIB
    )
    expected = FrameTooLargeError if size > 0 else MalformedFrameError
    assert isinstance(outcome.error, expected)


@settings(max_examples=examples(0.05))
@given(st.binary(max_size=4096))
def test_a_2_gib_frame_under_a_raised_limit_buffers_only_what_arrived(rest: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=2**31 - 1)
    head = struct.pack(">i", 2**31 - 1) + rest
    outcome = bounded(lambda: decoder.feed(head), ProtocolError, 2 * len(head) + 4 * KIB)
    assert outcome.result == []


# -- responses -----------------------------------------------------------------------------

RESPONSE = st.sampled_from(RESPONSES)
# kafka-python builds a response object per field: bound the cost per input byte.
RESPONSE_PER_BYTE, RESPONSE_FIXED = 256, 64 * KIB


def decode_response_bounded(response: tuple[Any, int], data: bytes) -> None:
    response_class, version = response
    bounded(
        lambda: decode_response(response_class, version, data),
        MalformedFrameError,
        RESPONSE_PER_BYTE * len(data) + RESPONSE_FIXED,
    )
    bounded(lambda: correlation_id(data), MalformedFrameError, 4 * KIB)


@settings(max_examples=examples(0.15))
@given(RESPONSE, st.binary(max_size=512))
def test_random_responses_raise_only_malformed_frame_errors(
    response: tuple[Any, int], data: bytes
) -> None:
    decode_response_bounded(response, data)


@st.composite
def valid_responses(draw: st.DrawFn) -> tuple[tuple[Any, int], bytes]:
    """A response the broker could send, encoded: metadata and fetch with content, the
    others as their defaults."""
    response_class, version = draw(RESPONSE)
    if response_class is MetadataResponse:
        Topic = MetadataResponse.MetadataResponseTopic
        response = MetadataResponse(
            throttle_time_ms=0,
            brokers=[
                MetadataResponse.MetadataResponseBroker(
                    node_id=draw(st.integers(0, 9)), host=draw(text()), port=9092, rack=None
                )
            ],
            cluster_id=draw(text()),
            controller_id=1,
            topics=[
                Topic(
                    error_code=0,
                    name=draw(text()),
                    partitions=[
                        Topic.MetadataResponsePartition(
                            error_code=0,
                            partition_index=p,
                            leader_id=1,
                            leader_epoch=0,
                            replica_nodes=[1],
                            isr_nodes=[1],
                            offline_replicas=[],
                        )
                        for p in range(draw(st.integers(0, 3)))
                    ],
                )
            ],
            version=version,
        )
    elif response_class is FetchResponse:
        Topic = FetchResponse.FetchableTopicResponse
        response = FetchResponse(
            throttle_time_ms=0,
            responses=[
                Topic(
                    topic=draw(text()),
                    partitions=[
                        Topic.PartitionData(
                            partition_index=0,
                            error_code=0,
                            high_watermark=draw(st.integers(0, 2**40)),
                            records=draw(st.binary(max_size=200)),
                        )
                    ],
                )
            ],
            version=version,
        )
    else:
        response = response_class(version=version)
    response.with_header(correlation_id=draw(st.integers(0, 2**31 - 1)))
    return (response_class, version), bytes(response.encode(header=True))


@settings(max_examples=examples(0.35))
@given(valid_responses(), st.data())
def test_mutated_responses_raise_only_malformed_frame_errors(
    valid: tuple[tuple[Any, int], bytes], data: st.DataObject
) -> None:
    response, encoded = valid
    decode_response_bounded(response, data.draw(mutated(encoded)))
