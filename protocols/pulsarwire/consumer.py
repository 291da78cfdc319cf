"""PulsarConsumerTransport: subscribes a consumer on its broker and speaks its commands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from typing import cast

from msgclient.contract import AckBatch, ConsumerEvents, ConsumerTransport
from msgclient.crypto_key_reader import CryptoError
from msgclient.errors import (
    BrokerError,
    ChecksumMismatchError,
    ConnectionClosedError,
    InvalidConfigurationError,
    MalformedFrameError,
    OperationTimeoutError,
    ProtocolError,
)
from msgclient.message import Message, MessageId
from msgclient.message_batch import first_and_last_ids, message_ids
from msgclient.options import (
    ConsumerCryptoFailureAction,
    ConsumerOptions,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    SubscriptionMode,
)
from protocols.pulsarwire.acks import (
    INDIVIDUAL,
    BatchAckers,
    ack_commands,
    ack_set,
    redeliver_commands,
)
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.consumer_chunks import ChunkedEntry, ConsumerChunks
from protocols.pulsarwire.context import PulsarContext
from protocols.pulsarwire.encryption import (
    EncryptedChunk,
    decrypt_chunk,
    make_decryptor,
    undecrypted_message,
)
from protocols.pulsarwire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    MESSAGE_SIZE_FRAME_PADDING,
    Frame,
    encode_command,
)
from protocols.pulsarwire.message_id import (
    EARLIEST,
    UINT64_MASK,
    ChunkMessageId,
    PulsarMessageId,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.receive_codec import decode_entry
from protocols.pulsarwire.schema import schema_command

log = logging.getLogger(__name__)

Type = pb.BaseCommand.Type

SUB_TYPES = {
    ConsumerType.Exclusive: pb.CommandSubscribe.Exclusive,
    ConsumerType.Shared: pb.CommandSubscribe.Shared,
    ConsumerType.Failover: pb.CommandSubscribe.Failover,
    ConsumerType.KeyShared: pb.CommandSubscribe.Key_Shared,
}
INITIAL_POSITIONS = {
    InitialPosition.Latest: pb.CommandSubscribe.Latest,
    InitialPosition.Earliest: pb.CommandSubscribe.Earliest,
}
KEY_SHARED_MODES = {
    KeySharedMode.AutoSplit: pb.AUTO_SPLIT,
    KeySharedMode.Sticky: pb.STICKY,
}
# Only these redeliver single messages; the others redeliver everything unacked, in order.
REDELIVER_BY_ID = frozenset({ConsumerType.Shared, ConsumerType.KeyShared})


class PulsarConsumerTransport(ConsumerTransport):
    """One consumer id on one topic partition; follows it across connections.

    Non-durable subscriptions (readers) exist only while subscribed, so each subscribe
    says where to start: first ``options.start_message_id``, after a reconnect the last
    message dispatched to ``on_messages``, after a seek the seek position. The broker
    starts at the entry of that id; the messages of that entry before it (and the id
    itself, unless inclusive) are dropped from the first dispatch, as the Java client's
    ConsumerImpl does.
    """

    def __init__(
        self,
        context: PulsarContext,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        events: ConsumerEvents,
    ) -> None:
        self._context = context
        self._topic = topic
        self._partition = partition
        self._subscription = subscription
        self._options = options
        self._events = events
        self.consumer_id = context.new_consumer_id()
        self.consumer_name = options.consumer_name  # random unless given (ConsumerOptions)
        self._durable = options.subscription_mode is SubscriptionMode.Durable
        self._connection: PulsarConnection | None = None
        self._ackers = BatchAckers()
        start = _pulsar_id(options.start_message_id) if options.start_message_id else None
        if isinstance(start, ChunkMessageId) and options.start_message_id_inclusive:
            start = start.first_chunk_id  # the whole chunked message, as the Java reader
        self._start = start
        self._start_inclusive = options.start_message_id_inclusive
        self._skip_from: PulsarMessageId | None = None  # armed for the first dispatch
        self._seeking = False
        self._max_entry_size = DEFAULT_MAX_FRAME_SIZE  # until CONNECTED says otherwise
        reader = options.crypto_key_reader
        self._decryptor = None if reader is None else make_decryptor(reader)
        self._chunks = ConsumerChunks(
            topic, partition, options, self._ack_chunks, self._redeliver_after_ack_timeout
        )

    # -- ConsumerTransport --------------------------------------------------------------

    async def connect(self) -> None:
        address = await self._context.lookup.get_broker(self._topic)
        connection = await self._context.pool.get_connection(address.logical, address.physical)
        session = connection.session
        request_id = connection.new_request_id()
        command = pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=self._subscribe(request_id))
        self._skip_from = None if self._durable else self._start
        self._chunks.clear()  # the broker sends the unacknowledged chunks again
        # Registered first: a dispatch may follow the answer in the same packet. Connected
        # first too, for the writes on_message makes (FLOW, discarding acks).
        session.consumers[self.consumer_id] = self
        self._connection = connection
        self._max_entry_size = session.max_message_size + MESSAGE_SIZE_FRAME_PADDING
        try:
            await connection.request(request_id, command)
        except BaseException as error:
            session.consumers.pop(self.consumer_id, None)
            self._connection = None
            if isinstance(error, ConnectionClosedError):
                raise ConnectionClosedError(
                    f"the connection closed while subscribing {self._subscription!r} on "
                    f"{self._topic} ({error}); a broker may close it to refuse the "
                    "subscription (pulsar-lite does for a second Exclusive consumer or a "
                    "subscription type mismatch)"
                ) from error
            raise
        if session.consumers.get(self.consumer_id) is not self or not connection.is_open:
            # Closed between the answer and now (a CLOSE_CONSUMER in the same packet, or the
            # connection lost): the subscription is void and the caller must retry.
            self._connection = None
            raise ConnectionClosedError(
                f"{connection.address} closed consumer {self.consumer_id} as it subscribed"
            )

    def flow(self, permits: int) -> None:
        if self._connection is not None and permits > 0:
            flow = pb.CommandFlow(consumer_id=self.consumer_id, messagePermits=permits)
            self._connection.write(encode_command(pb.BaseCommand(type=Type.FLOW, flow=flow)))

    def acknowledge(self, batch: AckBatch) -> Awaitable[None] | None:
        connection = self._connection
        if connection is None:
            raise ConnectionClosedError(f"{self._topic}: not connected, acknowledgments not sent")
        commands = ack_commands(
            self.consumer_id, batch, self._ackers, self._options.batch_index_ack_enabled
        )
        if not self._options.ack_receipt_enabled:
            for ack in commands:
                connection.write(encode_command(pb.BaseCommand(type=Type.ACK, ack=ack)))
            return None
        receipts = []
        for ack in commands:
            ack.request_id = connection.new_request_id()
            command = pb.BaseCommand(type=Type.ACK, ack=ack)
            receipts.append(connection.request(ack.request_id, command))
        return _all_confirmed(receipts) if receipts else None

    def redeliver(self, message_ids: list[MessageId] | None) -> None:
        connection = self._connection
        if connection is None or message_ids == []:
            return
        if message_ids is not None and self._options.consumer_type not in REDELIVER_BY_ID:
            message_ids = None  # the broker keeps order: it redelivers all that is unacked
        for redeliver in redeliver_commands(self.consumer_id, message_ids):
            connection.write(
                encode_command(
                    pb.BaseCommand(
                        type=Type.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                        redeliverUnacknowledgedMessages=redeliver,
                    )
                )
            )

    async def seek(self, position: MessageId | int) -> None:
        connection = self._require_connection()
        request_id = connection.new_request_id()
        seek = pb.CommandSeek(consumer_id=self.consumer_id, request_id=request_id)
        if isinstance(position, MessageId):
            target = _pulsar_id(position)
            if isinstance(target, ChunkMessageId):  # as the Java client: at its first chunk
                target = target.first_chunk_id
            seek.message_id.CopyFrom(self._seek_position(target))
        else:
            target = EARLIEST  # as the Java client: the broker finds the time, not us
            seek.message_publish_time = position
        # Set before the request: a broker closes the consumer while it seeks, and the
        # resubscription may run before the answer is read.
        before = self._start, self._start_inclusive
        self._start, self._start_inclusive = target, self._options.start_message_id_inclusive
        self._seeking = True
        try:
            await connection.request(request_id, pb.BaseCommand(type=Type.SEEK, seek=seek))
        except BaseException:
            self._start, self._start_inclusive = before
            raise
        finally:
            self._seeking = False
        self._ackers.clear()  # the entries come again, as if never delivered

    async def get_last_message_id(self) -> MessageId | None:
        connection = self._require_connection()
        request_id = connection.new_request_id()
        command = pb.BaseCommand(
            type=Type.GET_LAST_MESSAGE_ID,
            getLastMessageId=pb.CommandGetLastMessageId(
                consumer_id=self.consumer_id, request_id=request_id
            ),
        )
        try:
            answer = await connection.request(request_id, command)
        except BrokerError as error:
            # pulsar-lite refuses it on an empty topic (UnknownError "Topic has no
            # messages"), where Apache Pulsar answers entry -1: the same answer, None.
            if "has no messages" in str(error).lower():
                return None
            raise
        last = PulsarMessageId.from_proto(
            cast(pb.CommandGetLastMessageIdResponse, answer).last_message_id
        )
        if last.entry_id < 0:  # a ledger with no entry yet: the topic is empty
            return None
        return PulsarMessageId(last.ledger_id, last.entry_id, self._partition, last.batch_index)

    async def unsubscribe(self) -> None:
        connection = self._require_connection()
        request_id = connection.new_request_id()
        command = pb.BaseCommand(
            type=Type.UNSUBSCRIBE,
            unsubscribe=pb.CommandUnsubscribe(consumer_id=self.consumer_id, request_id=request_id),
        )
        await connection.request(request_id, command)
        # The broker dropped the consumer with its subscription: nothing is left to close.
        connection.session.consumers.pop(self.consumer_id, None)
        self._connection = None
        self._ackers.clear()

    def drop_connection(self, reason: str) -> None:
        if self._connection is not None:
            self._connection.abort(ConnectionClosedError(f"{self._topic}: {reason}"))

    async def close(self) -> None:
        self._ackers.clear()
        self._chunks.clear()
        connection, self._connection = self._connection, None
        if connection is None or not connection.is_open:
            return
        connection.session.consumers.pop(self.consumer_id, None)
        request_id = connection.new_request_id()
        command = pb.BaseCommand(
            type=Type.CLOSE_CONSUMER,
            close_consumer=pb.CommandCloseConsumer(
                consumer_id=self.consumer_id, request_id=request_id
            ),
        )
        # If the connection dies first, the broker drops the consumer with it anyway; a
        # refusal (an unknown consumer) leaves nothing to close either.
        with contextlib.suppress(ConnectionClosedError, OperationTimeoutError, BrokerError):
            await connection.request(request_id, command)

    # -- from the session ---------------------------------------------------------------

    def on_message(self, frame: Frame) -> None:
        chunk_ids = None
        undecrypted: tuple[EncryptedChunk, ...] = ()
        max_size = self._max_entry_size
        metadata = frame.metadata
        if (
            metadata is not None
            and metadata.num_chunks_from_msg > 1
            and frame.checksum_error is None  # else discarded as any corrupt entry
        ):
            assembled = self._on_chunk(frame)
            if assembled is None:
                self.flow(1)  # the core never sees this entry: its permit comes back
                return
            frame, chunk_ids, undecrypted = assembled
            # The whole may decompress to more than one entry holds: bounded by its chunks.
            max_size *= len(chunk_ids)
        decoded = self._decode(frame, max_size, chunk_ids, undecrypted)
        if decoded is not None:
            self._deliver(frame, *decoded)

    def _decode(
        self,
        frame: Frame,
        max_size: int,
        chunk_ids: list[PulsarMessageId] | None,
        undecrypted: tuple[EncryptedChunk, ...],
    ) -> tuple[Sequence[Message], bool] | None:
        """The messages of an entry and whether they were decrypted (else they are
        delivered as stored: an undecrypted batch is one message, with no batch acker);
        None when the entry is discarded."""
        if undecrypted:  # CONSUME: a chunked message's chunks as stored, joined
            message = undecrypted_message(
                frame, self._topic, self._partition, chunk_ids, undecrypted
            )
            return [message], False
        try:
            messages = decode_entry(
                frame, self._topic, self._partition, max_size, self._decryptor, chunk_ids
            )
        except CryptoError as error:
            if not self._decryption_failed(frame, error):
                return [], False
            return [undecrypted_message(frame, self._topic, self._partition)], False
        except (ProtocolError, InvalidConfigurationError) as error:
            self._discard(frame, error)
            return None
        return messages, True

    def _deliver(self, frame: Frame, messages: Sequence[Message], decrypted: bool) -> None:
        """The messages of one entry (``decrypted`` unless delivered as stored) to the
        core, less those before a reader's start; the permits of what is not delivered
        come back."""
        if self._skip_from is not None:
            if messages:
                messages = skip_before_start(messages, self._skip_from, self._start_inclusive)
            self._skip_from = None
        metadata = frame.metadata
        assert metadata is not None  # decode_entry checked it
        count = metadata.num_messages_in_batch  # 1 unless batched (the proto's default)
        if len(messages) < count:
            # Dropped here (before the start) or by the broker's ack set: their permits are
            # spent but the core never sees them, so give them back (ConsumerImpl does too).
            self.flow(count - len(messages))
        if not messages:
            return
        if decrypted and metadata.HasField("num_messages_in_batch"):
            entry = frame.command.message.message_id
            if len(messages) == count:
                indexes = set(range(count))
            else:
                ids = message_ids(messages, 0, len(messages))
                indexes = {cast(PulsarMessageId, i).batch_index for i in ids}
            self._ackers.delivered(entry.ledgerId, entry.entryId, indexes)
        if not self._durable and not self._seeking:
            self._start = cast(PulsarMessageId, first_and_last_ids(messages)[1])
            self._start_inclusive = False
        self._events.on_messages(messages)

    def _on_chunk(self, frame: Frame) -> ChunkedEntry | None:
        """A chunk entry into its message; the message once complete. An encrypted chunk
        is decrypted first, on its own, as the official consumers do (each chunk has its
        own IV); one that cannot be follows crypto_failure_action as any entry: DISCARD
        acknowledges it, FAIL leaves it, CONSUME joins it as stored."""
        metadata = frame.metadata
        assert metadata is not None  # a chunk: the caller saw
        undecrypted = None
        if metadata.encryption_keys:
            try:
                frame = decrypt_chunk(frame, self._decryptor)
            except CryptoError as error:
                if not self._decryption_failed(frame, error):
                    return None
                undecrypted = EncryptedChunk.of(frame)
        return self._chunks.on_chunk(frame, undecrypted)

    def on_closed(self, error: ConnectionClosedError) -> None:
        self._connection = None
        self._events.on_disconnected(error)

    def on_active_consumer_change(self, is_active: bool) -> None:
        self._events.on_active_consumer_change(is_active)

    def on_reached_end_of_topic(self) -> None:
        self._events.on_reached_end_of_topic()

    # -- helpers ------------------------------------------------------------------------

    def _subscribe(self, request_id: int) -> pb.CommandSubscribe:
        options = self._options
        subscribe = pb.CommandSubscribe(
            topic=self._topic,
            subscription=self._subscription,
            subType=SUB_TYPES[options.consumer_type],
            consumer_id=self.consumer_id,
            request_id=request_id,
            consumer_name=self.consumer_name,
            priority_level=options.priority_level,
            durable=self._durable,
            initialPosition=INITIAL_POSITIONS[options.initial_position],
            replicate_subscription_state=options.replicate_subscription_state_enabled,
            force_topic_creation=True,
        )
        schema = schema_command(options.schema)
        if schema is not None:
            subscribe.schema.CopyFrom(schema)
        if options.consumer_type is ConsumerType.KeyShared:
            subscribe.keySharedMeta.CopyFrom(_key_shared_meta(options.key_shared_policy))
        if options.properties:
            subscribe.metadata.extend(
                pb.KeyValue(key=k, value=v) for k, v in options.properties.items()
            )
        # As the Java client: a durable subscription starts where the broker keeps it.
        if not self._durable and self._start is not None:
            start = subscribe.start_message_id
            start.ledgerId = self._start.ledger_id & UINT64_MASK
            start.entryId = self._start.entry_id & UINT64_MASK
            if self._start.batch_index >= 0:
                start.batch_index = self._start.batch_index
        return subscribe

    def _seek_position(self, target: PulsarMessageId) -> pb.MessageIdData:
        position = pb.MessageIdData(
            ledgerId=target.ledger_id & UINT64_MASK, entryId=target.entry_id & UINT64_MASK
        )
        if self._options.batch_index_ack_enabled and 0 <= target.batch_index < target.batch_size:
            # As the Java client: the batch indexes from the target on are still to come.
            position.ack_set.extend(ack_set(range(target.batch_index, target.batch_size)))
        return position

    def _require_connection(self) -> PulsarConnection:
        if self._connection is None:
            raise ConnectionClosedError(
                f"consumer {self.consumer_id} on {self._topic}: not connected"
            )
        return self._connection

    def _discard(self, frame: Frame, error: Exception) -> None:
        """An entry that cannot be decoded: skip it and give its permits back."""
        message_id = frame.command.message.message_id
        where = f"{self._topic} entry {message_id.ledgerId}:{message_id.entryId}"
        metadata = frame.metadata
        self.flow(metadata.num_messages_in_batch if metadata is not None else 1)
        if isinstance(error, InvalidConfigurationError):
            # A codec package is missing here: the entry is sound, leave it to the broker.
            log.error("%s cannot be decoded, left unacknowledged: %s", where, error)
            return
        # Corrupt: as the Java client, acknowledge it with the reason, or it would come
        # back forever.
        log.error("%s is corrupt, discarded: %s", where, error)
        if isinstance(error, ChecksumMismatchError):
            reason = pb.CommandAck.ChecksumMismatch
        elif isinstance(error, MalformedFrameError):
            reason = pb.CommandAck.BatchDeSerializeError
        else:
            reason = pb.CommandAck.DecompressionError
        self._ack_invalid(message_id, reason)

    def _decryption_failed(self, frame: Frame, error: CryptoError) -> bool:
        """Whether an entry (or chunk) that cannot be decrypted is delivered as stored:
        crypto_failure_action CONSUME (the official client's
        ConsumerImpl.decryptMessageIfNeeded); the other actions are taken here, and the
        caller gives back the permits of what is not delivered."""
        message_id = frame.command.message.message_id
        where = f"{self._topic} entry {message_id.ledgerId}:{message_id.entryId}"
        action = self._options.crypto_failure_action
        if action is ConsumerCryptoFailureAction.CONSUME:
            log.warning(
                "%s delivered undecrypted (crypto_failure_action CONSUME): %s", where, error
            )
            return True
        if action is ConsumerCryptoFailureAction.DISCARD:
            log.warning("%s discarded (crypto_failure_action DISCARD): %s", where, error)
            self._ack_invalid(message_id, pb.CommandAck.DecryptionError)
            return False
        # FAIL: the broker keeps it unacknowledged and sends it again after a reconnect;
        # with an ack timeout, after the timeout too (the official consumer puts it in its
        # ack-timeout tracker), so it is tried again once the key may be there.
        log.error("%s not delivered (crypto_failure_action FAIL): %s", where, error)
        self._redeliver_after_ack_timeout(
            [PulsarMessageId(message_id.ledgerId, message_id.entryId, self._partition)]
        )
        return False

    def _redeliver_after_ack_timeout(self, message_ids: Sequence[MessageId]) -> None:
        """Entries not delivered, left unacknowledged: with an ack timeout the broker is
        asked for them again after it (the official consumer tracks them there)."""
        timeout_ms = self._options.unacked_messages_timeout_ms
        if timeout_ms:
            again = list(message_ids)
            asyncio.get_running_loop().call_later(timeout_ms / 1000, self.redeliver, again)

    def _ack_chunks(self, chunk_ids: list[PulsarMessageId]) -> None:
        """Acknowledge the chunks of a message dropped incomplete."""
        self._ack_entries([i.to_proto() for i in chunk_ids], None)

    def _ack_invalid(
        self, message_id: pb.MessageIdData, reason: pb.CommandAck.ValidationError.ValueType
    ) -> None:
        """Acknowledge an entry that is not delivered, saying why."""
        self._ack_entries(
            [pb.MessageIdData(ledgerId=message_id.ledgerId, entryId=message_id.entryId)], reason
        )

    def _ack_entries(
        self,
        entries: list[pb.MessageIdData],
        reason: pb.CommandAck.ValidationError.ValueType | None,
    ) -> None:
        ack = pb.CommandAck(consumer_id=self.consumer_id, ack_type=INDIVIDUAL, message_id=entries)
        if reason is not None:
            ack.validation_error = reason
        if self._connection is not None:
            self._connection.write(encode_command(pb.BaseCommand(type=Type.ACK, ack=ack)))


def skip_before_start(
    messages: Sequence[Message], start: PulsarMessageId, inclusive: bool
) -> Sequence[Message]:
    """``messages`` (one entry) minus those of the start entry before ``start``, and
    ``start`` itself unless ``inclusive``: the broker starts at the entry, so it sends
    the start entry's earlier batch indexes too."""
    first = cast(PulsarMessageId, message_ids(messages, 0, 1)[0])
    if first.ledger_id != start.ledger_id or first.entry_id != start.entry_id:
        return messages
    kept = []
    for message in messages:
        index = cast(PulsarMessageId, message.message_id()).batch_index
        if index > start.batch_index or (inclusive and index == start.batch_index):
            kept.append(message)
    return kept


def _key_shared_meta(policy: KeySharedPolicy | None) -> pb.KeySharedMeta:
    """As the official client: every Key_Shared SUBSCRIBE says its mode (AutoSplit by
    default), and only Sticky sends its hash ranges."""
    policy = policy or KeySharedPolicy()
    meta = pb.KeySharedMeta(
        keySharedMode=KEY_SHARED_MODES[policy.key_shared_mode],
        allowOutOfOrderDelivery=policy.allow_out_of_order_delivery,
    )
    if policy.key_shared_mode is KeySharedMode.Sticky and policy.sticky_ranges:
        meta.hashRanges.extend(pb.IntRange(start=s, end=e) for s, e in policy.sticky_ranges)
    return meta


async def _all_confirmed(receipts: list[asyncio.Future[object]]) -> None:
    await asyncio.gather(*receipts)


def _pulsar_id(message_id: MessageId) -> PulsarMessageId:
    if not isinstance(message_id, PulsarMessageId):
        raise InvalidConfigurationError(
            f"{message_id!r} is not a Pulsar message id (from a Pulsar message or "
            "PulsarMessageId.deserialize)"
        )
    return message_id
