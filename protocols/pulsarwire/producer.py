"""PulsarProducerTransport: registers a producer on its broker and writes SEND frames."""

from __future__ import annotations

import contextlib
import logging
from typing import cast

from msgclient.contract import OpSend, ProducerEvents, ProducerRegistration, ProducerTransport
from msgclient.errors import ConnectionClosedError, MessageTooBigError, OperationTimeoutError
from msgclient.message import MessageId
from msgclient.options import CompressionType, ProducerOptions
from protocols.pulsarwire.compression import get_codec
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.context import PulsarContext
from protocols.pulsarwire.encryption import make_encryptor
from protocols.pulsarwire.framing import DEFAULT_MAX_MESSAGE_SIZE, MESSAGE_SIZE_FRAME_PADDING
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.schema import schema_command
from protocols.pulsarwire.send_codec import SendEncoder
from protocols.pulsarwire.session import PulsarSession, broker_error

log = logging.getLogger(__name__)

# Refusals that a resend cannot fix (the Java client's ClientCnx.handleSendError).
FATAL_SEND_ERRORS = frozenset({pb.ChecksumError, pb.NotAllowedError})


class PulsarProducerTransport(ProducerTransport):
    encodes_columns = True
    """One producer id on one topic partition; follows it across connections."""

    def __init__(
        self,
        context: PulsarContext,
        topic: str,
        partition: int,
        options: ProducerOptions,
        events: ProducerEvents,
    ) -> None:
        self._context = context
        self._topic = topic
        self._partition = partition
        self._options = options
        self._events = events
        self.producer_id = context.new_producer_id()
        codec = None
        if options.compression_type is not CompressionType.NONE:
            codec = get_codec(options.compression_type)  # fails early if the package is missing
        encryptor = None
        if options.encryption_keys:
            assert options.crypto_key_reader is not None  # ProducerOptions checked it
            encryptor = make_encryptor(options.encryption_keys, options.crypto_key_reader)
        self._encoder = SendEncoder(self.producer_id, options.compression_type, codec, encryptor)
        # Chunked messages' sequence ids -> their chunk count, and the receipts of their
        # first chunks so far: (count, first chunk's id). The core sees one receipt, the
        # last chunk's.
        self._chunk_counts: dict[int, int] = {}
        self._chunk_receipts: dict[int, tuple[int, PulsarMessageId]] = {}
        self._connection: PulsarConnection | None = None
        self._epoch = 0
        # The topic's epoch the broker gave an exclusive producer: sent again on reconnect,
        # so that a producer fenced off meanwhile is refused (ProducerFenced).
        self._topic_epoch: int | None = None
        self._max_message_size = DEFAULT_MAX_MESSAGE_SIZE

    async def connect(self) -> ProducerRegistration:
        address = await self._context.lookup.get_broker(self._topic)
        connection = await self._context.pool.get_connection(address.logical, address.physical)
        session = connection.session
        request_id = connection.new_request_id()
        producer = pb.CommandProducer(
            topic=self._topic,
            producer_id=self.producer_id,
            request_id=request_id,
            epoch=self._epoch,
            user_provided_producer_name=self._options.producer_name is not None,
            encrypted=bool(self._options.encryption_keys),
            producer_access_mode=self._options.access_mode.value,  # type: ignore[arg-type]
        )
        if self._topic_epoch is not None:
            producer.topic_epoch = self._topic_epoch
        schema = schema_command(self._options.schema)
        if schema is not None:
            producer.schema.CopyFrom(schema)
        # On a reconnect, keep the name the broker gave us (the Java client does too).
        name = self._options.producer_name or self._encoder.producer_name
        if name:
            producer.producer_name = name
        if self._options.initial_subscription_name:
            producer.initial_subscription_name = self._options.initial_subscription_name
        if self._options.properties:
            producer.metadata.extend(
                pb.KeyValue(key=k, value=v) for k, v in self._options.properties.items()
            )
        self._epoch += 1
        session.producers[self.producer_id] = self  # receipts may follow the answer at once
        try:
            answer = await connection.request(
                request_id, pb.BaseCommand(type=pb.BaseCommand.PRODUCER, producer=producer)
            )
        except BaseException:
            session.producers.pop(self.producer_id, None)
            raise
        if session.producers.get(self.producer_id) is not self or not connection.is_open:
            # Closed between the answer and now (a CLOSE_PRODUCER in the same packet, or the
            # connection lost): the producer was told while not yet registered, so the
            # registration is void and the caller must retry.
            raise ConnectionClosedError(
                f"{connection.address} closed producer {self.producer_id} as it registered"
            )
        success = cast(pb.CommandProducerSuccess, answer)
        self._encoder.producer_name = success.producer_name
        # As the official client: the version the broker gave the schema goes in every
        # message's metadata (a consumer decodes with it); an empty one is none (pulsar-lite
        # answers b"").
        schema_version = success.schema_version or None
        self._encoder.schema_version = schema_version
        if success.HasField("topic_epoch"):
            self._topic_epoch = success.topic_epoch
        self._connection = connection
        self._max_message_size = session.max_message_size
        if self._options.chunking_enabled:
            limit = self._options.chunk_max_message_size or session.max_message_size
            self._encoder.chunk_limit = min(limit, session.max_message_size)
        self._chunk_receipts.clear()  # everything pending is written again, from its start
        return ProducerRegistration(
            producer_name=success.producer_name,
            last_sequence_id=success.last_sequence_id,
            max_message_size=session.max_message_size,
            schema_version=schema_version,
        )

    def encode(self, op: OpSend) -> bytes:
        frame = self._encoder.encode(op)
        if self._encoder.chunks > 1:
            op.chunks = self._chunk_counts[op.sequence_id] = self._encoder.chunks
            return frame  # each chunk is under the limit
        if self._chunk_counts:  # a chunked message refused (no permits) left its id to this
            self._chunk_counts.pop(op.sequence_id, None)
        limit = self._max_message_size + MESSAGE_SIZE_FRAME_PADDING
        if len(frame) > limit:
            raise MessageTooBigError(
                f"a frame of {len(frame)} bytes is over the broker's limit of {limit} bytes "
                f"(topic {self._topic})"
            )
        return frame

    def write(self, op: OpSend) -> None:
        if self._connection is not None:
            # Straight to the socket, in the order written: while the socket takes no
            # writes the frame waits in the connection's backlog (by reference: the op
            # keeps it for a resend anyway).
            self._connection.write(op.frame)

    def drop_connection(self, reason: str) -> None:
        if self._connection is not None:
            self._connection.abort(ConnectionClosedError(f"{self._topic}: {reason}"))

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None or not connection.is_open:
            return
        session: PulsarSession = connection.session
        session.producers.pop(self.producer_id, None)
        request_id = connection.new_request_id()
        command = pb.BaseCommand(
            type=pb.BaseCommand.CLOSE_PRODUCER,
            close_producer=pb.CommandCloseProducer(
                producer_id=self.producer_id, request_id=request_id
            ),
        )
        # If the connection dies first, the broker drops the producer with it anyway.
        with contextlib.suppress(ConnectionClosedError, OperationTimeoutError):
            await connection.request(request_id, command)

    # -- from the session ---------------------------------------------------------------

    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        ledger = receipt.message_id.ledgerId
        entry = receipt.message_id.entryId
        partition = self._partition
        sequence_id = receipt.sequence_id
        if self._chunk_counts:
            self._forget_chunked_before(sequence_id)
        if sequence_id in self._chunk_counts:
            received, first = self._chunk_receipts.get(
                sequence_id, (0, PulsarMessageId(ledger, entry, partition))
            )
            received += 1
            if received < self._chunk_counts[sequence_id]:
                self._chunk_receipts[sequence_id] = (received, first)
                return
            del self._chunk_counts[sequence_id]
            self._chunk_receipts.pop(sequence_id, None)
            last = PulsarMessageId(ledger, entry, partition)
            self._events.on_receipt(
                sequence_id, receipt.highest_sequence_id, lambda op: [ChunkMessageId(first, last)]
            )
            return

        def message_ids(op: OpSend) -> list[MessageId]:
            if not op.is_batch:
                return [PulsarMessageId(ledger, entry, partition)]
            size = op.count
            return [PulsarMessageId(ledger, entry, partition, i, size) for i in range(size)]

        self._events.on_receipt(receipt.sequence_id, receipt.highest_sequence_id, message_ids)

    def _forget_chunked_before(self, sequence_id: int) -> None:
        """Receipts come in sequence order: a chunked message before this one that is
        still counted failed (its send timed out), and no receipt will come for it."""
        for stale in [s for s in self._chunk_counts if s < sequence_id]:
            del self._chunk_counts[stale]
            self._chunk_receipts.pop(stale, None)

    def on_send_error(self, error: pb.CommandSendError) -> None:
        exception = broker_error(error.error, error.message)
        if error.error in FATAL_SEND_ERRORS:
            self._events.on_send_error(error.sequence_id, exception)
            return
        # As the Java client: other errors are transient (e.g. a topic moving between
        # brokers); reconnecting resends everything pending, in order.
        log.warning(
            "%s: send error for sequence id %d: %s", self._topic, error.sequence_id, exception
        )
        self.drop_connection("send error")

    def on_closed(self, error: ConnectionClosedError) -> None:
        self._connection = None
        self._events.on_disconnected(error)
