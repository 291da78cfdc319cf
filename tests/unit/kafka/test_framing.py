"""Kafka framing and version negotiation, driven with bytes: no sockets."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from msgclient.errors import FrameTooLargeError, MalformedFrameError, TruncatedFrameError
from protocols.kafkawire.api import SUPPORTED, ApiVersionTable, UnsupportedVersionError
from protocols.kafkawire.framing import (
    FrameDecoder,
    correlation_id,
    decode_response,
    encode_request,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_and_within_reads() -> None:
    decoder = FrameDecoder()
    stream = (
        frame(b"\x00\x00\x00\x01abc") + frame(b"\x00\x00\x00\x02") + frame(b"\x00\x00\x00\x03z")
    )
    out: list[bytes] = []
    for i in range(0, len(stream), 3):
        out += decoder.feed(stream[i : i + 3])
    assert [correlation_id(f) for f in out] == [1, 2, 3]
    assert out[0] == b"\x00\x00\x00\x01abc"
    decoder.eof()


def test_bad_sizes_and_truncation_are_typed_errors() -> None:
    with pytest.raises(MalformedFrameError, match="negative frame size"):
        FrameDecoder().feed(struct.pack(">i", -5))
    with pytest.raises(FrameTooLargeError):
        FrameDecoder(max_frame_size=10).feed(struct.pack(">i", 11))
    decoder = FrameDecoder()
    decoder.feed(frame(b"\x00\x00\x00\x01abc")[:-1])
    with pytest.raises(TruncatedFrameError):
        decoder.eof()
    with pytest.raises(MalformedFrameError, match="no header"):
        correlation_id(b"\x00\x01")


def test_request_round_trip_and_a_garbled_response() -> None:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    data = encode_request(request, 9, 42, "me")
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    api_key, version, correlation = struct.unpack_from(">hhi", data, 4)
    assert (api_key, version, correlation) == (MetadataRequest.API_KEY, 9, 42)
    response = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0, version=3)
    response.with_header(correlation_id=7)
    body = bytes(response.encode(header=True))
    assert decode_response(ApiVersionsResponse, 3, body).error_code == 0
    with pytest.raises(MalformedFrameError, match="cannot decode"):
        decode_response(MetadataRequest, 9, b"\x00\x00\x00\x07\xff")


def test_negotiation_takes_the_highest_common_version() -> None:
    low, high = SUPPORTED[MetadataRequest]
    table = ApiVersionTable({MetadataRequest.API_KEY: (0, high + 5)}, "b:9092")
    assert table.version(MetadataRequest) == high
    table = ApiVersionTable({MetadataRequest.API_KEY: (0, low + 1)}, "b:9092")
    assert table.version(MetadataRequest) == low + 1


def test_a_broker_too_old_or_without_the_api_is_named() -> None:
    low, _ = SUPPORTED[MetadataRequest]
    table = ApiVersionTable({MetadataRequest.API_KEY: (0, low - 1)}, "old:9092")
    with pytest.raises(UnsupportedVersionError, match=r"old:9092 supports Metadata v0-"):
        table.version(MetadataRequest)
    assert not table.supports(MetadataRequest)
    with pytest.raises(UnsupportedVersionError, match="does not support ApiVersions"):
        table.version(ApiVersionsRequest)
