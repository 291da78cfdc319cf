"""KafkaConnection: the I/O half of a Kafka connection.

The core Connection writes, times requests out and completes their futures from the
session's Answer events; this class writes what the KafkaSession encodes: a request whose
answer is awaited, or a Produce request, awaited unless acks=0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from msgclient.core.network.connection import Connection
from protocols.kafkawire.produce_request import TopicBatches
from protocols.kafkawire.session import KafkaSession


class KafkaConnection(Connection[KafkaSession]):
    """One socket to a broker and its KafkaSession."""

    def __init__(
        self,
        *,
        address: str,
        operation_timeout: float,
        keepalive_interval: float,
        client_id: str = "msgclient",
    ) -> None:
        super().__init__(
            KafkaSession(client_id),
            address=address,
            operation_timeout=operation_timeout,
            keepalive_interval=keepalive_interval,
        )

    def request(
        self, request: Any, version: int | None = None, *, timed: bool = True
    ) -> asyncio.Future[Any]:
        """Send ``request`` at the negotiated version (or ``version``); a future of the
        decoded response. It fails as ``send_request`` says."""
        correlation, frame = self.session.encode_request(request, version)
        return self.send_request(correlation, frame, timed=timed)

    def produce(
        self,
        acks: int,
        timeout_ms: int,
        topics: Sequence[TopicBatches],
        transactional_id: str | None = None,
    ) -> asyncio.Future[Any] | None:
        """Send a Produce request of these record batches; a future of the ProduceResponse,
        or None with acks=0 (no answer)."""
        correlation, pieces = self.session.encode_produce(
            acks, timeout_ms, topics, transactional_id
        )
        if acks == 0:
            self.write(pieces)
            return None
        return self.send_request(correlation, pieces)
