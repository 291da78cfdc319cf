"""Produce requests for one broker: the ready batches of every partition it leads, drained
into one request at a time (the Java client's Sender and RecordAccumulator.drain), and each
partition's answer handed back to the transport that wrote the batch.

A Produce request carries one acks value, one timeout and one transactional id for all its
batches, so each connection has a sender per (acks, in-flight bound, request size,
transactional id) that its producers use.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Protocol

from msgclient.contract import OpSend
from msgclient.errors import ConnectionClosedError, MessageEncodingError, MsgClientError
from msgclient.options import ProducerOptions
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.node_sender import NodeSender, ReadyBatch

log = logging.getLogger(__name__)


class PartitionWriter(Protocol):
    """The transport of one topic partition, as its batches' answers reach it."""

    topic: str
    partition: int
    # Counts the connections the partition attached to: a batch written on one it has left
    # since is dropped (the core writes it again on the new one).
    attachment: int

    def on_partition_answer(self, batch: ProduceBatch, code: int, base_offset: int) -> None:
        """The broker's answer for this partition's batch: an error code and base offset."""

    def on_request_failed(self, batch: ProduceBatch, error: MsgClientError) -> None:
        """No answer (a timeout, a lost connection, a request that could not be built)."""

    def on_sent_unacknowledged(self, batch: ProduceBatch) -> None:
        """acks=0: written is all the broker will say."""


class ProduceBatch(ReadyBatch):
    """An op on its way to the broker, remembering which attachment wrote it."""

    __slots__ = ("attachment", "op", "transport")

    def __init__(self, transport: PartitionWriter, op: OpSend, attachment: int) -> None:
        super().__init__((transport.topic, transport.partition), len(op.frame))
        self.transport = transport
        self.op = op
        self.attachment = attachment


ProduceSender = NodeSender[ProduceBatch]


class ProduceSenders:
    """The senders of one client's connections, by connection and settings."""

    def __init__(self) -> None:
        self._senders: dict[tuple[KafkaConnection, int, int, int, str | None], ProduceSender] = {}

    def get(self, connection: KafkaConnection, options: ProducerOptions) -> ProduceSender:
        """The connection's sender for producers with these settings."""
        key = (
            connection,
            options.acks,
            options.max_in_flight_requests_per_connection,
            options.max_request_size,
            options.transactional_id,
        )
        sender = self._senders.get(key)
        if sender is None:
            sender = self._senders[key] = _make_sender(connection, options)
            connection.closed.add_done_callback(lambda _: self._senders.pop(key, None))
        return sender


def _make_sender(connection: KafkaConnection, options: ProducerOptions) -> ProduceSender:
    """The sender of one connection for producers with these acks and limits."""
    acks = options.acks
    transactional_id = options.transactional_id
    timeout_ms = int(connection.operation_timeout * 1000)

    def send_request(batches: list[ProduceBatch]) -> asyncio.Future[Any] | None:
        # Batches queued for a connection their partition has left since: the core
        # writes them again on the new one.
        batches = [b for b in batches if b.attachment == b.transport.attachment]
        if not batches:
            return None
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        for batch in batches:
            transport = batch.transport
            by_topic.setdefault(transport.topic, []).append((transport.partition, batch.op.frame))
        answer = connection.produce(acks, timeout_ms, list(by_topic.items()), transactional_id)
        if answer is None:  # acks=0
            for batch in batches:
                batch.transport.on_sent_unacknowledged(batch)
            return None
        # A done callback, not a task: callbacks run in the order the answers resolve,
        # which is the order the broker sent them, so receipts reach the core in order.
        answer.add_done_callback(functools.partial(_on_answer, batches))
        return answer

    def request_failed(batches: list[ProduceBatch], error: Exception) -> None:
        log.error("cannot send a Produce request to %s", connection.address, exc_info=error)
        failure = MessageEncodingError(f"cannot send a Produce request: {error!r}")
        failure.__cause__ = error
        for batch in batches:
            batch.transport.on_request_failed(batch, failure)

    sender: ProduceSender = NodeSender(
        send_request,
        on_failure=request_failed,
        max_in_flight=options.max_in_flight_requests_per_connection,
        max_request_bytes=options.max_request_size,
        writable=lambda: connection.writable,
    )
    connection.on_writable(sender.wake)
    return sender


def _on_answer(batches: list[ProduceBatch], answer: asyncio.Future[Any]) -> None:
    if answer.cancelled():
        error: MsgClientError = ConnectionClosedError("the Produce request was cancelled")
    else:
        failure = answer.exception()
        if failure is None:
            _dispatch(batches, answer.result())
            return
        if not isinstance(failure, MsgClientError):
            log.error("Produce answer failed", exc_info=failure)
            error = ConnectionClosedError(f"the Produce request failed: {failure!r}")
        else:
            error = failure
    for batch in batches:
        batch.transport.on_request_failed(batch, error)


def _dispatch(batches: list[ProduceBatch], response: Any) -> None:
    results: dict[tuple[str, int], tuple[int, int]] = {
        (topic.name, p.index): (p.error_code, p.base_offset)
        for topic in response.responses
        for p in topic.partition_responses
    }
    for batch in batches:
        result = results.get((batch.transport.topic, batch.transport.partition))
        if result is None:
            missing = ConnectionClosedError(
                f"the Produce answer left out {batch.transport.topic}-{batch.transport.partition}"
            )
            batch.transport.on_request_failed(batch, missing)
        else:
            batch.transport.on_partition_answer(batch, *result)
