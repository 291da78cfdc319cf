"""Kafka consumers: the subscription of one ``subscribe`` call and its partition transports.

A durable subscription is a consumer group (Failover and Exclusive both map onto one): each
member's core keeps a PartitionConsumer for every partition, and the group's assignment
decides which of them this member fetches, as a Pulsar Failover subscription makes one
consumer active per partition. A partition assigned here starts at the group's committed
offset (``initial_position`` only when there is none); a revoked one first commits what
was acknowledged. A non-durable subscription (a reader) joins no group and reads every
partition from its start position.

Acks are Pulsar's: individual acks are tracked per partition and the group commits the
first offset not yet acknowledged (``OffsetTracker``), so an out-of-order ack never
commits past an unacknowledged message. Commits of all partitions go out together, at most
one OffsetCommit per event-loop turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from msgclient.contract import AckBatch, ConsumerEvents, ConsumerTransport
from msgclient.errors import MsgClientError, NotSupportedError, TransactionAbortableError
from msgclient.message import Message, MessageId
from msgclient.options import ConsumerOptions, InitialPosition, SubscriptionMode
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.fetcher import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Fetcher,
    FetchState,
    earliest_offset,
    isolation_level_of,
    list_offset,
)
from protocols.kafkawire.group import GroupMembership
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.offset_tracker import OffsetTracker
from protocols.kafkawire.records.run import RecordRun

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class KafkaSubscription:
    """What the partition transports of one ``subscribe`` call share (the core's
    subscription context): the group membership, the fetcher, the batched commits."""

    def __init__(
        self, context: KafkaContext, topics: list[str], group_id: str, options: ConsumerOptions
    ) -> None:
        self.context = context
        self.options = options
        self.transports: dict[TopicPartition, KafkaConsumerTransport] = {}
        self.fetcher = Fetcher(
            context.lookup,
            context.pool.get_connection,
            options,
            max_uncompressed_bytes=options.fetch_max_bytes,
        )
        self.group: GroupMembership | None = None
        if options.subscription_mode is SubscriptionMode.Durable:
            self.group = GroupMembership(context, group_id, topics, options, self)
        self._started: asyncio.Future[None] | None = None
        self._dirty: dict[TopicPartition, int] = {}
        self._commit: asyncio.Future[None] | None = None
        self._open = 0
        self._held = False  # a pattern subscription's: open until released
        self.rebalances = 0  # group joins completed (each ends in on_partitions_assigned)

    async def start(self, timeout: float) -> None:
        """Join the group once, for every transport (the first caller does it)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start(timeout))
        await asyncio.shield(self._started)

    async def _start(self, timeout: float) -> None:
        if self.group is not None:
            await self.group.start(timeout)

    # -- the group's assignment ---------------------------------------------------------

    async def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        assert self.group is not None
        self.rebalances += 1
        committed = await self.group.committed(partitions)
        for tp in partitions:
            transport = self.transports.get(tp)
            if transport is not None:
                position = committed.get(tp, -1)
                if position < 0:
                    position = await transport.initial_offset()
                transport.activate(position)
        await _call_user(self.options.rebalance_listener, "on_partitions_assigned", partitions)

    async def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            transport = self.transports.get(tp)
            if transport is not None:
                transport.deactivate()
        await self.flush_commits()
        await _call_user(self.options.rebalance_listener, "on_partitions_revoked", partitions)

    async def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._dirty.pop(tp, None)
            transport = self.transports.get(tp)
            if transport is not None:
                transport.deactivate()
        await _call_user(self.options.rebalance_listener, "on_partitions_revoked", partitions)

    # -- commits ------------------------------------------------------------------------

    def commit_soon(self, tp: TopicPartition, position: int) -> asyncio.Future[None]:
        """Commit ``position`` for ``tp`` with the others made in this loop turn."""
        self._dirty[tp] = position
        if self._commit is None:
            self._commit = asyncio.ensure_future(self._commit_dirty())
            # Logged in _commit_dirty; the acks that wait on it (receipts) see it too, and
            # without receipts nobody does: it must not end as an unretrieved exception.
            self._commit.add_done_callback(lambda done: done.cancelled() or done.exception())
        return self._commit

    async def _commit_dirty(self) -> None:
        await asyncio.sleep(0)  # gather the acks of every partition made in this turn
        offsets, self._dirty = self._dirty, {}
        self._commit = None
        if self.group is None or not offsets:
            return
        try:
            await self.group.commit(offsets)
        except MsgClientError as error:
            log.warning("commit of %d partitions failed: %s", len(offsets), error)
            raise

    async def flush_commits(self) -> None:
        while self._commit is not None or self._dirty:
            commit = self._commit or self.commit_soon(*self._dirty.popitem())
            with contextlib.suppress(MsgClientError):
                await commit

    # -- transports ---------------------------------------------------------------------

    def opened(self, transport: KafkaConsumerTransport) -> None:
        self.transports[(transport.topic, transport.partition)] = transport
        self._open += 1

    def set_topics(self, topics: list[str]) -> None:
        """A pattern subscription's topics: the group (kept past its last transport, the
        topics may come back) follows them."""
        self._held = True
        if self.group is not None:
            self.group.set_topics(topics)

    async def release(self) -> None:
        self._held = False
        if not self._open:
            await self._close_shared()

    async def closed(self) -> None:
        self._open -= 1
        if not self._open and not self._held:
            await self._close_shared()

    async def _close_shared(self) -> None:
        await self.flush_commits()
        if self.group is not None:
            await self.group.close()
        await self.fetcher.close()


class KafkaConsumerTransport(ConsumerTransport):
    redelivers_by_id = True

    def __init__(
        self,
        subscription: KafkaSubscription,
        topic: str,
        partition: int,
        options: ConsumerOptions,
        events: ConsumerEvents,
    ) -> None:
        self._subscription = subscription
        self.topic = topic
        self.partition = partition
        self._options = options
        self._events = events
        self._state = FetchState(topic, partition, self._deliver, self._on_fetch_error)
        self._tracker: OffsetTracker | None = None
        self._committed = -1
        self._redelivery_counts: dict[int, int] = {}
        subscription.opened(self)

    @property
    def rebalances(self) -> int:
        return self._subscription.rebalances

    # -- assignment ---------------------------------------------------------------------

    async def initial_offset(self, *, check_log_start: bool = True) -> int:
        """Where to start without a committed offset. Earliest is checked against the log
        start a Fetch reports (``earliest_offset``) unless ``check_log_start`` is false."""
        if self._options.start_message_id is not None:
            start = self._options.start_message_id
            if isinstance(start, KafkaMessageId) and start.partition == self.partition:
                return start.offset + (0 if self._options.start_message_id_inclusive else 1)
        if self._options.initial_position is not InitialPosition.Earliest:
            return await self._list_offset(LATEST_TIMESTAMP)
        if not check_log_start:
            return await self._list_offset(EARLIEST_TIMESTAMP)
        connection = await self._leader_connection()
        return await earliest_offset(
            connection, self.topic, self.partition, isolation_level_of(self._options)
        )

    def activate(self, position: int) -> None:
        self._tracker = OffsetTracker(position)
        self._committed = position
        self._redelivery_counts.clear()
        self._state.reset(position)
        self._events.on_active_consumer_change(True)
        self._subscription.fetcher.add(self._state)

    def deactivate(self) -> None:
        tracker = self._tracker
        if tracker is None:
            return
        if tracker.commit_position > self._committed:
            self._subscription.commit_soon((self.topic, self.partition), tracker.commit_position)
        self._tracker = None
        self._state.reset(None)
        self._subscription.fetcher.remove(self._state)
        self._events.on_partition_revoked()

    # -- ConsumerTransport --------------------------------------------------------------

    async def connect(self) -> None:
        await self._subscription.start(self._options_timeout())
        if self._subscription.group is None and self._tracker is None:
            self.activate(await self.initial_offset())

    def flow(self, permits: int) -> None:
        self._state.permits += permits
        self._subscription.fetcher.wake(self._state)

    def acknowledge(self, batch: AckBatch) -> Awaitable[None] | None:
        tracker = self._tracker
        if tracker is None:
            return None  # revoked meanwhile: the new owner reads from the committed offset
        offsets = _offsets(batch.individual)
        tracker.ack_all(offsets)
        counts = self._redelivery_counts
        if counts:
            for offset in offsets:
                counts.pop(offset, None)
        if batch.cumulative is not None:
            tracker.ack_cumulative(_offset(batch.cumulative))
        position = tracker.commit_position
        if position <= self._committed or self._subscription.group is None:
            return None
        self._committed = position
        commit = self._subscription.commit_soon((self.topic, self.partition), position)
        return commit if self._options.ack_receipt_enabled else None

    # -- acknowledgments in a transaction (TransactionManager.commit) --------------------

    def transaction_offsets(
        self, message_ids: list[MessageId]
    ) -> tuple[GroupMembership, TopicPartition, int]:
        """The group, this partition and the position to commit with ``message_ids``
        acknowledged as well; nothing changes until the transaction commits."""
        group = self._subscription.group
        if group is None:
            raise TransactionAbortableError(
                f"{self.topic}-{self.partition}: a reader (non-durable subscription) has no "
                "consumer group to commit offsets to in a transaction"
            )
        tracker = self._tracker
        if tracker is None:
            raise TransactionAbortableError(
                f"{self.topic}-{self.partition} was revoked from this consumer during the "
                "transaction: its new owner reads those messages again; abort the transaction"
            )
        return group, (self.topic, self.partition), tracker.position_with(_offsets(message_ids))

    def transaction_committed(self, message_ids: list[MessageId], position: int) -> None:
        tracker = self._tracker
        if tracker is None:
            return
        offsets = _offsets(message_ids)
        tracker.ack_all(offsets)
        for offset in offsets:
            self._redelivery_counts.pop(offset, None)
        self._committed = max(self._committed, position)  # the transaction committed it

    def redeliver(self, message_ids: list[MessageId] | None) -> None:
        if message_ids is None or self._tracker is None:
            return
        counts = self._redelivery_counts
        for message_id in message_ids:
            offset = _offset(message_id)
            count = counts[offset] = counts.get(offset, 0) + 1
            self._state.redeliveries[offset] = count
        self._subscription.fetcher.wake(self._state)

    async def seek(self, position: MessageId | int) -> None:
        if isinstance(position, MessageId):
            offset = _offset(position)
        else:
            offset = await self._list_offset(position)
            if offset < 0:
                offset = await self._list_offset(LATEST_TIMESTAMP)
        self.activate(offset)
        if self._subscription.group is not None:
            await self._subscription.commit_soon((self.topic, self.partition), offset)

    async def get_last_message_id(self) -> MessageId | None:
        end = await self._list_offset(LATEST_TIMESTAMP)
        return KafkaMessageId(self.topic, self.partition, end - 1) if end > 0 else None

    async def unsubscribe(self) -> None:
        raise NotSupportedError(
            "unsubscribe is not supported on Kafka: a consumer group has no subscription "
            "to delete; close the consumer (its offsets stay committed)"
        )

    def drop_connection(self, reason: str) -> None:
        log.info("%s-%d: %s: fetching from a fresh connection", self.topic, self.partition, reason)
        self._subscription.context.lookup.invalidate(self.topic)

    async def close(self) -> None:
        self._subscription.fetcher.remove(self._state)
        if self._tracker is not None and self._tracker.commit_position > self._committed:
            self._subscription.commit_soon(
                (self.topic, self.partition), self._tracker.commit_position
            )
        self._tracker = None
        await self._subscription.closed()

    # -- helpers ------------------------------------------------------------------------

    def _deliver(self, runs: list[Sequence[Message]], consumed_to: int) -> None:
        tracker = self._tracker
        if tracker is None:
            return
        for run in runs:
            if isinstance(run, RecordRun):
                tracker.delivered_run(run.first_offset, len(run))
            else:
                for message in run:
                    tracker.delivered(message.message_id().offset)  # type: ignore[attr-defined]
        tracker.skip_to(consumed_to)
        for run in runs:
            self._events.on_messages(run)

    def _on_fetch_error(self, error: MsgClientError) -> None:
        log.warning("%s-%d: %s", self.topic, self.partition, error)
        task = asyncio.ensure_future(self._reset_position())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _reset_position(self) -> None:
        """The position is out of range (deleted by retention): start again where
        ``initial_position`` says, as Kafka's auto.offset.reset does. ListOffsets alone
        decides: if a Fetch's log start was out of range itself, asking it again loops."""
        if self._tracker is not None:
            self.activate(await self.initial_offset(check_log_start=False))

    async def _list_offset(self, timestamp: int) -> int:
        connection = await self._leader_connection()
        return await list_offset(
            connection, self.topic, self.partition, timestamp, isolation_level_of(self._options)
        )

    async def _leader_connection(self) -> KafkaConnection:
        leader = await self._subscription.context.lookup.leader(self.topic, self.partition)
        connection: KafkaConnection = await self._subscription.context.pool.get_connection(leader)
        return connection

    def _options_timeout(self) -> float:
        return self._subscription.context.operation_timeout


def _offsets(message_ids: Sequence[MessageId]) -> list[int]:
    try:
        return [message_id.offset for message_id in message_ids]  # type: ignore[attr-defined]
    except AttributeError:
        wrong = next(i for i in message_ids if not isinstance(i, KafkaMessageId))
        raise TypeError(f"not a Kafka message id: {wrong!r}") from None


def _offset(message_id: MessageId) -> int:
    if not isinstance(message_id, KafkaMessageId):
        raise TypeError(f"not a Kafka message id: {message_id!r}")
    return message_id.offset


async def _call_user(listener: Any, method: str, partitions: list[TopicPartition]) -> None:
    if listener is None:
        return
    try:
        result = getattr(listener, method)(list(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception:  # a user callback must not break the group membership
        log.exception("rebalance listener %s failed", method)
