"""Producer: the public async producer over one or many partitions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack, overload

from msgclient import bulk_columns
from msgclient.closing import AsyncClosing
from msgclient.contract import Router, ValueColumns, uniform_size
from msgclient.core.send.limits import Limit
from msgclient.core.send.partition_producer import PartitionProducer
from msgclient.errors import (
    AlreadyClosedError,
    InvalidConfigurationError,
    MemoryBufferIsFullError,
    MessageTooBigError,
    NotSupportedError,
    ProducerQueueIsFullError,
    TransactionStateError,
)
from msgclient.message import Message, MessageId, OutgoingMessage, SendCallback
from msgclient.message_batch import MessageBatch
from msgclient.options import PartitionsRoutingMode, ProducerOptions
from msgclient.sent_messages import SentMessages
from msgclient.stats import ProducerStats
from msgclient.transaction import Transaction, TransactionalProducers, TransactionState
from msgclient.validators import check_key, check_non_negative, check_properties, value_bytes

if TYPE_CHECKING:
    from msgclient.consumer import Consumer

LOCAL_ONLY = ("__local__",)  # the replicate_to value that disables geo-replication


class MessageOptions(TypedDict, total=False):
    """The per-message options of ``send`` and ``send_async``."""

    partition_key: str | bytes | None
    ordering_key: str | bytes | None
    properties: Mapping[str, str] | None
    event_timestamp: int | None
    sequence_id: int | None
    disable_replication: bool
    replication_clusters: list[str] | None
    deliver_at: int | None
    deliver_after: int | None
    transaction: Transaction | None


class Producer(AsyncClosing):
    """Sends messages to a topic; build it with ``Client.create_producer``.

    ``send`` waits for the broker's confirmation. ``send_async`` only waits for room in
    the queue (``block_if_queue_full``), and for one turn of the event loop after a call
    that closed a batch, and returns a future of the MessageId (or, given a callback,
    nothing: the callback hears of the outcome), so one task can pipeline many messages;
    its errors (queue full, memory full, closed) raise at the ``await``, and later failures
    (send timeout) fail the future or reach the callback.
    """

    def __init__(
        self,
        topic: str,
        options: ProducerOptions,
        partitions: list[PartitionProducer],
        router: Router | None,
        memory: Limit,
        close_timeout: float,
        on_closed: Callable[[Producer], None],
        transactions: TransactionalProducers | None = None,
    ) -> None:
        self.topic = topic
        self._options = options
        self._partitions = partitions
        self._router = router
        self._memory = memory
        self._block = options.block_if_queue_full
        self._chunking = options.chunking_enabled  # read per message: one attribute
        # A message without options goes to the batch as columns, with no OutgoingMessage
        # (enqueue_plain): where batches take them, and no custom router wants to see it.
        self._plain = partitions[0].takes_plain and options.message_router is None
        self._routing_probe = bulk_columns.RoutingProbe()  # what a router sees of one
        self._close_timeout = close_timeout
        self._on_closed = on_closed
        self._transactions = transactions
        self._closing = False
        self._batch_closed = False  # the last send closed a batch: give the loop a turn
        self._loop = asyncio.get_running_loop()

    @property
    def producer_name(self) -> str:
        return self._partitions[0].producer_name

    @property
    def schema_version(self) -> bytes | None:
        """The version the broker gave the producer's schema (the first partition's; None:
        the broker gave none). The official Python client's producer does not expose it."""
        return self._partitions[0].schema_version

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id the broker confirmed (-1 before the first)."""
        return max(p.last_sequence_id_published for p in self._partitions)

    def is_connected(self) -> bool:
        """Whether every partition's producer is registered on an open connection."""
        return not self._closing and all(p.is_connected for p in self._partitions)

    @property
    def failed_count(self) -> int:
        """Messages failed since the producer was created."""
        return sum(p.failed_count for p in self._partitions)

    @property
    def pending_count(self) -> int:
        """Messages accepted and not yet confirmed or failed."""
        return sum(p.pending_count for p in self._partitions)

    def stats(self) -> ProducerStats:
        """A snapshot of the producer's counters, summed and per partition
        (docs/metrics.md)."""
        return ProducerStats.of(self.topic, [p.stats() for p in self._partitions])

    async def send(
        self, value: bytes | bytearray | memoryview | None, **options: Unpack[MessageOptions]
    ) -> MessageId:
        """Send one message and wait until the broker has stored it (options as
        ``send_async``)."""
        return await (await self.send_async(value, **options))

    @overload
    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: None = None,
        **options: Unpack[MessageOptions],
    ) -> asyncio.Future[MessageId]: ...

    @overload
    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback,
        **options: Unpack[MessageOptions],
    ) -> None: ...

    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback | None = None,
        **options: Unpack[MessageOptions],
    ) -> asyncio.Future[MessageId] | None:
        """Queue one message; the returned future completes with its MessageId.

        ``value`` None sends a null value (a tombstone: on a compacted topic it deletes
        the key's value), with an empty payload and the metadata's null_value flag.
        Given ``callback(error, message_id)``, it is called when the outcome is known and
        nothing is returned, as pulsar-client's ``send_async(content, callback)``: no future
        is made, which a busy producer feels (one object per message in flight fewer for
        the garbage collector: about a quarter of the CPU a message, docs/benchmarks.md).
        ``options`` are those of ``MessageOptions``: ``partition_key`` is a str or bytes
        (the Java client's key / keyBytes); ``deliver_at`` (ms since the epoch) or
        ``deliver_after`` (ms from now) delay the delivery to consumers (the broker must
        support it; such messages are not batched). ``transaction``: the transaction the
        message is part of (a producer with a ``transactional_id`` sends in its open
        transaction by default, and only in one).
        """
        # Options arrive as one dict, not as keyword-only parameters: a call without any
        # (the common case) then skips filling and testing nine defaults, measured at a
        # tenth of this method's own time.
        if self._batch_closed:
            # A caller sending in a loop never waits otherwise, and what it queued would
            # reach the socket only when its loop ends: one turn per closed batch lets the
            # broker store batches while the next ones fill. Before any side effect, so
            # that a cancellation here leaves nothing half sent.
            self._batch_closed = False
            await asyncio.sleep(0)
        if self._closing:
            raise AlreadyClosedError(f"producer on {self.topic} is closed")
        transaction = None
        if self._transactions is not None:
            transaction = self._transactions.for_send(options.pop("transaction", None), self)
        null_value = value is None
        if type(value) is not bytes:
            value = b"" if value is None else value_bytes(value)
        size = len(value)
        partitions = self._partitions
        if size > partitions[0].max_message_size and not self._chunking:
            raise MessageTooBigError(
                f"message of {size} bytes is over the broker's limit of "
                f"{partitions[0].max_message_size} bytes (topic {self.topic})"
            )
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        future = None if callback is not None else self._loop.create_future()
        message = None
        if not options and self._plain:
            if self._router is None:
                producer = partitions[0]
            else:
                probe = self._routing_probe
                probe.value = value
                producer = partitions[self._router(probe)]  # type: ignore[arg-type]
        else:
            if options:
                message = _with_options(value, future, callback, null_value, options)
            else:
                message = OutgoingMessage(
                    value, future, None, None, None, None, None, None, callback, None, null_value
                )
            producer = partitions[0] if self._router is None else partitions[self._router(message)]
            if self._chunking:
                await self._send_chunkable(message, producer, transaction, self._block)
                return future
        pending = producer.pending_messages
        if not pending.try_acquire(1):
            await self._wait_for_slot(pending, producer.topic, self._block)
        if not self._memory.try_acquire(size):
            await self._wait_for_memory(pending, size, self._block)
        if transaction is not None and transaction.state is not TransactionState.OPEN:
            _ended_while_waiting(transaction, pending, self._memory, 1, size)
        if message is None:
            plain = None if null_value else value
            self._batch_closed = producer.enqueue_plain(plain, size, future, callback)
        else:
            self._batch_closed = producer.enqueue(message)
        return future

    async def _send_chunkable(
        self,
        message: OutgoingMessage,
        producer: PartitionProducer,
        transaction: Transaction | None,
        block: bool,
    ) -> None:
        """``send_async``'s end on a chunking producer (it does not batch): the message
        may go as chunks, each holding a pending-message permit (``enqueue_chunkable``).
        ``block``: wait for room, else fail fast."""
        size = len(message.value)
        pending = producer.pending_messages
        if not pending.try_acquire(1):
            await self._wait_for_slot(pending, producer.topic, block)
        if not self._memory.try_acquire(size):
            await self._wait_for_memory(pending, size, block)
        if transaction is not None and transaction.state is not TransactionState.OPEN:
            _ended_while_waiting(transaction, pending, self._memory, 1, size)
        await producer.enqueue_chunkable(message, block)

    async def send_many(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_timestamps: Sequence[int | None] | None = None,
        partition: int | None = None,
    ) -> SentMessages:
        """Send ``values`` and wait until the broker stored them all: ``send_many_async``,
        then its confirmation."""
        confirmed = await self.send_many_async(
            values,
            keys=keys,
            properties=properties,
            event_timestamps=event_timestamps,
            partition=partition,
        )
        return await confirmed

    async def send_many_async(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_timestamps: Sequence[int | None] | None = None,
        partition: int | None = None,
    ) -> asyncio.Future[SentMessages]:
        """Queue ``values`` (None: a null value), with ``keys``, ``properties`` (Kafka
        headers) and ``event_timestamps`` (ms) if given, a column each (None in one: that
        record has none): the bulk path, by columns, with no Message, future or call per
        message (docs/producer.md). Returns once every batch is queued (so a next call's
        messages come after these), a future of their confirmation.

        Values go out in batches cut as ``send_async``'s (``batching_max_messages``,
        ``batching_max_allowed_size_in_bytes``), keyed ones to their key's partition,
        unkeyed ones to one partition per batch (Kafka's sticky partitioner, Pulsar's
        routing mode; CustomPartition is refused). Each batch waits for room in the
        pending and memory limits (whatever ``block_if_queue_full`` says: a bulk call is a
        stream), counts against the send timeout, and is resent after a reconnect with
        its sequence numbers, as any batch. If a batch fails, the future fails with its
        error once every batch is settled; the others may be stored. Its result: the
        messages' ids in the order of ``values``, made when read. In a transaction as
        ``send_async``.
        ``partition``: every value to this partition of a partitioned topic (0 on a topic
        of one), whatever the keys and the routing mode say.
        A chunking producer (``chunking_enabled``: it does not batch) sends each value as
        ``send_async`` does, in chunks when over the broker's limit.
        """
        if self._closing:
            raise AlreadyClosedError(f"producer on {self.topic} is closed")
        partitions = self._partitions
        if not partitions[0].sends_columns:
            raise NotSupportedError(
                "send_many is not supported on this protocol yet; send each message with send_async"
            )
        if partition is not None and not (
            type(partition) is int and 0 <= partition < len(partitions)
        ):
            raise InvalidConfigurationError(
                f"send_many: partition={partition!r}, but {self.topic} has "
                f"{len(partitions)} partition(s), 0 to {len(partitions) - 1}"
            )
        if (
            partition is None
            and self._options.message_routing_mode is PartitionsRoutingMode.CustomPartition
        ):
            raise NotSupportedError(
                "send_many with message_routing_mode=CustomPartition: the message_router "
                "takes a message, and send_many makes none; use send_async"
            )
        transaction = None
        if self._transactions is not None:
            transaction = self._transactions.for_send(None, self)
        count = len(values)
        if not count:
            nothing: asyncio.Future[SentMessages] = asyncio.get_running_loop().create_future()
            nothing.set_result(SentMessages(0, []))
            return nothing
        checked_keys = bulk_columns.key_column(keys, count)
        bulk_columns.check_columns(count, properties, event_timestamps)
        if self._chunking:
            return await self._send_each(
                values, checked_keys, properties, event_timestamps, partition, transaction
            )
        size_limit = partitions[0].max_message_size
        size_of_each = uniform_size(values)
        if size_of_each is None:
            for value in values:
                if value is not None and (type(value) is not bytes or len(value) > size_limit):
                    bulk_columns.check_value(value, size_limit, self.topic)
        elif size_of_each > size_limit:
            bulk_columns.check_value(values[0], size_limit, self.topic)
        records = ValueColumns(values, checked_keys, properties, event_timestamps, size_of_each)
        options = self._options
        max_count = options.batching_max_messages if options.batching_enabled else 1
        max_bytes = min(options.batching_max_allowed_size_in_bytes, size_limit)
        batches: list[tuple[int, Sequence[int] | range, ValueColumns, int]] = []
        if checked_keys is None or partition is not None:
            cuts = (
                bulk_columns.cuts(values, max_count, max_bytes)
                if size_of_each is None
                else bulk_columns.uniform_cuts(count, size_of_each, max_count, max_bytes)
            )
            for start, end, size in cuts:
                if partition is not None:
                    index = partition
                else:
                    index = (
                        0 if self._router is None else self._router(bulk_columns.batch_probe(size))
                    )
                taken: Sequence[int] | range = range(start, end)
                batches.append((index, taken, records.part(taken), size))
        else:
            for index, positions in bulk_columns.by_partition(self._router, checked_keys).items():
                column = [values[i] for i in positions]
                for start, end, size in bulk_columns.cuts(column, max_count, max_bytes):
                    taken = positions[start:end]
                    batches.append((index, taken, records.part(taken), size))
        futures: list[asyncio.Future[Callable[[], list[MessageId]]]] = []
        for index, _, columns, size in batches:
            producer = partitions[index]
            await producer.pending_messages.acquire(len(columns.values))
            try:
                await self._memory.acquire(size)
            except BaseException:
                producer.pending_messages.release(len(columns.values))
                raise
            if transaction is not None and transaction.state is not TransactionState.OPEN:
                _ended_while_waiting(
                    transaction, producer.pending_messages, self._memory, len(columns.values), size
                )
            futures.append(producer.enqueue_columns(columns, size))
            await asyncio.sleep(0)  # the batch goes out while the next ones are cut
        taken_by_batch = [taken for _, taken, _, _ in batches]
        return asyncio.ensure_future(bulk_columns.confirmed(count, taken_by_batch, futures))

    async def _send_each(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[str | bytes | None] | None,
        properties: Sequence[Mapping[str, str] | None] | None,
        event_timestamps: Sequence[int | None] | None,
        partition: int | None,
        transaction: Transaction | None,
    ) -> asyncio.Future[SentMessages]:
        """``send_many_async`` on a chunking producer: chunking and batching exclusive,
        there is no batch to fill, and each value goes as ``send_async`` sends it, in
        chunks if over the limit."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[MessageId]] = []
        for index, value in enumerate(values):
            if value is not None and type(value) is not bytes:
                bulk_columns.check_value(value, 0, self.topic)  # raises TypeError
            future: asyncio.Future[MessageId] = loop.create_future()
            message = OutgoingMessage(
                b"" if value is None else value,
                future,
                partition_key=None if keys is None else keys[index],
                properties=None if properties is None else properties[index],
                event_timestamp=None if event_timestamps is None else event_timestamps[index],
                null_value=value is None,
            )
            if partition is not None:
                producer = self._partitions[partition]
            elif self._router is None:
                producer = self._partitions[0]
            else:
                producer = self._partitions[self._router(message)]
            # As any bulk call, a stream: it waits for room (block_if_queue_full or not).
            await self._send_chunkable(message, producer, transaction, block=True)
            futures.append(future)
        return asyncio.ensure_future(bulk_columns.each_confirmed(futures))

    async def _wait_for_slot(self, pending: Limit, topic: str, block: bool) -> None:
        if not block:
            raise ProducerQueueIsFullError(
                f"{pending.capacity} messages pending on {topic} (max_pending_messages); "
                "set block_if_queue_full=True to wait instead"
            )
        await pending.acquire(1)

    async def _wait_for_memory(self, pending: Limit, size: int, block: bool) -> None:
        """Wait for ``size`` bytes of the memory limit; the message slot is held meanwhile."""
        try:
            if not block:
                raise MemoryBufferIsFullError(
                    f"the client's memory_limit of {self._memory.capacity} bytes is reached; "
                    "set block_if_queue_full=True to wait instead"
                )
            await self._memory.acquire(size)
        except BaseException:
            pending.release(1)
            raise

    async def flush(self) -> None:
        """Send every open batch and wait until all messages sent so far are settled."""
        await asyncio.gather(*(p.flush() for p in self._partitions))

    # -- transactions, by Kafka's names (docs/transactions.md) ----------------------------

    def begin_transaction(self) -> Transaction:
        """Open a transaction of this producer's transactional id (every producer of the
        client with that id sends in it)."""
        return self._transactional("begin_transaction").begin()

    async def commit_transaction(self) -> None:
        """Wait for the transaction's sends, then commit it."""
        await self._open_transaction("commit_transaction").commit()

    async def abort_transaction(self) -> None:
        await self._open_transaction("abort_transaction").abort()

    async def send_offsets_to_transaction(
        self, consumer: Consumer, messages: Message | MessageBatch | Iterable[Message]
    ) -> None:
        """Kafka's name for acknowledging ``messages`` of ``consumer`` in the open
        transaction: the group's offsets commit with it."""
        transaction = self._open_transaction("send_offsets_to_transaction")
        if isinstance(messages, Message | MessageBatch):
            consumer.acknowledge(messages, transaction=transaction)
            return
        for message in messages:
            consumer.acknowledge(message, transaction=transaction)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """``async with producer.transaction():`` begins a transaction and commits it at
        the end of the block, or aborts it if the block raises."""
        async with self.begin_transaction() as transaction:
            yield transaction

    def _transactional(self, call: str) -> TransactionalProducers:
        if self._transactions is None:
            raise TransactionStateError(
                f"{call}: the producer on {self.topic} has no transactional_id "
                "(create_producer(..., transactional_id=...))"
            )
        return self._transactions

    def _open_transaction(self, call: str) -> Transaction:
        transactions = self._transactional(call)
        if transactions.current is None:
            raise TransactionStateError(
                f"{call}: no transaction is open on transactional id "
                f"{transactions.transactional_id!r} (begin_transaction() first)"
            )
        return transactions.current

    async def close(self) -> None:
        """Flush and close; what cannot be delivered fails with a typed error."""
        if self._closing:
            return
        self._closing = True
        try:
            await asyncio.gather(*(p.close(self._close_timeout) for p in self._partitions))
        finally:
            self._on_closed(self)


def _with_options(
    value: bytes,
    future: asyncio.Future[MessageId] | None,
    callback: SendCallback | None,
    null_value: bool,
    options: MessageOptions,
) -> OutgoingMessage:
    """The message of a ``send_async`` with options, which are checked here."""
    unknown = options.keys() - MessageOptions.__annotations__.keys()
    if unknown:
        raise TypeError(f"send_async() got an unexpected keyword argument {min(unknown)!r}")
    partition_key = options.get("partition_key")
    ordering_key = options.get("ordering_key")
    properties = options.get("properties")
    event_timestamp = options.get("event_timestamp")
    sequence_id = options.get("sequence_id")
    deliver_at = options.get("deliver_at")
    deliver_after = options.get("deliver_after")
    replication_clusters = options.get("replication_clusters")
    if options.get("transaction") is not None:
        raise TransactionStateError(
            "transaction=: this producer has no transactional_id "
            "(create_producer(..., transactional_id=...)) and cannot send in a transaction"
        )
    if partition_key is not None:
        check_key("partition_key", partition_key)
    if ordering_key is not None:
        check_key("ordering_key", ordering_key)
    if properties is not None:
        check_properties("properties", properties)
    if sequence_id is not None:
        check_non_negative("sequence_id", sequence_id)
    if event_timestamp is not None:
        check_non_negative("event_timestamp", event_timestamp)
    if deliver_after is not None:
        check_non_negative("deliver_after", deliver_after)
        deliver_at = int(time.time() * 1000) + deliver_after
    elif deliver_at is not None:
        check_non_negative("deliver_at", deliver_at)
    if type(ordering_key) is str:
        ordering_key = ordering_key.encode()
    replicate_to = (
        LOCAL_ONLY
        if options.get("disable_replication")
        else (tuple(replication_clusters) if replication_clusters else None)
    )
    return OutgoingMessage(
        value,
        future,
        partition_key,
        ordering_key,  # type: ignore[arg-type]
        properties,
        event_timestamp,
        sequence_id,
        replicate_to,
        callback,
        deliver_at,
        null_value,
    )


def _ended_while_waiting(
    transaction: Transaction, pending: Limit, memory: Limit, permits: int, size: int
) -> None:
    """The transaction ended while a send waited for room: give the room back, raise."""
    pending.release(permits)
    memory.release(size)
    transaction.check_open("send")  # raises
