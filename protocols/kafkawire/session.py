"""KafkaSession: the Kafka half of one connection, sans-IO (as h11 is).

Kafka answers every request in the order sent, tagged with the request's correlation id and
nothing else: the session numbers the requests it encodes and remembers, per correlation
id, which response class and version to decode the answer with. Bytes in
(``receive_data``), each decoded answer out as an event for the connection; the bytes of a
request go back to the caller to write. No socket, no loop, no futures:
``KafkaConnection`` (connection.py) does the I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from msgclient.core.network.events import Answer
from msgclient.errors import ConnectionClosedError, MalformedFrameError
from protocols.kafkawire.api import ApiVersionTable
from protocols.kafkawire.framing import (
    FrameDecoder,
    correlation_id,
    decode_response,
    encode_request,
)
from protocols.kafkawire.produce_request import TopicBatches, encode_produce_request


class KafkaSession:
    """Requests out, responses in, for one connection (``connection.session``)."""

    def __init__(self, client_id: str = "msgclient") -> None:
        self.client_id = client_id
        self.versions: ApiVersionTable | None = None  # set once ApiVersions is answered
        self._decoder = FrameDecoder()
        self._correlation_ids = itertools.count()
        # correlation id -> (response class, version, discard the answer), in the order sent
        self._expected: dict[int, tuple[Any, int, bool]] = {}

    # -- requests -----------------------------------------------------------------------

    def encode_request(self, request: Any, version: int | None = None) -> tuple[int, bytes]:
        """Frame ``request`` at the negotiated version (or ``version``) and expect its answer:
        its correlation id and the bytes to write."""
        if version is None:
            assert self.versions is not None, "request before the ApiVersions handshake"
            version = self.versions.version(type(request))
        correlation = next(self._correlation_ids)
        frame = encode_request(request, version, correlation, self.client_id)
        self._expected[correlation] = (request.header.get_response_class()[None], version, False)
        return correlation, frame

    def encode_produce(
        self,
        acks: int,
        timeout_ms: int,
        topics: Sequence[TopicBatches],
        transactional_id: str | None = None,
    ) -> tuple[int, list[bytes]]:
        """Frame a Produce request of these record batches (without copying them): its
        correlation id and the pieces to write, in order. With acks=0 the broker does not
        answer, and no answer is expected."""
        assert self.versions is not None, "request before the ApiVersions handshake"
        version = self.versions.version(ProduceRequest)
        correlation = next(self._correlation_ids)
        pieces = encode_produce_request(
            version, correlation, self.client_id, acks, timeout_ms, topics, transactional_id
        )
        if acks != 0:
            self._expected[correlation] = (ProduceResponse, version, False)
        return correlation, pieces

    # -- ProtocolSession ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> Iterator[Answer]:
        """Decode the responses ``data`` completes; an Answer for each (by correlation id),
        yielded as it goes: the answers before a frame that breaks the protocol come out."""
        for frame in self._decoder.feed(data):
            correlation = correlation_id(frame)
            expected = self._expected.pop(correlation, None)
            if expected is None:
                raise MalformedFrameError(
                    f"response with correlation id {correlation}, which no request carried"
                )
            response_class, version, discard = expected
            response = decode_response(response_class, version, frame)
            if not discard:
                yield Answer(correlation, response)

    def receive_eof(self) -> None:
        self._decoder.eof()

    def keepalive_probe(self) -> bytes:
        # Kafka has no ping: ApiVersions is the cheapest request every broker answers, and
        # nobody waits for this answer.
        correlation, frame = self.encode_request(ApiVersionsRequest(version=0), 0)
        response_class, version, _ = self._expected[correlation]
        self._expected[correlation] = (response_class, version, True)
        return frame

    def connection_lost(self, error: ConnectionClosedError) -> None:
        # The connection fails the request futures; listeners watch ``connection.closed``.
        self._expected.clear()
