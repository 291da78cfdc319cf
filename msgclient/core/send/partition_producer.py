"""PartitionProducer: one producer on one topic partition (the Java client's ProducerImpl).

It assigns sequence ids, batches, keeps the pending queue with its send timeout, and
survives reconnects: after a new connection it resends everything pending, in order.
The adapter's ProducerTransport does the protocol part (registration and encoding).

Sequence ids follow the Java client: ``_next_sequence_id`` (msgIdGenerator) is the id for
the next message; ``last_sequence_id_pushed`` is the highest id handed to the wire;
``last_sequence_id_published`` the highest the broker confirmed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from msgclient.contract import (
    OpSend,
    ProducerEvents,
    ProducerRegistration,
    ProducerTransport,
    ValueColumns,
)
from msgclient.core.network.backoff import Backoff
from msgclient.core.network.registration import reconnect, register_with_retry
from msgclient.core.send.batch_container import (
    ADDED_FULL,
    NO_SPACE,
    BatchMessageContainer,
    KeyBasedBatchMessageContainer,
    PlainBatch,
)
from msgclient.core.send.limits import Limit
from msgclient.core.send.pending_queue import PendingQueue
from msgclient.core.send.send_counters import SendCounters
from msgclient.core.timing_wheel import Cancellable, Scheduler
from msgclient.errors import (
    AlreadyClosedError,
    MessageEncodingError,
    MsgClientError,
    ProducerQueueIsFullError,
    SendTimeoutError,
)
from msgclient.message import MessageId, OutgoingMessage, SendCallback, call_each, fail_future
from msgclient.options import BatchingType, ProducerOptions
from msgclient.stats import PartitionProducerStats

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


class PartitionProducer(ProducerEvents):
    """Create with ``start``; the first registration must succeed within the timeout.

    ``scheduler`` is the clock and timer of the batch delay, the send timeout and the first
    registration's deadline: the running loop by default, a fake clock in tests.
    ``destination`` and ``partition_index`` name the topic and partition in its stats.
    """

    def __init__(
        self,
        topic: str,
        options: ProducerOptions,
        memory: Limit,
        transport_factory: Callable[[ProducerEvents], ProducerTransport],
        backoff: Backoff,
        max_pending_messages: int,
        *,
        scheduler: Scheduler | None = None,
        destination: str | None = None,
        partition_index: int = -1,
    ) -> None:
        self.topic = topic
        self.destination = topic if destination is None else destination
        self.partition_index = partition_index  # -1: not a partition
        self.producer_name = options.producer_name or ""
        self.schema_version: bytes | None = None  # the broker's answer, once registered
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE  # until the broker says otherwise
        self._options = options
        self._memory = memory
        self.pending_messages = Limit(max_pending_messages)
        self._transport = transport_factory(self)
        self._backoff = backoff
        self._loop = asyncio.get_running_loop()
        self._scheduler: Scheduler = scheduler or self._loop
        self._time = self._scheduler.time
        self._connected = False  # frames may be written
        self._closing = False  # no new messages
        self._closed = False  # no more reconnects
        self._batch: BatchMessageContainer | None = None
        if options.batching_enabled:
            container = (
                KeyBasedBatchMessageContainer
                if options.batching_type is BatchingType.KeyBased
                else BatchMessageContainer
            )
            self._batch = container(
                options.batching_max_messages,
                options.batching_max_allowed_size_in_bytes,
                self._time,
            )
        self._batch_delay = options.batching_max_publish_delay_ms / 1000
        self._batch_timer: Cancellable | None = None
        self._last_batch_close = self._time()
        self._pending = PendingQueue(
            options.send_timeout_millis / 1000,
            self._oldest_batched,
            self._on_send_timeout,
            scheduler=self._scheduler,
        )
        self._next_sequence_id = 0
        self.last_sequence_id_pushed = -1
        self.last_sequence_id_published = -1
        self.failed_count = 0  # messages failed (a transaction that sent them cannot commit)
        self.counters = SendCounters()  # added to per receipt; read by stats()
        self._registered_once = False
        self._reconnect_task: asyncio.Task[None] | None = None

    @property
    def sends_columns(self) -> bool:
        """Whether the protocol takes bulk ops (``enqueue_columns``)."""
        return self._transport.encodes_columns

    @property
    def takes_plain(self) -> bool:
        """Whether ``enqueue_plain`` may be used: batching on, a batch of any keys, and a
        protocol that encodes columns."""
        batch = self._batch
        return batch is not None and batch.takes_plain and self._transport.encodes_columns

    @property
    def is_connected(self) -> bool:
        """Registered on an open connection (False while reconnecting and once closed)."""
        return self._connected

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        """Register with the broker for the first time, retrying transient failures for up
        to ``timeout`` seconds (the operation timeout); raise the last error."""
        what = f"producer on {self.topic}"
        connect = self._transport.connect
        self._on_registered(
            await register_with_retry(connect, self._backoff, timeout, what, clock=self._time)
        )

    def _on_registered(self, registration: ProducerRegistration) -> None:
        self.producer_name = registration.producer_name
        self.schema_version = registration.schema_version
        self.max_message_size = registration.max_message_size
        if self._batch is not None:  # a batch must fit in one broker message
            self._batch.max_bytes = min(
                self._options.batching_max_allowed_size_in_bytes, registration.max_message_size
            )
        if not self._registered_once:
            self._registered_once = True
            initial = self._options.initial_sequence_id
            last = registration.last_sequence_id if initial is None else initial
            self.last_sequence_id_published = last
            self.last_sequence_id_pushed = last
            self._next_sequence_id = last + 1
        for op in self._pending:  # resend in order what the old connection left unconfirmed
            self._transport.write(op)
        self._connected = True

    def on_disconnected(self, error: Exception) -> None:
        if not self._connected or self._closed:
            return
        log.info("producer on %s disconnected (%s): reconnecting", self.topic, error)
        self._connected = False
        self._reconnect_task = asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        what = f"producer on {self.topic}"
        outcome = await reconnect(self._transport.connect, self._backoff, self._is_closed, what)
        if isinstance(outcome, MsgClientError):
            self._closing = self._closed = True
            self._fail_all(outcome)
        elif outcome is not None:
            self.counters.reconnects += 1
            self._on_registered(outcome)

    def _is_closed(self) -> bool:
        return self._closed

    async def flush(self) -> None:
        """Send the open batch and wait until everything sent so far is confirmed or failed."""
        self._close_batch()
        last = self._pending.peek_last()
        if last is not None:
            # wait(), not await: a cancelled flush must not cancel the op's shared future
            await asyncio.wait([last.wait_settled()])

    async def close(self, flush_timeout: float) -> None:
        """Flush (for at most ``flush_timeout`` s), then unregister.

        Messages that cannot be delivered by then fail with AlreadyClosedError: none vanish.
        """
        if self._closing:
            return
        self._closing = True
        try:
            async with asyncio.timeout(flush_timeout):
                await self.flush()
        except TimeoutError:
            log.warning("%s: closing with %d messages unconfirmed", self.topic, self.pending_count)
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        self._pending.stop()
        try:
            await self._transport.close()
        finally:
            self._connected = False
            self._fail_all(AlreadyClosedError(f"producer on {self.topic} was closed"))

    # -- sending ------------------------------------------------------------------------

    def enqueue(self, message: OutgoingMessage) -> bool:
        """Take a message whose limits were acquired; it completes or fails its future.

        True when it closed a batch: there is a write for the event loop to do."""
        if self._closing:
            self._release(1, len(message.value))
            message.fail(AlreadyClosedError(f"producer on {self.topic} is closed"))
            return False
        if message.sequence_id is None:
            message.sequence_id = self._next_sequence_id
            self._next_sequence_id += 1
        batch = self._batch
        if batch is None or message.deliver_at is not None:
            if batch is not None:  # a delayed message goes alone, after the open batch
                self._close_batch()
            self._push(OpSend([message], False, len(message.value), self._time()))
            return False
        status = batch.add(message)
        closed = status == NO_SPACE
        if closed:
            self._close_batch()
            status = batch.add(message)
        return self._added(status) or closed

    def enqueue_plain(
        self,
        value: bytes | None,
        size: int,
        future: asyncio.Future[MessageId] | None,
        callback: SendCallback | None,
    ) -> bool:
        """``enqueue`` of a message without options (``value`` None: a null value of
        ``size`` 0), kept by the open batch as columns: no OutgoingMessage is made for it.
        Only when ``takes_plain``. True when it closed a batch."""
        if self._closing:
            self._release(1, size)
            error = AlreadyClosedError(f"producer on {self.topic} is closed")
            call_each([(callback, None)], error)
            if future is not None:
                fail_future(future, error)
            return False
        sequence_id = self._next_sequence_id
        self._next_sequence_id = sequence_id + 1
        batch: BatchMessageContainer = self._batch  # type: ignore[assignment]  # takes_plain
        status = batch.add_plain(value, size, future, callback, sequence_id)
        closed = status == NO_SPACE
        if closed:
            self._close_batch()
            status = batch.add_plain(value, size, future, callback, sequence_id)
        return self._added(status) or closed

    def _added(self, status: int) -> bool:
        """After a message joined the open batch: close it if full (True), else make sure
        its timer runs."""
        if status == ADDED_FULL:
            self._close_batch()
            return True
        if self._batch_timer is None:
            self._schedule_batch_close()
        return False

    async def enqueue_chunkable(self, message: OutgoingMessage, block: bool) -> None:
        """Take a message of a chunking producer (they do not batch) whose first permit
        and memory were acquired. Encoded at once, it may go as several chunks, each of
        which holds a pending-message permit (as the Java client): the others are taken
        before it is written, waiting for them (``block``) or else failing with
        ProducerQueueIsFullError, the message then holding nothing and taking no
        sequence id. While it waits, later sends wait behind it (the limit serves in
        order), so none can be written before it."""
        if self._closing:
            self.enqueue(message)  # fails it
            return
        numbered = message.sequence_id is None
        if numbered:
            message.sequence_id = self._next_sequence_id
            self._next_sequence_id += 1
        op = OpSend([message], False, len(message.value), self._time())
        if not self._encode(op):
            return
        extra = op.chunks - 1
        if extra and not self.pending_messages.try_acquire(extra, held=1):
            if not block:
                self._release(1, op.payload_bytes)
                if numbered:  # nothing took an id since: this method did not yield
                    self._next_sequence_id -= 1
                raise ProducerQueueIsFullError(
                    f"a message of {op.chunks} chunks needs {op.chunks} of the "
                    f"{self.pending_messages.capacity} pending messages on {self.topic} "
                    f"(max_pending_messages), {self.pending_messages.used - 1} are taken; "
                    "set block_if_queue_full=True to wait instead"
                )
            try:
                await self.pending_messages.acquire(extra, held=1)
            except BaseException:
                self._release(1, op.payload_bytes)
                raise
        if self._closing:  # closed while it waited
            self._complete_failed(op, AlreadyClosedError(f"producer on {self.topic} is closed"))
            return
        self._queue(op)

    def enqueue_columns(
        self, columns: ValueColumns, payload_bytes: int
    ) -> asyncio.Future[Callable[[], list[MessageId]]]:
        """One batch of a bulk send whose limits were acquired, after everything sent
        before it (the open batch closes first); its future gets a function that makes
        its messages' ids, or fails."""
        future: asyncio.Future[Callable[[], list[MessageId]]] = self._loop.create_future()
        op = OpSend.of_columns(columns, self._next_sequence_id, future, payload_bytes, self._time())
        if self._closing:
            self._complete_failed(op, AlreadyClosedError(f"producer on {self.topic} is closed"))
            return future
        self._next_sequence_id += op.count
        if self._batch is not None and len(self._batch):
            self._close_batch()
        self._push(op)
        return future

    def _schedule_batch_close(self) -> None:
        """A batch closes one publish delay after the previous one (as the Java client's
        periodic batch timer: a message waits half the delay on average, not all of it),
        and at the end of that loop turn, so that the messages published in the same turn
        join it instead of waiting a whole delay in the next batch. A producer idle for a
        delay or more sends at the end of this turn: nothing is gained by waiting."""
        close_at = self._last_batch_close + self._batch_delay
        if close_at <= self._time():
            self._batch_timer = self._loop.call_soon(self._close_batch)
        else:
            self._batch_timer = self._scheduler.call_at(close_at, self._close_at_end_of_turn)

    def _close_at_end_of_turn(self) -> None:
        # The callbacks that became due with this timer are queued already: they run first.
        self._batch_timer = self._loop.call_soon(self._close_batch)

    def _close_batch(self) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._batch is None:
            return
        now = self._last_batch_close = self._time()
        for op in self._closed_ops(now):
            self._push(op)

    def _closed_ops(self, now: float) -> list[OpSend]:
        """The open batch, closed: an op for each batch it makes."""
        assert self._batch is not None
        ops = []
        for closed in self._batch.close():
            if isinstance(closed, PlainBatch):
                ops.append(closed.op(now))
            else:
                size = sum(len(m.value) for m in closed)
                ops.append(OpSend(closed, True, size, now))
        return ops

    def _push(self, op: OpSend) -> None:
        if self._encode(op):
            self._queue(op)

    def _encode(self, op: OpSend) -> bool:
        """Whether ``op`` encoded; if not, it failed. Runs inside the batch timer's
        callback too: an exception must fail the op's messages, never escape into the
        event loop and leave their futures pending."""
        try:
            op.encoded(self._transport.encode(op))
        except MsgClientError as error:  # e.g. a batch over the broker's size limit
            self._complete_failed(op, error)
            return False
        except Exception as error:
            failure = MessageEncodingError(f"cannot encode a message for {self.topic}: {error!r}")
            failure.__cause__ = error
            self._complete_failed(op, failure)
            return False
        return True

    def _queue(self, op: OpSend) -> None:
        self._pending.append(op)
        self.last_sequence_id_pushed = op.highest_sequence_id
        if self._connected:
            self._transport.write(op)

    # -- events from the transport ------------------------------------------------------

    def on_receipt(
        self,
        sequence_id: int,
        highest_sequence_id: int,
        message_ids: Callable[[OpSend], list[MessageId]],
    ) -> None:
        op = self._pending.peek()
        if op is None or sequence_id < op.sequence_id:
            return  # a late receipt for an op that already timed out
        if sequence_id > op.sequence_id:
            # The broker skipped an op: the stream is out of step. Reconnect to resend.
            log.warning(
                "%s: receipt for sequence id %d while expecting %d: reconnecting",
                self.topic,
                sequence_id,
                op.sequence_id,
            )
            self._transport.drop_connection(
                f"receipt {sequence_id} while expecting {op.sequence_id}"
            )
            return
        self._pending.popleft()
        self.last_sequence_id_published = max(
            self.last_sequence_id_published, op.highest_sequence_id
        )
        self._release(op.permits, op.payload_bytes)
        self.counters.confirmed(op.count, op.payload_bytes, self._time() - op.created_at)
        op.complete(message_ids)

    def on_send_error(self, sequence_id: int, error: MsgClientError) -> None:
        op = self._pending.peek()
        if op is None or op.sequence_id != sequence_id:
            return  # not the op at the head: it already timed out
        self._pending.popleft()
        log.warning("%s: broker refused sequence id %d: %s", self.topic, sequence_id, error)
        self._complete_failed(op, error)

    # -- failures -----------------------------------------------------------------------

    def _oldest_batched(self) -> float | None:
        return self._batch.first_added_at if self._batch is not None else None

    def _on_send_timeout(self) -> None:
        count = sum(op.count for op in self._pending) + (len(self._batch or ()))
        log.warning("%s: send timeout, failing %d pending messages", self.topic, count)
        self._fail_all(
            SendTimeoutError(
                f"not confirmed by the broker within {self._options.send_timeout_millis} ms "
                f"(topic {self.topic})"
            )
        )

    def _fail_all(self, error: MsgClientError) -> None:
        if self._batch is not None:
            if self._batch_timer is not None:
                self._batch_timer.cancel()
                self._batch_timer = None
            for op in self._closed_ops(0):
                self._complete_failed(op, error)
        for op in self._pending.drain():
            self._complete_failed(op, error)

    def _complete_failed(self, op: OpSend, error: MsgClientError) -> None:
        self.failed_count += op.count
        self._release(op.permits, op.payload_bytes)
        op.fail(error)

    def _release(self, count: int, size: int) -> None:
        self.pending_messages.release(count)
        self._memory.release(size)

    @property
    def pending_count(self) -> int:
        return sum(op.count for op in self._pending) + len(self._batch or ())

    @property
    def pending_bytes(self) -> int:
        open_batch = self._batch.size_bytes if self._batch is not None else 0
        return sum(op.payload_bytes for op in self._pending) + open_batch

    def stats(self) -> PartitionProducerStats:
        counters = self.counters
        return PartitionProducerStats(
            topic=self.destination,
            partition=self.partition_index,
            messages_sent=counters.messages_sent,
            bytes_sent=counters.bytes_sent,
            send_errors=self.failed_count,
            batches_sent=counters.batches_sent,
            pending_messages=self.pending_count,
            pending_bytes=self.pending_bytes,
            send_latency_sum=counters.send_latency_sum,
            send_latency_max=counters.send_latency_max,
            reconnects=counters.reconnects,
        )
