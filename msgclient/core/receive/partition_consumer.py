"""PartitionConsumer: one subscription on one topic partition (the Java client's ConsumerImpl).

It owns the flow window, the ack-grouping, negative-ack and ack-timeout trackers, and
survives reconnects: on a new connection the window starts over, the messages the old one
had queued are dropped (the broker redelivers whatever was not acknowledged) and acks still
pending go out. Its messages land in the consumer's shared ReceiveQueue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from msgclient.contract import ConsumerEvents, ConsumerTransport
from msgclient.core.network.backoff import Backoff
from msgclient.core.network.registration import reconnect, register_with_retry
from msgclient.core.receive.ack_grouping_tracker import AcknowledgmentsGroupingTracker
from msgclient.core.receive.dead_letters import DeadLetterRouter
from msgclient.core.receive.negative_acks_tracker import NegativeAcksTracker
from msgclient.core.receive.receive_queue import FlowWindow, ReceiveQueue
from msgclient.core.receive.unacked_tracker import UnAckedMessageTracker
from msgclient.core.timing_wheel import Scheduler
from msgclient.errors import MsgClientError
from msgclient.message import Message, MessageId
from msgclient.message_batch import first_and_last_ids, payload_bytes
from msgclient.options import ConsumerOptions, ConsumerType, SubscriptionMode
from msgclient.stats import PartitionConsumerStats

log = logging.getLogger(__name__)


class PartitionConsumer(ConsumerEvents):
    """Create with ``start``; the first subscription must succeed within the timeout.

    ``scheduler`` is the clock and timer of the ack grouping, the negative-ack delay and
    the ack timeout: the running loop by default, a fake clock in tests. ``destination``
    names the topic (not the partition's name) in its stats; the counters are integers
    added to once per dispatch or event.
    """

    def __init__(
        self,
        topic: str,
        partition_index: int,
        options: ConsumerOptions,
        queue: ReceiveQueue[Message],
        window_size: int,
        transport_factory: Callable[[ConsumerEvents], ConsumerTransport],
        backoff: Backoff,
        dead_letters: DeadLetterRouter | None,
        *,
        scheduler: Scheduler | None = None,
        destination: str | None = None,
    ) -> None:
        self.topic = topic
        self.destination = topic if destination is None else destination
        self.partition_index = partition_index  # -1: not a partition
        self._options = options
        self._queue = queue
        self._transport = transport_factory(self)
        self._backoff = backoff
        self.dead_letters = self._dead_letters = dead_letters
        self.window = FlowWindow(window_size, self._flow)
        self._connected = False
        self._closed = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._acks = AcknowledgmentsGroupingTracker(
            self._transport.acknowledge,
            group_time=options.acknowledgment_group_time_ms / 1000,
            max_group_size=options.max_acknowledgment_group_size,
            ack_receipt_enabled=options.ack_receipt_enabled,
            is_connected=self._is_connected,
            scheduler=scheduler,
        )
        self._nacks = NegativeAcksTracker(
            self._redeliver,
            options.negative_ack_redelivery_delay_ms / 1000,
            options.negative_ack_redelivery_backoff,
            scheduler=scheduler,
        )
        self._unacked: UnAckedMessageTracker | None = None
        if options.unacked_messages_timeout_ms:
            self._unacked = UnAckedMessageTracker(
                self._redeliver,
                options.unacked_messages_timeout_ms / 1000,
                options.tick_duration_ms / 1000,
                scheduler=scheduler,
            )
        # Delivered at least max_redeliver_count times: the next redelivery is the DLQ.
        self._last_chance: dict[MessageId, Message] = {}
        self._newest_received: MessageId | None = None  # the newest id dispatched to us
        self._background: set[asyncio.Task[None]] = set()
        self.received = 0
        self.bytes_received = 0
        self.negatively_acknowledged = 0
        self.redeliveries_requested = 0
        self.dead_lettered = 0
        self.reconnects = 0
        self.is_active: bool | None = None  # Failover: known once the broker says
        self.reached_end_of_topic = False

    @property
    def is_connected(self) -> bool:
        """Subscribed on an open connection (False while reconnecting and once closed)."""
        return self._connected

    @property
    def transport(self) -> ConsumerTransport:
        """The adapter's half (a transaction's commit hands it the acknowledgments)."""
        return self._transport

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        await register_with_retry(
            self._transport.connect, self._backoff, timeout, f"consumer on {self.topic}"
        )
        self._on_connected()

    def _on_connected(self) -> None:
        self._connected = True
        # Acks made while disconnected first: with permits first, the broker could
        # redeliver those messages before it learns they were acknowledged.
        self._acks.flush()
        self.window.connection_opened(self._queue.count(self.window))

    def on_disconnected(self, error: Exception) -> None:
        if not self._connected or self._closed:
            return
        log.info("consumer on %s disconnected (%s): resubscribing", self.topic, error)
        self._connected = False
        if self._options.subscription_mode is SubscriptionMode.Durable:
            # The broker redelivers what was not acknowledged: drop the queued copies. A
            # non-durable subscription (a reader) resumes after the last message received,
            # so its queued messages are kept.
            dropped = self._queue.remove_window(self.window)
            log.debug("%s: dropped %d queued messages until redelivery", self.topic, dropped)
        if self._unacked is not None:
            self._unacked.clear()
        self._reconnect_task = asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        what = f"consumer on {self.topic}"
        outcome = await reconnect(self._transport.connect, self._backoff, self._is_closed, what)
        if isinstance(outcome, MsgClientError):
            # Refused for good (e.g. the subscription was deleted): receive() must say so,
            # once the messages already queued are taken.
            self._closed = True
            self._queue.close(outcome)
        elif not self._closed:
            self.reconnects += 1
            self._on_connected()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        self._acks.close()
        self._nacks.close()
        if self._unacked is not None:
            self._unacked.close()
        for task in list(self._background):
            await asyncio.wait([task], timeout=5)
        self._queue.remove_window(self.window)
        self._connected = False
        await self._transport.close()

    async def unsubscribe(self) -> None:
        await self._transport.unsubscribe()
        await self.close()

    async def seek(self, position: MessageId | int) -> None:
        await self._transport.seek(position)
        # What was queued is from before the new position; so are pending cumulative acks.
        self.window.release(self._queue.remove_window(self.window))
        self._acks.flush_and_clean()

    async def get_last_message_id(self) -> MessageId | None:
        return await self._transport.get_last_message_id()

    def pause(self) -> None:
        self.window.pause()

    def resume(self) -> None:
        self.window.resume()

    # -- events from the transport ------------------------------------------------------

    def on_messages(self, messages: Sequence[Message]) -> None:
        self.received += len(messages)
        self.bytes_received += payload_bytes(messages)
        is_duplicate = self._acks.is_duplicate
        first, last = first_and_last_ids(messages)
        newest = self._newest_received
        if newest is None or last > newest:
            self._newest_received = last
        if self._acks.holds_acks() and (
            newest is None or first <= newest or self._acks.acked_cumulatively(first)
        ):
            # A redelivery: some may be acked already (the broker may not know yet). A
            # dispatch newer than all before holds no message received before, so none
            # acked individually, and is not checked (no set of the pending acks made per
            # dispatch, no Message made of a lazy batch): an id acknowledged before it was
            # ever received (a stored id) is caught only in the first dispatch.
            fresh = [m for m in messages if not is_duplicate(m.message_id())]
            if len(fresh) < len(messages):
                self.window.release(len(messages) - len(fresh))  # never shown: permits free
                messages = fresh
        if self._dead_letters is not None:
            messages = self._past_last_chance(messages)
        self._queue.put_all(messages, self.window)

    def _past_last_chance(self, messages: Sequence[Message]) -> Sequence[Message]:
        """What to deliver of a dispatch under a dead-letter policy. A message redelivered
        past ``max_redeliver_count`` goes to the dead-letter topic on receipt (the Java
        client's check), whatever redelivered it: a negative ack, an ack timeout,
        ``redeliver_unacknowledged_messages``, the broker after a reconnect. One redelivered
        exactly that often is delivered once more: its last chance."""
        assert self._dead_letters is not None
        limit = self._dead_letters.max_redeliver_count
        kept: list[Message] = []
        dead: list[Message] = []
        for message in messages:
            count = message.redelivery_count()
            if count > limit:
                dead.append(message)
                continue
            if count == limit:
                self._last_chance[message.message_id()] = message
            kept.append(message)
        if dead:
            self.window.release(len(dead))  # never queued: their permits are free
            self._dead_letter_in_background(dead)
        return kept

    def on_active_consumer_change(self, is_active: bool) -> None:
        self.is_active = is_active

    def on_reached_end_of_topic(self) -> None:
        self.reached_end_of_topic = True

    def on_partition_revoked(self) -> None:
        self.is_active = False
        self.window.release(self._queue.remove_window(self.window))
        self._last_chance.clear()
        if self._unacked is not None:
            self._unacked.clear()

    # -- acknowledgments ----------------------------------------------------------------

    def delivered(self, message: Message) -> None:
        """The application took ``message``: the ack timeout starts."""
        if self._unacked is not None:
            self._unacked.add(message.message_id(), message.redelivery_count())

    @property
    def acknowledged(self) -> int:
        return self._acks.acks_made

    def acknowledger(self) -> Callable[[MessageId], asyncio.Future[None]]:
        """``acknowledge``, or the ack tracker's own ``ack`` when an ack has nothing else to
        settle (no ack timeout, no dead-letter policy): one call less per ack."""
        if self._unacked is None and self._dead_letters is None:
            return self._acks.ack
        return self.acknowledge

    def acknowledge(self, message_id: MessageId) -> asyncio.Future[None]:
        return self.acknowledge_all([message_id], 1)

    def acknowledge_all(self, message_ids: list[MessageId], messages: int) -> asyncio.Future[None]:
        """``acknowledge`` of each id, with one future for all; the ids acknowledge
        ``messages`` messages (for the stats)."""
        self.acknowledge_in_transaction(message_ids)
        return self._acks.ack_all(message_ids, messages)

    def acknowledge_in_transaction(self, message_ids: list[MessageId]) -> None:
        """The ids are acknowledged, or will be once the transaction that acknowledged them
        commits: no ack timeout or dead letter for them. The ack tracker does not see
        them: the transaction commits them itself."""
        if self._unacked is not None or self._last_chance:
            for message_id in message_ids:
                if self._unacked is not None:
                    self._unacked.remove(message_id)
                self._last_chance.pop(message_id, None)

    def redeliver_aborted(self, message_ids: list[MessageId]) -> None:
        """The transaction that acknowledged them was aborted: deliver them again."""
        self._redeliver(message_ids)

    def acknowledge_cumulative(self, message_id: MessageId) -> asyncio.Future[None]:
        if self._unacked is not None:
            self._unacked.remove_until(message_id)
        return self._acks.ack_cumulative(message_id)

    def negative_acknowledge(self, message_id: MessageId, redelivery_count: int) -> None:
        self.negatively_acknowledged += 1
        if self._unacked is not None:
            self._unacked.remove(message_id)
        self._nacks.add(message_id, redelivery_count)

    def _redeliver(self, message_ids: list[MessageId]) -> None:
        """Negative acks and ack timeouts come due: ask the broker to send them again, or
        send those that used up their redeliveries to the dead-letter topic."""
        if self._last_chance:
            dead = [self._last_chance.pop(i) for i in message_ids if i in self._last_chance]
            if dead:
                message_ids = [i for i in message_ids if i not in {m.message_id() for m in dead}]
                self._dead_letter_in_background(dead)
        if not message_ids or not self._connected:
            return
        self.redeliveries_requested += len(message_ids)
        if (
            self._options.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared)
            or self._transport.redelivers_by_id
        ):
            self._transport.redeliver(message_ids)
        else:
            # Exclusive and Failover keep order: the broker sends everything unacked again.
            self._redeliver_all()

    @property
    def redelivers_all(self) -> bool:
        """Whether the broker can send again everything it delivered and is unacked."""
        return not self._transport.redelivers_by_id

    def redeliver_unacknowledged(self) -> None:
        """Everything delivered and unacked comes again (the Java client's
        redeliverUnacknowledgedMessages); a disconnected partition's resubscription does it."""
        if self._unacked is not None:
            self._unacked.clear()
        if self._connected:
            self._redeliver_all()

    def _redeliver_all(self) -> None:
        # Including what is queued here: drop those copies (as the Java client).
        self.window.release(self._queue.remove_window(self.window))
        self._transport.redeliver(None)

    def _dead_letter_in_background(self, messages: list[Message]) -> None:
        task = asyncio.ensure_future(self._send_to_dead_letter(messages))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send_to_dead_letter(self, messages: list[Message]) -> None:
        assert self._dead_letters is not None
        for message in messages:
            try:
                await self._dead_letters.send_to_dead_letter(message)
            except MsgClientError as error:
                log.warning("%s: dead-letter send failed (%s): redelivering", self.topic, error)
                if self._connected:
                    self._transport.redeliver([message.message_id()])
                continue
            self.dead_lettered += 1
            self.acknowledge(message.message_id())

    def stats(self) -> PartitionConsumerStats:
        return PartitionConsumerStats(
            topic=self.destination,
            partition=self.partition_index,
            received=self.received,
            bytes_received=self.bytes_received,
            acknowledged=self.acknowledged,
            negatively_acknowledged=self.negatively_acknowledged,
            redeliveries_requested=self.redeliveries_requested,
            dead_lettered=self.dead_lettered,
            reconnects=self.reconnects,
            permits_granted=self.window.granted,
        )

    # -- helpers ------------------------------------------------------------------------

    def _flow(self, permits: int) -> None:
        if self._connected:
            self._transport.flow(permits)

    def _is_connected(self) -> bool:
        return self._connected

    def _is_closed(self) -> bool:
        return self._closed
