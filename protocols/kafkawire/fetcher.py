"""Fetcher: one Fetch request per leader broker for every fetchable partition of a consumer.

The core's permit-based flow control decides what is fetchable: a partition is asked for
only while it has permits left (the FlowWindow grants them as the application takes
messages, refilling at half the window, so the next Fetch goes out before the queue runs
dry). A fetch never delivers more messages than the partition's permits: the surplus of a
response is dropped and read again from its offset by a later fetch, and each partition's
byte budget follows its permits (permits times the mean record size seen), so little is
dropped. Buffered bytes are bounded by ``fetch_max_bytes`` per response (one fetch in
flight per broker) plus the queue's permits.

Redeliveries (negative acks, ack timeouts) are fetched apart, one offset range at a time,
and only the offsets asked for are delivered again, with their redelivery count.

Isolation (``isolation_level``): Fetch and ListOffsets carry the consumer's. Read committed,
each partition's records are decoded with the aborted transactions and last stable offset
its Fetch answer gives (records/reader.py drops aborted transactions' records and stops at the
last stable offset); read uncommitted, every record is delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kafka.protocol.consumer import FetchRequest

from msgclient.admin.types import TopicPartition
from msgclient.errors import MsgClientError
from msgclient.message import Message
from msgclient.options import ConsumerOptions
from protocols.kafkawire import admin_requests, errors
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.metadata import KafkaLookupService
from protocols.kafkawire.records import decode_record_batches
from protocols.kafkawire.records.run import RecordRun

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# isolation_level of Fetch and ListOffsets
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
# A record not to be delivered before this time (ms since the epoch): Pulsar's deliver_at,
# which Kafka lacks. The consumer holds the partition at that record until then.
DELIVER_AT_HEADER = "msgclient-deliver-at"
_MIN_PARTITION_BYTES = 64 * 1024
_RETRY_DELAY = 0.1  # after a failed fetch: the metadata and connection are looked up again

Connect = Callable[[str], Any]


class FetchState:
    """What the fetcher knows of one partition; the consumer transport owns it."""

    __slots__ = (
        "buffered",
        "deliver",
        "held_until",
        "mean_record_bytes",
        "on_error",
        "partition",
        "permits",
        "position",
        "redeliveries",
        "taken",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        deliver: Callable[[list[Sequence[Message]], int], None],
        on_error: Callable[[MsgClientError], None],
    ) -> None:
        self.topic = topic
        self.partition = partition
        # ``deliver(runs, consumed_to)``: runs of messages in offset order (maybe none), and
        # the first offset not yet delivered (nothing below it will come but redeliveries)
        self.deliver = deliver
        self.on_error = on_error  # an error the fetcher cannot retry (e.g. data lost)
        self.position: int | None = None  # next offset to fetch; None: not fetching
        self.permits = 0
        self.redeliveries: dict[int, int] = {}  # offset -> redelivery count to give it
        self.mean_record_bytes = 0.0
        self.held_until = 0.0  # loop time: a delayed record is not due yet
        # Decoded runs of the last fetch beyond the permits it met: delivered as permits
        # come back, not fetched and decoded again. At most one fetch response. ``taken``
        # of the first run are delivered already (a run is not copied to drop them).
        self.buffered: deque[Sequence[Message]] = deque()
        self.taken = 0

    def reset(self, position: int | None) -> None:
        """Fetch from ``position`` on (None: stop); what was buffered or due is dropped."""
        self.position = position
        self.buffered.clear()
        self.taken = 0
        self.held_until = 0.0
        self.redeliveries.clear()

    @property
    def fetchable(self) -> bool:
        return (
            self.position is not None
            and self.permits > 0
            and not self.held_until
            and not self.buffered
        )

    def consumed_to(self) -> int:
        """The first offset not delivered: the next buffered one, or the fetch position."""
        if self.buffered:
            return _offset_at(self.buffered[0], self.taken)
        return self.position or 0


class Fetcher:
    """The fetch loops of one consumer: one task per leader broker in use."""

    def __init__(
        self,
        lookup: KafkaLookupService,
        connect: Callable[[str], Any],
        options: ConsumerOptions,
        max_uncompressed_bytes: int,
    ) -> None:
        self._lookup = lookup
        self._connect = connect
        self._options = options
        self._max_uncompressed = max_uncompressed_bytes
        self._read_committed = isolation_level_of(options) == READ_COMMITTED
        self._states: dict[FetchState, str | None] = {}  # state -> leader address
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._closed = False

    def add(self, state: FetchState) -> None:
        self._states[state] = None
        self.wake(state)

    def remove(self, state: FetchState) -> None:
        self._states.pop(state, None)

    def wake(self, state: FetchState) -> None:
        """``state`` may have become fetchable (permits, a position, a redelivery)."""
        if self._closed or state not in self._states:
            return
        if state.buffered:
            # Not from here: wake() runs inside the application's receive (permits).
            asyncio.get_running_loop().call_soon(self._release, state)
            if not state.redeliveries:
                return
        leader = self._states[state]
        if leader is None:
            task = asyncio.ensure_future(self._locate(state))
            task.add_done_callback(_log_failure)
            return
        self._wake[leader].set()

    async def _locate(self, state: FetchState) -> None:
        try:
            leader = await self._lookup.leader(state.topic, state.partition)
        except MsgClientError as error:
            log.info("%s-%d: no leader yet (%s)", state.topic, state.partition, error)
            await asyncio.sleep(_RETRY_DELAY)
            if state in self._states and self._states[state] is None:
                self.wake(state)
            return
        if state not in self._states or self._closed:
            return
        self._states[state] = leader
        if leader not in self._loops:
            self._wake[leader] = asyncio.Event()
            self._loops[leader] = asyncio.ensure_future(self._run(leader))
        self._wake[leader].set()

    def _relocate(self, states: list[FetchState]) -> None:
        for state in states:
            self._lookup.invalidate(state.topic)
            if state in self._states:
                self._states[state] = None
                self.wake(state)

    async def close(self) -> None:
        self._closed = True
        loops = list(self._loops.values())
        for task in loops:
            task.cancel()
        for task in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the loop of one leader ---------------------------------------------------------

    async def _run(self, leader: str) -> None:
        wake = self._wake[leader]
        while not self._closed:
            mine = [s for s, where in self._states.items() if where == leader]
            redeliver = [s for s in mine if s.redeliveries and s.position is not None]
            fetchable = [s for s in mine if s.fetchable]
            if not redeliver and not fetchable:
                wake.clear()
                await wake.wait()
                continue
            try:
                connection: KafkaConnection = await self._connect(leader)
                for state in redeliver:
                    await self._fetch_redeliveries(connection, state)
                if fetchable:
                    await self._fetch(connection, fetchable)
            except MsgClientError as error:
                log.info("fetch from %s failed (%s): looking up leaders again", leader, error)
                self._relocate(mine)
                await asyncio.sleep(_RETRY_DELAY)
            except Exception:  # a bug must not end the loop in silence
                log.exception("fetch from %s failed", leader)
                self._relocate(mine)
                await asyncio.sleep(_RETRY_DELAY)

    async def _fetch(self, connection: KafkaConnection, states: list[FetchState]) -> None:
        options = self._options
        by_topic: dict[str, list[FetchState]] = {}
        for state in states:
            by_topic.setdefault(state.topic, []).append(state)
        request = _fetch_request(
            options,
            {
                topic: [(s.partition, s.position or 0, self._budget(s)) for s in group]
                for topic, group in by_topic.items()
            },
        )
        response = await connection.request(request)
        if response.error_code:
            raise errors.kafka_error(response.error_code, f"Fetch from {connection.address}")
        answers = {
            (topic.topic, p.partition_index): p
            for topic in response.responses
            for p in topic.partitions
        }
        stale: list[FetchState] = []
        for state in states:
            answer = answers.get((state.topic, state.partition))
            if answer is None or state not in self._states:
                continue
            if answer.error_code:
                self._partition_error(state, answer.error_code, stale)
                continue
            self._take(state, answer.records or b"", *self._transactions(answer))
        if stale:
            self._relocate(stale)

    def _take(
        self,
        state: FetchState,
        records: bytes,
        aborted_transactions: list[tuple[int, int]] | None = None,
        last_stable_offset: int = -1,
    ) -> None:
        """Decode one partition's fetched ``records`` (read committed: with its aborted
        transactions and last stable offset, as ``_transactions`` gives them), move the
        position past them and deliver what the permits allow."""
        position = state.position
        if position is None or state.buffered:
            return  # stopped while the fetch was out (revoked, closed, sought)
        runs, next_offset = decode_record_batches(
            records,
            state.topic,
            state.partition,
            position,
            max_uncompressed_bytes=self._max_uncompressed,
            aborted_transactions=aborted_transactions,
            last_stable_offset=last_stable_offset,
        )
        count = sum(map(len, runs))
        if count:
            state.mean_record_bytes = len(records) / count
        state.position = next_offset
        state.buffered.extend(runs)
        self._release(state, even_none=True)  # the position may have passed control records

    def _release(self, state: FetchState, even_none: bool = False) -> None:
        """Deliver what the permits allow of the buffered records, up to a delayed one."""
        buffered = state.buffered
        if state.held_until or state not in self._states:
            return
        parts: list[Sequence[Message]] = []
        permits = state.permits
        while buffered and permits > 0:
            run, start = buffered[0], state.taken
            end = min(len(run), start + permits)
            part = _part(run, start, end)
            # A delayed record carries a header: a RecordRun (records without any) has none.
            held = None if isinstance(part, RecordRun) else _first_not_due(part)
            if held is not None:  # deliver what precedes it; the rest waits until it is due
                index, due_ms = held
                part, end = part[:index], start + index
                self._hold(state, due_ms)
            if end == len(run):
                buffered.popleft()
                end = 0
            state.taken = end
            if part:
                parts.append(part)
                permits -= len(part)
            if held is not None:
                break
        if parts or even_none:
            state.permits = permits
            state.deliver(parts, state.consumed_to())
        if not buffered:
            self.wake(state)  # fetch on, if permits are left

    async def _fetch_redeliveries(self, connection: KafkaConnection, state: FetchState) -> None:
        wanted = state.redeliveries
        first = min(wanted)
        request = _fetch_request(
            self._options,
            {state.topic: [(state.partition, first, self._options.max_partition_fetch_bytes)]},
        )
        response = await connection.request(request)
        answer = response.responses[0].partitions[0] if response.responses else None
        if answer is None or answer.error_code:
            code = answer.error_code if answer is not None else errors.UNKNOWN_TOPIC_OR_PARTITION
            if code == errors.OFFSET_OUT_OF_RANGE:  # deleted by retention: nothing to redeliver
                wanted.clear()
                return
            raise errors.kafka_error(code, f"refetching {state.topic}-{state.partition}")
        aborted_transactions, last_stable_offset = self._transactions(answer)
        runs, read_to = decode_record_batches(
            answer.records or b"",
            state.topic,
            state.partition,
            first,
            max_uncompressed_bytes=self._max_uncompressed,
            aborted_transactions=aborted_transactions,
            last_stable_offset=last_stable_offset,
        )
        again: list[Message] = []
        for run in runs:
            for message in run:
                count = wanted.pop(message.message_id().offset, None)  # type: ignore[attr-defined]
                if count is not None:
                    message._redelivery_count = count
                    again.append(message)
        # What the fetch read past without finding it is gone (compacted away), or hidden
        # (read committed: an aborted transaction's record): not asked for again.
        for gone in [offset for offset in wanted if offset < read_to]:
            del wanted[gone]
        if not runs:  # nothing at or after the first offset asked for: it is gone
            wanted.pop(first, None)
        if again:
            state.deliver([again], state.consumed_to())

    def _transactions(self, answer: Any) -> tuple[list[tuple[int, int]] | None, int]:
        """Read committed: the aborted transactions ((producer id, first offset) each) and
        last stable offset of a Fetch answer's partition; read uncommitted: None, -1."""
        if not self._read_committed:
            return None, -1
        aborted = answer.aborted_transactions  # null: none
        return (
            [(int(t.producer_id), int(t.first_offset)) for t in aborted] if aborted else [],
            int(answer.last_stable_offset),
        )

    def _hold(self, state: FetchState, due_ms: int) -> None:
        loop = asyncio.get_running_loop()
        delay = max(0.0, due_ms / 1000 - time.time())
        state.held_until = loop.time() + delay

        def release() -> None:
            state.held_until = 0.0
            if state.buffered:
                self._release(state)
            else:
                self.wake(state)

        loop.call_later(delay, release)

    def _budget(self, state: FetchState) -> int:
        """Bytes to ask for: about what the partition's permits can take."""
        limit = self._options.max_partition_fetch_bytes
        if not state.mean_record_bytes:
            return limit
        wanted = int(state.permits * state.mean_record_bytes * 1.2)
        return max(min(wanted, limit), min(_MIN_PARTITION_BYTES, limit))

    def _partition_error(self, state: FetchState, code: int, stale: list[FetchState]) -> None:
        if code in errors.METADATA_ERRORS:
            stale.append(state)
            return
        error = errors.kafka_error(code, f"fetch of {state.topic}-{state.partition}")
        if code == errors.OFFSET_OUT_OF_RANGE:
            state.position = None
        state.on_error(error)


def _offset_at(run: Sequence[Message], index: int) -> int:
    if isinstance(run, RecordRun):
        return run.first_offset + index
    return run[index].message_id().offset  # type: ignore[attr-defined,no-any-return]


def _part(run: Sequence[Message], start: int, end: int) -> Sequence[Message]:
    """``run[start:end]``, the run itself when that is all of it."""
    if start == 0 and end == len(run):
        return run
    if isinstance(run, RecordRun):
        return run.part(start, end)
    return run[start:end]


def _first_not_due(messages: Sequence[Message]) -> tuple[int, int] | None:
    """The index and due time of the first message delayed into the future, if any."""
    now_ms = time.time() * 1000
    for index, message in enumerate(messages):
        headers = message._properties  # not properties(): no copy per message on this path
        if headers and DELIVER_AT_HEADER in headers:
            try:
                due = int(headers[DELIVER_AT_HEADER])
            except ValueError:
                continue  # not ours: deliver it now
            if due > now_ms:
                return index, due
    return None


def _fetch_request(
    options: ConsumerOptions, partitions: dict[str, list[tuple[int, int, int]]]
) -> Any:
    return _request(
        partitions,
        options.fetch_max_wait_ms,
        options.fetch_min_bytes,
        options.fetch_max_bytes,
        isolation_level_of(options),
    )


def _request(
    partitions: dict[str, list[tuple[int, int, int]]],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
) -> Any:
    """Fetch of ``{topic: [(partition, offset, partition max bytes)]}``."""
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=budget,
                    )
                    for partition, offset, budget in entries
                ],
            )
            for topic, entries in partitions.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def isolation_level_of(options: ConsumerOptions) -> int:
    """The isolation_level of Fetch and ListOffsets for ``options.isolation_level``."""
    return _ISOLATION_LEVELS[options.isolation_level]


async def list_offset(
    connection: KafkaConnection,
    topic: str,
    partition: int,
    timestamp: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> int:
    """ListOffsets: the first offset at or after ``timestamp`` (ms), or EARLIEST_TIMESTAMP /
    LATEST_TIMESTAMP's; -1 when no message is that late. With ``isolation_level``
    READ_COMMITTED, LATEST_TIMESTAMP's is the last stable offset (the first of an open
    transaction), not the high watermark (ListOffsets v2 and later; v1 has none)."""
    asked = TopicPartition(topic, partition)
    timeout_ms = int(connection.operation_timeout * 1000)
    request = admin_requests.list_offsets({asked: timestamp}, timeout_ms, isolation_level)
    answer = admin_requests.listed_offsets(await connection.request(request)).results()
    return answer.result(asked).offset


async def earliest_offset(
    connection: KafkaConnection, topic: str, partition: int, isolation_level: int
) -> int:
    """The partition's first offset: ListOffsets earliest, or the log start offset a Fetch
    reports when that is lower. On Kafka the two agree. tansu answers ListOffsets earliest
    with the batch *stored* first, which after concurrent produces to the partition may
    follow a lower offset (docs/kafka.md); its Fetch reports the true log start. The check
    costs a round trip only when ListOffsets answers more than 0."""
    offset = await list_offset(connection, topic, partition, EARLIEST_TIMESTAMP, isolation_level)
    if offset <= 0:
        return offset
    # Max bytes 1: a broker still answers one whole batch, the first at ``offset``. Min
    # bytes 0 answers at once; max wait 1 ms, not 0: tansu answers a Fetch of max wait 0
    # with no partitions at all.
    probe = _request({topic: [(partition, offset, 1)]}, 1, 0, 1, isolation_level)
    response = await connection.request(probe)
    answers = [p for t in response.responses for p in t.partitions]
    log_start = getattr(answers[0], "log_start_offset", -1) if answers else -1  # Fetch v5+
    return log_start if 0 <= log_start < offset else offset


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fetcher task failed", exc_info=task.exception())
