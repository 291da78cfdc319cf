"""KafkaSession as byte conversations: request bytes out, response bytes in, events out.

Requests are encoded by the session, responses with kafka-python's protocol classes as a
broker sends them; no socket.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from msgclient.core.network.events import Answer
from msgclient.errors import ConnectionClosedError, MalformedFrameError, TruncatedFrameError
from protocols.kafkawire.api import ApiVersionTable
from protocols.kafkawire.session import KafkaSession

CLIENT_ID = "client-1"
_HEADER = struct.Struct(">ihhih")  # size, api key, api version, correlation id, client id size


def negotiated() -> KafkaSession:
    """A session past ApiVersions, with a broker that speaks ApiVersions v0-3, SaslHandshake
    v0-1 and Produce v3-9."""
    session = KafkaSession(CLIENT_ID)
    session.versions = ApiVersionTable(
        {
            ApiVersionsRequest.API_KEY: (0, 3),
            SaslHandshakeRequest.API_KEY: (0, 1),
            ProduceRequest.API_KEY: (3, 9),
        },
        "broker-1:9092",
    )
    return session


def header(data: bytes) -> tuple[int, int, int]:
    """(api key, version, correlation id) of a request's bytes, checked for size and client."""
    size, api_key, version, correlation, client_size = _HEADER.unpack_from(data)
    assert size == len(data) - 4
    assert data[_HEADER.size : _HEADER.size + client_size] == CLIENT_ID.encode()
    return api_key, version, correlation


def response(message: Any, version: int, correlation: int) -> bytes:
    """What a broker writes: ``message`` at ``version``, framed with its header."""
    message.API_VERSION = version
    message.with_header(correlation_id=correlation)
    return bytes(message.encode(header=True, framed=True))


def api_versions(version: int, correlation: int) -> bytes:
    answer = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
    return response(answer, version, correlation)


def handshake(correlation: int, mechanisms: list[str]) -> bytes:
    answer = SaslHandshakeResponse(error_code=0, mechanisms=mechanisms)
    return response(answer, 1, correlation)


def produced(version: int, correlation: int, base_offset: int) -> bytes:
    Partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    partition = Partition(
        index=0,
        error_code=0,
        base_offset=base_offset,
        log_append_time_ms=-1,
        log_start_offset=0,
        record_errors=[],
        error_message=None,
    )
    topic = ProduceResponse.TopicProduceResponse(name="t", partition_responses=[partition])
    return response(ProduceResponse(responses=[topic], throttle_time_ms=0), version, correlation)


def receive(session: KafkaSession, data: bytes) -> list[Answer]:
    return list(session.receive_data(data))


def decoded(answer: Answer) -> Any:
    """The kafka-python response an answer carries."""
    return answer.result


def test_answers_are_decoded_by_their_correlation_id() -> None:
    session = negotiated()
    first, versions_request = session.encode_request(ApiVersionsRequest())
    second, handshake_request = session.encode_request(SaslHandshakeRequest(mechanism="PLAIN"))
    assert header(versions_request) == (ApiVersionsRequest.API_KEY, 3, first)
    assert header(handshake_request) == (SaslHandshakeRequest.API_KEY, 1, second)
    assert first != second
    (answer,) = receive(session, api_versions(3, first))
    assert answer.request_id == first
    assert decoded(answer).error_code == 0
    (answer,) = receive(session, handshake(second, ["PLAIN", "SCRAM-SHA-256"]))
    assert answer.request_id == second
    assert decoded(answer).mechanisms == ["PLAIN", "SCRAM-SHA-256"]


def test_a_version_asked_for_is_the_requests_and_its_answers() -> None:
    """Before ApiVersions is answered, the handshake names its version; the answer is
    decoded at it (a v0 answer read as v3 would not parse)."""
    session = KafkaSession(CLIENT_ID)
    correlation, data = session.encode_request(ApiVersionsRequest(), 0)
    assert header(data) == (ApiVersionsRequest.API_KEY, 0, correlation)
    (answer,) = receive(session, api_versions(0, correlation))
    assert answer.request_id == correlation
    assert decoded(answer).error_code == 0


def test_an_answer_no_request_carried_is_malformed() -> None:
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    with pytest.raises(MalformedFrameError, match=f"correlation id {correlation + 1},"):
        receive(session, api_versions(3, correlation + 1))


def test_an_answer_comes_once() -> None:
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    assert len(receive(session, api_versions(3, correlation))) == 1
    with pytest.raises(MalformedFrameError, match="which no request carried"):
        receive(session, api_versions(3, correlation))


def test_an_answer_that_does_not_parse_is_malformed() -> None:
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    body = struct.pack(">i", correlation) + b"\xff"
    with pytest.raises(MalformedFrameError, match="cannot decode ApiVersionsResponse v3"):
        receive(session, struct.pack(">i", len(body)) + body)


def test_the_answer_to_a_keepalive_probe_is_discarded() -> None:
    session = negotiated()
    pending, _ = session.encode_request(ApiVersionsRequest())
    probe = session.keepalive_probe()
    api_key, version, correlation = header(probe)
    assert (api_key, version) == (ApiVersionsRequest.API_KEY, 0)
    assert correlation != pending
    assert receive(session, api_versions(0, correlation)) == []
    (answer,) = receive(session, api_versions(3, pending))  # the others still count
    assert answer.request_id == pending


def test_produce_with_acks_expects_the_answer() -> None:
    session = negotiated()
    correlation, pieces = session.encode_produce(1, 30_000, [("t", [(0, b"batch")])])
    data = b"".join(pieces)
    assert header(data) == (ProduceRequest.API_KEY, 9, correlation)
    sent = ProduceRequest.decode(data[4:], version=9, header=True)
    assert sent.acks == 1
    assert sent.timeout_ms == 30_000
    (answer,) = receive(session, produced(9, correlation, base_offset=41))
    assert answer.request_id == correlation
    (topic,) = decoded(answer).responses
    assert [(p.index, p.base_offset) for p in topic.partition_responses] == [(0, 41)]


def test_produce_without_acks_expects_nothing() -> None:
    session = negotiated()
    correlation, pieces = session.encode_produce(0, 30_000, [("t", [(0, b"batch")])])
    assert header(b"".join(pieces)) == (ProduceRequest.API_KEY, 9, correlation)
    following, _ = session.encode_request(ApiVersionsRequest())
    assert following != correlation
    with pytest.raises(MalformedFrameError, match="which no request carried"):
        receive(session, produced(9, correlation, base_offset=0))


def test_frames_split_across_reads() -> None:
    session = negotiated()
    first, _ = session.encode_request(ApiVersionsRequest())
    second, _ = session.encode_request(SaslHandshakeRequest(mechanism="PLAIN"))
    stream = api_versions(3, first) + handshake(second, ["PLAIN"])
    answers: list[Answer] = []
    for i in range(len(stream)):
        answers += receive(session, stream[i : i + 1])
        if i < len(api_versions(3, first)) - 1:
            assert answers == []
    assert [a.request_id for a in answers] == [first, second]
    session.receive_eof()  # nothing left over


def test_answers_before_a_bad_frame_come_out_first() -> None:
    """The connection completes each answer before the session reads the next frame, so an
    answer in the same read as bytes that break the protocol is not lost."""
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    events = session.receive_data(api_versions(3, correlation) + api_versions(3, 99))
    assert next(events).request_id == correlation
    with pytest.raises(MalformedFrameError):
        next(events)


def test_eof_inside_a_frame_is_a_truncated_frame() -> None:
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    data = api_versions(3, correlation)
    assert receive(session, data[:-3]) == []
    with pytest.raises(TruncatedFrameError, match="unfinished frame"):
        session.receive_eof()


def test_a_lost_connection_forgets_the_requests() -> None:
    session = negotiated()
    correlation, _ = session.encode_request(ApiVersionsRequest())
    session.connection_lost(ConnectionClosedError("gone"))
    with pytest.raises(MalformedFrameError, match="which no request carried"):
        receive(session, api_versions(3, correlation))
