"""KafkaSession: the Kafka half of one connection.

Kafka answers every request in the order sent, tagged with the request's correlation id and
nothing else: the session remembers, per correlation id, which response class and version
to decode with. Bytes go through the sans-IO FrameDecoder; each answer completes the
connection's request future. Everything here runs on the event loop, no awaits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from msgclient.core.network.connection import Connection
from msgclient.errors import ConnectionClosedError, MalformedFrameError
from protocols.kafkawire.api import ApiVersionTable
from protocols.kafkawire.framing import (
    FrameDecoder,
    correlation_id,
    decode_response,
    encode_request,
)
from protocols.kafkawire.produce_request import TopicBatches, encode_produce_request

KafkaConnection = Connection["KafkaSession"]

_DISCARD = object()  # the answer to a keepalive probe: nobody waits for it


class KafkaSession:
    """Requests out, responses in, for one connection (``connection.session``)."""

    def __init__(self, connection: KafkaConnection, client_id: str = "msgclient") -> None:
        self.connection = connection
        self.client_id = client_id
        self.versions: ApiVersionTable | None = None  # set once ApiVersions is answered
        self._decoder = FrameDecoder()
        # correlation id -> (response class, version, _DISCARD or None), in the order sent
        self._expected: dict[int, tuple[Any, int, object]] = {}

    # -- requests -----------------------------------------------------------------------

    def request(self, request: Any, version: int | None = None, *, timed: bool = True) -> Any:
        """Send ``request`` at the negotiated version (or ``version``); an awaitable of the
        decoded response. It fails as ``Connection.request`` does."""
        frame, correlation, response_class, version = self._encode(request, version)
        self._expected[correlation] = (response_class, version, None)
        return self.connection.request(correlation, frame, timed=timed)

    def send(self, request: Any, version: int | None = None) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        frame, _, _, _ = self._encode(request, version)
        self.connection.write(frame)

    def produce(
        self, acks: int, timeout_ms: int, topics: Sequence[TopicBatches]
    ) -> asyncio.Future[Any] | None:
        """Send a Produce request of these record batches (encoded here, without copying
        them); an awaitable of the ProduceResponse, or None with acks=0 (no answer)."""
        assert self.versions is not None, "request before the ApiVersions handshake"
        version = self.versions.version(ProduceRequest)
        correlation = self.connection.new_request_id()
        pieces = encode_produce_request(
            version, correlation, self.client_id, acks, timeout_ms, topics
        )
        if acks == 0:
            self.connection.write(pieces)
            return None
        self._expected[correlation] = (ProduceResponse, version, None)
        return self.connection.request(correlation, pieces)

    def _encode(self, request: Any, version: int | None) -> tuple[bytes, int, Any, int]:
        if version is None:
            assert self.versions is not None, "request before the ApiVersions handshake"
            version = self.versions.version(type(request))
        correlation = self.connection.new_request_id()
        frame = encode_request(request, version, correlation, self.client_id)
        return frame, correlation, request.header.get_response_class()[None], version

    # -- ProtocolSession ----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        for frame in self._decoder.feed(data):
            correlation = correlation_id(frame)
            expected = self._expected.pop(correlation, None)
            if expected is None:
                raise MalformedFrameError(
                    f"response with correlation id {correlation}, which no request carried"
                )
            response_class, version, marker = expected
            response = decode_response(response_class, version, frame)
            if marker is not _DISCARD:
                self.connection.resolve(correlation, response)

    def eof_received(self) -> None:
        self._decoder.eof()

    def keepalive_probe(self) -> bytes:
        # Kafka has no ping: ApiVersions is the cheapest request every broker answers.
        request = ApiVersionsRequest(version=0)
        frame, correlation, response_class, version = self._encode(request, 0)
        self._expected[correlation] = (response_class, version, _DISCARD)
        return frame

    def connection_lost(self, error: ConnectionClosedError) -> None:
        # The connection fails the request futures; listeners watch ``connection.closed``.
        self._expected.clear()
