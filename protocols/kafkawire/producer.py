"""KafkaProducerTransport: one topic partition of a producer on Kafka.

The core's PartitionProducer batches, keeps the pending queue and its send timeout, and
resends everything pending after a reconnect. This transport encodes each op as a
RecordBatch v2 and hands it to the NodeSender of the partition leader's connection, which
drains the ready batches of every partition on that broker into one Produce request.

Idempotence (the default, as in Kafka 3+): an InitProducerId gives a producer id and epoch;
each record's sequence number is the core's sequence id less ``_sequence_base``, so a batch
resent after a lost connection carries the same numbers and the broker stores it once.
When the broker no longer knows the producer (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER,
INVALID_PRODUCER_EPOCH), the transport asks for a new producer id and numbers the pending
batches from 0 again; their stored frames are patched as they are written.

A "disconnect" here detaches this partition from its connection (Kafka connections are
shared by every partition on a broker): NOT_LEADER_OR_FOLLOWER for one partition must not
close the socket for the others.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
from itertools import repeat
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import InitProducerIdRequest

from msgclient.adapter import ProducerEvents, ProducerRegistration, ProducerTransport
from msgclient.core.network.sender import NodeSender, ReadyBatch
from msgclient.core.send.pending_queue import OpSend
from msgclient.errors import ConnectionClosedError, MessageEncodingError, MsgClientError
from msgclient.message import MessageId, OutgoingMessage
from msgclient.options import ProducerOptions
from protocols.kafkawire import errors
from protocols.kafkawire.compression import get_kafka_codec
from protocols.kafkawire.fetcher import DELIVER_AT_HEADER
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.records import encode_record_batch, with_producer_state
from protocols.kafkawire.session import KafkaConnection

if TYPE_CHECKING:
    from protocols.kafkawire.adapter import KafkaBackend

log = logging.getLogger(__name__)

# producerId (int64), producerEpoch (int16), baseSequence (int32) at byte 43 of a batch
_PRODUCER_STATE = struct.Struct(">qhi")
_PRODUCER_STATE_AT = 43
# The broker lost track of this producer's sequence: start a new producer id.
_RESET_ERRORS = frozenset(
    {
        errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        errors.UNKNOWN_PRODUCER_ID,
        errors.INVALID_PRODUCER_EPOCH,
    }
)


class ProduceBatch(ReadyBatch):
    """An op on its way to the broker, remembering which attachment wrote it."""

    __slots__ = ("attachment", "op", "transport")

    def __init__(self, transport: KafkaProducerTransport, op: OpSend, attachment: int) -> None:
        super().__init__((transport.topic, transport.partition), len(op.frame))
        self.transport = transport
        self.op = op
        self.attachment = attachment


ProduceSender = NodeSender[ProduceBatch]


class KafkaProducerTransport(ProducerTransport):
    def __init__(
        self,
        backend: KafkaBackend,
        topic: str,
        partition: int,
        options: ProducerOptions,
        events: ProducerEvents,
    ) -> None:
        self._backend = backend
        self.topic = topic
        self.partition = partition
        self._options = options
        self._events = events
        self._compression = options.compression_type
        get_kafka_codec(self._compression)  # fails early on ZLIB or a missing package
        self._idempotent = options.enable_idempotence
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequence_base = 0
        self._rebase = False  # the next op written starts the numbering of a new producer id
        self._connection: KafkaConnection | None = None
        self._sender: ProduceSender | None = None
        self.attachment = 0  # counts attachments, so that old answers are told apart
        self._attached_once = False

    # -- ProducerTransport --------------------------------------------------------------

    async def connect(self) -> ProducerRegistration:
        if self._attached_once:  # a reconnect: the leader may have moved
            self._backend.lookup.invalidate(self.topic)
        leader = await self._backend.lookup.leader(self.topic, self.partition)
        connection = await self._backend.pool.get_connection(leader)
        if self._idempotent and self._producer_id < 0:
            await self._init_producer_id(connection)
        self._attach(connection)
        name = self._options.producer_name or f"{self._backend.client_id}-{self._producer_id}"
        return ProducerRegistration(
            producer_name=name,
            last_sequence_id=-1,
            max_message_size=self._options.max_request_size,
        )

    def encode(self, op: OpSend) -> bytes:
        if op.highest_sequence_id - op.sequence_id + 1 != len(op.messages):
            raise MessageEncodingError(
                "sequence_id is not supported on Kafka: the producer numbers records itself"
            )
        messages = op.messages
        if messages[0].deliver_at is not None:  # alone in its op: the core never batches it
            messages = [with_deliver_at_header(messages[0])]
        return encode_record_batch(
            messages,
            compression=self._compression,
            now_ms=int(time.time() * 1000),
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._kafka_sequence(op) if self._idempotent else -1,
        )

    def write(self, op: OpSend) -> None:
        sender = self._sender
        if sender is None:
            return
        if self._idempotent:
            if self._rebase:
                self._rebase = False
                self._sequence_base = op.sequence_id
            state = (self._producer_id, self._producer_epoch, self._kafka_sequence(op))
            if _PRODUCER_STATE.unpack_from(op.frame, _PRODUCER_STATE_AT) != state:
                op.frame = with_producer_state(op.frame, *state)
        sender.ready(ProduceBatch(self, op, self.attachment))

    def drop_connection(self, reason: str) -> None:
        self._detach(ConnectionClosedError(f"{self.topic}-{self.partition}: {reason}"))

    async def close(self) -> None:
        self._connection = self._sender = None
        self.attachment += 1

    # -- answers, from the sender -------------------------------------------------------

    def on_partition_answer(self, batch: ProduceBatch, code: int, base_offset: int) -> None:
        if batch.attachment != self.attachment:
            return  # written on a connection since left: the core resends it
        op = batch.op
        if code in (errors.NONE, errors.DUPLICATE_SEQUENCE_NUMBER):
            # A duplicate was stored before (a resend after a lost answer): as the Java
            # client, it counts as sent, at an offset the broker no longer tells (-1).
            offset = base_offset if code == errors.NONE else -1
            self._events.on_receipt(op.sequence_id, op.highest_sequence_id, self._ids(offset))
            return
        error = errors.kafka_error(code, f"produce to {self.topic}-{self.partition}")
        if code in _RESET_ERRORS and self._idempotent:
            log.warning("%s-%d: %s: new producer id", self.topic, self.partition, error)
            self._producer_id = self._producer_epoch = -1
            self._rebase = True
            self._detach(error)
        elif getattr(error, "retriable", False):
            log.info("%s-%d: %s: retrying", self.topic, self.partition, error)
            self._detach(error)
        else:
            self._events.on_send_error(op.sequence_id, error)

    def on_request_failed(self, batch: ProduceBatch, error: MsgClientError) -> None:
        """No answer (a timeout, a lost connection): resend everything pending."""
        if batch.attachment == self.attachment:
            self._detach(error)

    def on_sent_unacknowledged(self, batch: ProduceBatch) -> None:
        """acks=0: written is all the broker will say."""
        if batch.attachment == self.attachment:
            op = batch.op
            self._events.on_receipt(op.sequence_id, op.highest_sequence_id, self._ids(-1))

    # -- helpers ------------------------------------------------------------------------

    def _kafka_sequence(self, op: OpSend) -> int:
        return (op.sequence_id - self._sequence_base) & 0x7FFFFFFF  # wraps as Kafka's does

    def _ids(self, base_offset: int) -> _MessageIds:
        return _MessageIds(self.topic, self.partition, base_offset)

    async def _init_producer_id(self, connection: KafkaConnection) -> None:
        request = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1
        )
        answer = await connection.session.request(request)
        if answer.error_code:
            raise errors.kafka_error(answer.error_code, "InitProducerId")
        self._producer_id = answer.producer_id
        self._producer_epoch = answer.producer_epoch

    def _attach(self, connection: KafkaConnection) -> None:
        self.attachment += 1
        self._attached_once = True
        self._connection = connection
        self._sender = self._backend.produce_sender(connection, self._options)
        attachment = self.attachment
        connection.closed.add_done_callback(
            lambda closed: self._on_connection_closed(attachment, closed.result())
        )

    def _on_connection_closed(self, attachment: int, error: ConnectionClosedError) -> None:
        if attachment == self.attachment and self._connection is not None:
            self._detach(error)

    def _detach(self, error: Exception) -> None:
        if self._connection is None:
            return
        self._connection = self._sender = None
        self.attachment += 1
        self._events.on_disconnected(error)


def with_deliver_at_header(message: OutgoingMessage) -> OutgoingMessage:
    """Kafka has no delayed delivery: the time travels as a header, and msgclient's
    consumers hold the partition until then (retry topics rely on it)."""
    assert message.deliver_at is not None
    return OutgoingMessage(
        message.value,
        message.future,
        message.partition_key,
        message.ordering_key,
        {**(message.properties or {}), DELIVER_AT_HEADER: str(message.deliver_at)},
        message.event_timestamp,
        message.sequence_id,
        null_value=message.null_value,  # a tombstone sent to a retry topic stays one
    )


class _MessageIds:
    """``message_ids(op)`` for a receipt: consecutive offsets from the batch's base."""

    __slots__ = ("base_offset", "partition", "topic")

    def __init__(self, topic: str, partition: int, base_offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset

    def __call__(self, op: OpSend) -> list[MessageId]:
        count, base = op.count, self.base_offset
        offsets = repeat(-1, count) if base < 0 else range(base, base + count)
        # map over a class: no Python loop per id (a tenth faster than a comprehension)
        return list(
            map(KafkaMessageId, repeat(self.topic, count), repeat(self.partition, count), offsets)
        )


def make_produce_sender(connection: KafkaConnection, options: ProducerOptions) -> ProduceSender:
    """The sender of one connection for producers with these acks and limits."""
    session = connection.session
    acks = options.acks
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
        answer = session.produce(acks, timeout_ms, list(by_topic.items()))
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
