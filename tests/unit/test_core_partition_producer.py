"""PartitionProducer against a fake ProducerTransport: ids, batching, receipts, reconnects,
send timeouts and close. The test plays the broker by calling the producer's events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from msgclient.contract import OpSend, ProducerEvents, ProducerRegistration, ProducerTransport
from msgclient.core.network.backoff import Backoff, RetrySignal
from msgclient.core.send.limits import Limit
from msgclient.core.send.partition_producer import PartitionProducer
from msgclient.errors import (
    AlreadyClosedError,
    BrokerError,
    ConnectError,
    ConnectionClosedError,
    MsgClientError,
    ProducerQueueIsFullError,
    SendTimeoutError,
    TooManyRequestsError,
    TopicNotFoundError,
)
from msgclient.message import MessageId, OutgoingMessage
from msgclient.options import ProducerOptions
from msgclient.producer import Producer
from tests.unit.fakes import FakeScheduler

WAIT = 5.0  # a bound no wait here comes close to, even on a loaded machine
TOPIC = "persistent://public/default/t"
NO_DELAY_BATCHING = {"batching_enabled": True, "batching_max_publish_delay_ms": 10_000}


class FakeMessageId(MessageId):
    """The id a receipt builds: the first sequence id of the op and the batch index."""

    __slots__ = ("batch_index", "entry")

    def __init__(self, entry: int, batch_index: int) -> None:
        self.entry = entry
        self.batch_index = batch_index

    def serialize(self) -> bytes:
        return f"{self.entry}:{self.batch_index}".encode()

    def _sort_key(self) -> tuple[int, ...]:
        return (self.entry, self.batch_index)

    def __repr__(self) -> str:
        return f"FakeMessageId({self.entry}, {self.batch_index})"


def registration(last_sequence_id: int = -1) -> ProducerRegistration:
    return ProducerRegistration("fake-producer", last_sequence_id, 5 * 1024 * 1024)


class FakeTransport(ProducerTransport):
    """Records what the producer writes; ``connect`` results are scripted.

    Frames are ``b"<first id>-<highest id>"``, so the tests read the order on the wire.
    Writes while offline are dropped, as on a real dead connection.
    """

    def __init__(self, events: ProducerEvents) -> None:
        self.events = events
        self.script: list[ProducerRegistration | BaseException] = []  # then: registration()
        self.connects = 0
        self.online = False
        self.written: list[bytes] = []
        self.dropped: list[str] = []
        self.closed = False
        self.encode_error: MsgClientError | None = None
        self.chunk_size: int | None = None  # an unbatched message over it goes in chunks
        self.encoded: list[list[bytes | None]] = []  # each op's values (None: a null value)
        self.as_columns: list[bool] = []  # each op: values as columns (no OutgoingMessage)
        self._changed = asyncio.Event()

    # -- ProducerTransport --------------------------------------------------------------

    async def connect(self) -> ProducerRegistration:
        self.connects += 1
        self._changed.set()
        result = self.script.pop(0) if self.script else registration()
        if isinstance(result, BaseException):
            raise result
        self.online = True
        return result

    def encode(self, op: OpSend) -> bytes:
        if self.encode_error is not None:
            raise self.encode_error
        if self.chunk_size is not None and not op.is_batch:
            op.chunks = -(-len(op.messages[0].value) // self.chunk_size)
        self.as_columns.append(op.columns is not None)
        if op.columns is not None:
            self.encoded.append(list(op.columns.values))
        else:
            self.encoded.append([None if m.null_value else m.value for m in op.messages])
        return f"{op.sequence_id}-{op.highest_sequence_id}".encode()

    def write(self, op: OpSend) -> None:
        if self.online:
            self.written.append(op.frame)
            self._changed.set()

    def drop_connection(self, reason: str) -> None:
        self.dropped.append(reason)
        self.disconnect()

    async def close(self) -> None:
        self.closed = True
        self.online = False

    # -- the broker's side --------------------------------------------------------------

    def disconnect(self) -> None:
        self.online = False
        self.events.on_disconnected(ConnectionClosedError("connection lost"))

    def receipt(self, sequence_id: int, highest_sequence_id: int | None = None) -> None:
        def message_ids(op: OpSend) -> list[MessageId]:
            if not op.is_batch:
                return [FakeMessageId(sequence_id, -1)]
            return [FakeMessageId(sequence_id, i) for i in range(op.count)]

        highest = sequence_id if highest_sequence_id is None else highest_sequence_id
        self.events.on_receipt(sequence_id, highest, message_ids)

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not condition():
                self._changed.clear()
                await self._changed.wait()


class Harness:
    """A PartitionProducer on a FakeTransport, with the client's memory limit; its batch
    delay, send timeout and registration deadline on ``clock`` when given (the loop's
    otherwise)."""

    def __init__(
        self,
        memory_limit: int = 0,
        max_pending: int = 0,
        clock: FakeScheduler | None = None,
        columns: bool = False,
        backoff: Backoff | None = None,
        **options: Any,
    ) -> None:
        self.memory = Limit(memory_limit)
        self.columns = columns  # the transport encodes columns: messages without options go so
        self.transports: list[FakeTransport] = []
        self.producer = PartitionProducer(
            TOPIC,
            ProducerOptions(**options),
            self.memory,
            self._transport_factory,
            backoff or Backoff(0.001, 0.004),
            max_pending,
            scheduler=clock,
        )

    def _transport_factory(self, events: ProducerEvents) -> ProducerTransport:
        transport = FakeTransport(events)
        transport.encodes_columns = self.columns
        self.transports.append(transport)
        return transport

    @property
    def transport(self) -> FakeTransport:
        (transport,) = self.transports
        return transport

    async def start(self, last_sequence_id: int = -1) -> None:
        self.transport.script.append(registration(last_sequence_id))
        async with asyncio.timeout(WAIT):
            await self.producer.start(timeout=WAIT)

    def send(self, value: bytes = b"v", **fields: Any) -> asyncio.Future[MessageId]:
        """What Producer.send_async does: take the limits, then enqueue."""
        assert self.producer.pending_messages.try_acquire(1)
        assert self.memory.try_acquire(len(value))
        future: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        self.producer.enqueue(OutgoingMessage(value, future, **fields))
        return future

    async def send_chunkable(self, value: bytes, block: bool = True) -> asyncio.Future[MessageId]:
        """What Producer.send_async does on a chunking producer."""
        await self.producer.pending_messages.acquire(1)
        assert self.memory.try_acquire(len(value))
        future: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        await self.producer.enqueue_chunkable(OutgoingMessage(value, future), block)
        return future

    @property
    def limits_used(self) -> tuple[int, int]:
        return self.producer.pending_messages.used, self.memory.used


MakeHarness = Callable[..., Harness]


@pytest.fixture
async def make_harness() -> AsyncIterator[MakeHarness]:
    made: list[Harness] = []

    def make(**options: Any) -> Harness:
        harness = Harness(**options)
        made.append(harness)
        return harness

    yield make
    for harness in made:  # stops the timers and any reconnect
        await harness.producer.close(0)


async def settled(*futures: asyncio.Future[Any]) -> None:
    async with asyncio.timeout(WAIT):
        await asyncio.wait(futures)


# -- sequence ids -------------------------------------------------------------------------


async def test_sequence_ids_continue_from_the_brokers_last_sequence_id(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_enabled=False)
    await h.start(last_sequence_id=41)
    h.send()
    h.send()
    assert h.transport.written == [b"42-42", b"43-43"]
    assert h.producer.last_sequence_id_pushed == 43
    assert h.producer.last_sequence_id_published == 41


async def test_a_new_producer_starts_at_zero(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start(last_sequence_id=-1)
    h.send()
    assert h.transport.written == [b"0-0"]


async def test_initial_sequence_id_wins_over_the_broker(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False, initial_sequence_id=100)
    await h.start(last_sequence_id=41)
    h.send()
    assert h.transport.written == [b"101-101"]


async def test_reconnect_does_not_reset_sequence_ids(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start(last_sequence_id=9)
    h.send()
    h.transport.receipt(10)
    h.transport.script.append(registration(last_sequence_id=500))  # ignored after the first
    h.transport.disconnect()
    await h.transport.wait_until(lambda: h.transport.online)
    h.send()
    assert h.transport.written == [b"10-10", b"11-11"]


# -- first registration -------------------------------------------------------------------


async def test_start_retries_transient_failures(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    h.transport.script += [ConnectError("refused"), BrokerError("ServiceNotReady", "loading")]
    await h.start(last_sequence_id=6)
    assert h.transport.connects == 3
    h.send()
    assert h.transport.written == [b"7-7"]


async def test_start_raises_a_permanent_failure_at_once(make_harness: MakeHarness) -> None:
    h = make_harness()
    refused = BrokerError("ProducerBusy", "taken")
    h.transport.script.append(refused)
    with pytest.raises(BrokerError) as caught:
        async with asyncio.timeout(WAIT):
            await h.producer.start(timeout=WAIT)
    assert caught.value is refused
    assert h.transport.connects == 1


async def test_start_gives_up_at_its_timeout(make_harness: MakeHarness) -> None:
    # On a fake clock each attempt takes 10 ms; the backoff (1-4 ms) is shorter, so the
    # attempts come at 10, 20, ... ms, and after the fifth no retry fits in 50 ms.
    clock = FakeScheduler()
    h = make_harness(clock=clock)
    h.transport.script += [ConnectError(f"refused {i}") for i in range(1000)]
    connect = h.transport.connect

    async def connect_taking_10_ms() -> ProducerRegistration:
        clock.advance(0.01)
        return await connect()

    h.transport.connect = connect_taking_10_ms  # type: ignore[method-assign]
    with pytest.raises(ConnectError, match="refused 4"):
        async with asyncio.timeout(WAIT):
            await h.producer.start(timeout=0.05)
    assert h.transport.connects == 5  # every retry that fit, and not one more
    assert clock.time() == pytest.approx(0.05)  # it gave up at its deadline, not after


# -- batching -----------------------------------------------------------------------------


async def test_batch_closes_on_max_messages(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3)
    await h.start()
    h.send()
    h.send()
    assert h.transport.written == []
    assert h.producer.pending_count == 2  # the open batch counts as pending
    h.send()
    assert h.transport.written == [b"0-2"]
    h.send()
    assert h.transport.written == [b"0-2"]


async def test_enqueue_tells_when_it_closed_a_batch(make_harness: MakeHarness) -> None:
    h = make_harness(
        **NO_DELAY_BATCHING, batching_max_messages=2, batching_max_allowed_size_in_bytes=4
    )

    def enqueue(value: bytes) -> bool:
        assert h.producer.pending_messages.try_acquire(1)
        future: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        return h.producer.enqueue(OutgoingMessage(value, future))

    await h.start()
    assert [enqueue(b"a"), enqueue(b"b")] == [False, True]  # full on messages
    assert [enqueue(b"ccc"), enqueue(b"dd")] == [False, True]  # no space: the open one closed
    assert h.transport.written == [b"0-1", b"2-2"]


def producer_over(h: Harness, **options: Any) -> Producer:
    return Producer(
        TOPIC, ProducerOptions(**options), [h.producer], None, h.memory, 0, lambda _: None
    )


async def test_send_async_gives_the_loop_a_turn_after_closing_a_batch(
    make_harness: MakeHarness,
) -> None:
    """A task sending in a loop lets the batches it closed reach the socket as it goes."""
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3)
    await h.start()
    producer = producer_over(h)
    loop = asyncio.get_running_loop()
    ran: list[int] = []
    seen: list[int] = []
    for i in range(6):
        loop.call_soon(ran.append, i)
        await producer.send_async(b"v")
        seen.append(len(ran))
    assert seen == [0, 0, 0, 4, 4, 4]  # the call after each closed batch waited one turn
    assert h.transport.written == [b"0-2", b"3-5"]


async def test_a_send_cancelled_during_its_turn_queued_nothing(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3)
    await h.start()
    producer = producer_over(h)
    for _ in range(3):
        await producer.send_async(b"v")  # the third closes a batch: the next call yields
    task = asyncio.ensure_future(producer.send_async(b"x"))
    await asyncio.sleep(0)  # the task is in its turn
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert h.producer.pending_count == 3
    assert h.limits_used == (3, 3)


async def test_a_delayed_message_goes_alone_after_the_open_batch(
    make_harness: MakeHarness,
) -> None:
    # As the Java client: delivery at a time is per entry, so it cannot share a batch, and
    # the open batch goes first to keep sequence ids in order along the pending queue.
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=10)
    await h.start()
    h.send()
    h.send()
    h.send(deliver_at=123)
    assert h.transport.written == [b"0-1", b"2-2"]


async def test_batch_closes_on_max_bytes(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_allowed_size_in_bytes=10)
    await h.start()
    h.send(b"a" * 6)
    h.send(b"b" * 6)  # would overflow: the open batch goes first, this one starts the next
    assert h.transport.written == [b"0-0"]
    h.send(b"c" * 4)  # exactly 10 bytes: full
    assert h.transport.written == [b"0-0", b"1-2"]
    h.send(b"d" * 50)  # larger than a batch: goes alone
    assert h.transport.written == [b"0-0", b"1-2", b"3-3"]


async def test_batches_close_on_the_grid_of_the_publish_delay(make_harness: MakeHarness) -> None:
    # As the Java client's periodic batch timer: a batch closes one delay after the last
    # close, not one delay after its first message (which would double the average wait).
    clock = FakeScheduler()
    h = make_harness(clock=clock, batching_enabled=True, batching_max_publish_delay_ms=40)
    await h.start()
    h.send()  # the first batch closes one delay after the producer was made
    clock.advance(0.04)
    await asyncio.sleep(0)  # the close runs at the end of the timer's loop turn
    assert h.transport.written == [b"0-0"]
    clock.advance(0.03)
    h.send()
    h.send()
    clock.advance(0.009)
    await asyncio.sleep(0)
    assert h.transport.written == [b"0-0"]  # not before the grid point
    clock.advance(0.002)
    await asyncio.sleep(0)
    # At the grid point (40 ms after the last close), not a delay after its first
    # message (70 ms).
    assert h.transport.written == [b"0-0", b"1-2"]


async def test_an_idle_producer_sends_at_the_end_of_the_turn(make_harness: MakeHarness) -> None:
    # No batch went out during the last delay: waiting for the next one gains nothing, and
    # the messages published in this turn still go together.
    h = make_harness(batching_enabled=True, batching_max_publish_delay_ms=20)
    await h.start()
    await asyncio.sleep(0.03)
    h.send()
    h.send()
    assert h.transport.written == []
    await asyncio.sleep(0)
    assert h.transport.written == [b"0-1"]


async def test_a_message_of_the_turn_the_delay_ends_in_joins_the_batch(
    make_harness: MakeHarness,
) -> None:
    # A busy loop makes the batch timer and a send due in the same turn: the message goes
    # with the batch rather than wait a whole delay in the next one.
    h = make_harness(batching_enabled=True, batching_max_publish_delay_ms=200)
    await h.start()
    h.send()  # its batch closes 200 ms after the producer was made
    loop = asyncio.get_running_loop()
    now = loop.time()
    loop.call_at(now + 0.01, time.sleep, 0.25)
    loop.call_at(now + 0.2, h.send)
    await h.transport.wait_until(lambda: bool(h.transport.written))
    assert h.transport.written == [b"0-1"]


async def test_flush_sends_the_open_batch_and_waits_for_it(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING)
    await h.start()
    futures = [h.send(), h.send()]
    flush = asyncio.ensure_future(h.producer.flush())
    await h.transport.wait_until(lambda: h.transport.written == [b"0-1"])
    assert not flush.done()
    h.transport.receipt(0, 1)
    async with asyncio.timeout(WAIT):
        await flush
    assert all(f.done() for f in futures)


# -- receipts -----------------------------------------------------------------------------


async def test_receipt_completes_a_batch_with_the_ids_the_transport_builds(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3, memory_limit=1000)
    await h.start()
    futures = [h.send(b"abc") for _ in range(3)]
    assert h.limits_used == (3, 9)
    h.transport.receipt(0, 2)
    assert [f.result() for f in futures] == [FakeMessageId(0, i) for i in range(3)]
    assert h.limits_used == (0, 0)
    assert h.producer.last_sequence_id_published == 2
    assert h.producer.pending_count == 0


async def test_receipts_complete_ops_in_order(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start()
    futures = [h.send() for _ in range(3)]
    h.transport.receipt(0)
    assert futures[0].result() == FakeMessageId(0, -1)
    assert not futures[1].done()
    h.transport.receipt(1)
    h.transport.receipt(2)
    assert [f.result() for f in futures] == [FakeMessageId(i, -1) for i in range(3)]


async def test_receipt_with_a_lower_sequence_id_is_ignored(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start(last_sequence_id=4)
    futures = [h.send(), h.send()]
    h.transport.receipt(4)  # late: for an op that is gone already
    assert not any(f.done() for f in futures)
    assert h.transport.dropped == []
    h.transport.receipt(5)
    assert futures[0].result() == FakeMessageId(5, -1)


async def test_receipt_with_a_higher_sequence_id_drops_the_connection(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_enabled=False)
    await h.start(last_sequence_id=4)
    futures = [h.send(), h.send()]
    h.transport.receipt(6)  # the broker skipped 5: out of step
    assert h.transport.dropped == ["receipt 6 while expecting 5"]
    assert not any(f.done() for f in futures)
    # ... and the reconnect resends both, which the broker now confirms.
    await h.transport.wait_until(lambda: len(h.transport.written) == 4)
    assert h.transport.written == [b"5-5", b"6-6", b"5-5", b"6-6"]
    h.transport.receipt(5)
    h.transport.receipt(6)
    assert [f.result() for f in futures] == [FakeMessageId(5, -1), FakeMessageId(6, -1)]


async def test_send_error_fails_only_the_op_at_the_head(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False, memory_limit=100)
    await h.start()
    futures = [h.send(b"ab"), h.send(b"cd")]
    refused = BrokerError("ChecksumError", "corrupt")
    h.producer.on_send_error(1, refused)  # not the head: ignored
    assert not any(f.done() for f in futures)
    h.producer.on_send_error(0, refused)
    assert futures[0].exception() is refused
    assert not futures[1].done()
    assert h.limits_used == (1, 2)
    h.transport.receipt(1)
    assert futures[1].result() == FakeMessageId(1, -1)


# -- reconnects ---------------------------------------------------------------------------


async def test_reconnect_resends_pending_in_order_before_new_messages(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_enabled=False)
    await h.start()
    futures = [h.send(), h.send()]
    h.transport.disconnect()
    futures.append(h.send())  # while disconnected: queued, not written
    assert h.transport.written == [b"0-0", b"1-1"]
    await h.transport.wait_until(lambda: h.transport.online)
    futures.append(h.send())
    assert h.transport.written == [b"0-0", b"1-1", b"0-0", b"1-1", b"2-2", b"3-3"]
    assert h.transport.connects == 2
    for sequence_id in range(4):
        h.transport.receipt(sequence_id)
    assert [f.result() for f in futures] == [FakeMessageId(i, -1) for i in range(4)]


async def test_reconnect_retries_with_backoff_until_it_succeeds(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_enabled=False)
    await h.start()
    future = h.send()
    h.transport.script += [
        ConnectError("refused"),
        ConnectionClosedError("closed during the handshake"),
        BrokerError("ServiceNotReady", "not yet"),  # a retriable broker error
    ]
    h.transport.disconnect()
    await h.transport.wait_until(lambda: h.transport.online)
    assert h.transport.connects == 5  # the first, three failures, the success
    h.transport.receipt(0)
    assert future.result() == FakeMessageId(0, -1)


async def test_a_cluster_switch_right_after_a_disconnect_reconnects_at_once(
    make_harness: MakeHarness,
) -> None:
    """A switch in the same loop step as the disconnect comes before the reconnect's first
    wait: it was missed, and the producer waited its initial backoff out (10 s in the CI
    run of tests/pulsar/test_cluster_failover.py that failed)."""
    signal = RetrySignal()
    h = make_harness(batching_enabled=False, backoff=Backoff(10.0, 60.0, signal=signal))
    await h.start()
    h.transport.disconnect()
    signal.fire()  # what ClusterSwitch does; the reconnect task has not run yet
    await h.transport.wait_until(lambda: h.transport.online)  # within WAIT, not 9-10 s
    assert h.transport.connects == 2


async def test_fatal_broker_error_on_reconnect_fails_everything(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, memory_limit=100)
    await h.start()
    pending = [h.send(), h.send()]
    fatal = TopicNotFoundError("TopicNotFound", "deleted")
    h.transport.script.append(fatal)
    h.transport.disconnect()
    await settled(*pending)
    assert all(f.exception() is fatal for f in pending)
    assert h.limits_used == (0, 0)
    late = h.send()
    assert isinstance(late.exception(), AlreadyClosedError)


async def test_too_many_requests_on_reconnect_is_retried(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start()
    future = h.send()
    h.transport.script.append(TooManyRequestsError("TooManyRequests: slow down"))
    h.transport.disconnect()
    await h.transport.wait_until(lambda: h.transport.online)
    h.transport.receipt(0)
    assert future.result() == FakeMessageId(0, -1)


# -- failures -----------------------------------------------------------------------------


async def test_send_timeout_fails_everything_pending_and_releases_the_limits(
    make_harness: MakeHarness,
) -> None:
    clock = FakeScheduler()
    h = make_harness(
        clock=clock,
        **NO_DELAY_BATCHING,
        batching_max_messages=2,
        send_timeout_millis=50,
        memory_limit=1000,
    )
    await h.start()
    written = [h.send(b"ab"), h.send(b"cd")]  # a full batch: written, never confirmed
    open_batch = [h.send(b"ef")]  # still in the open batch: covered by the timeout too
    assert h.limits_used == (3, 6)
    clock.advance(0.049)
    assert not any(f.done() for f in written + open_batch)
    clock.advance(0.002)
    for future in written + open_batch:
        assert isinstance(future.exception(), SendTimeoutError)
    assert "50 ms" in str(written[0].exception())
    assert h.limits_used == (0, 0)
    assert h.producer.pending_count == 0
    h.transport.receipt(0, 1)  # the broker's late receipt changes nothing
    assert h.limits_used == (0, 0)


async def test_send_timeout_zero_never_times_out(make_harness: MakeHarness) -> None:
    clock = FakeScheduler()
    h = make_harness(clock=clock, batching_enabled=False, send_timeout_millis=0)
    await h.start()
    future = h.send()
    clock.advance(3600)
    assert not future.done()
    assert clock.armed == 0  # no timer at all


async def test_encode_failure_fails_the_message_and_releases_its_limits(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_enabled=False, memory_limit=100)
    await h.start()
    h.transport.encode_error = MsgClientError("no codec")
    future = h.send(b"12345")
    assert future.exception() is h.transport.encode_error
    assert h.limits_used == (0, 0)
    assert h.transport.written == []


# -- close --------------------------------------------------------------------------------


async def test_close_flushes_first(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING)
    await h.start()
    futures = [h.send(), h.send()]
    closing = asyncio.ensure_future(h.producer.close(flush_timeout=WAIT))
    await h.transport.wait_until(lambda: h.transport.written == [b"0-1"])
    assert not closing.done()
    h.transport.receipt(0, 1)
    async with asyncio.timeout(WAIT):
        await closing
    assert [f.result() for f in futures] == [FakeMessageId(0, 0), FakeMessageId(0, 1)]
    assert h.transport.closed


async def test_close_fails_what_the_flush_could_not_deliver(make_harness: MakeHarness) -> None:
    h = make_harness(**NO_DELAY_BATCHING, memory_limit=100)
    await h.start()
    futures = [h.send(b"abc"), h.send(b"def")]
    async with asyncio.timeout(WAIT):
        await h.producer.close(flush_timeout=0.05)
    for future in futures:
        assert isinstance(future.exception(), AlreadyClosedError)
    assert h.limits_used == (0, 0)
    assert h.transport.closed


async def test_close_while_disconnected_stops_reconnecting(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False)
    await h.start()
    future = h.send()
    h.transport.script += [ConnectError("refused")] * 1000
    h.transport.disconnect()
    async with asyncio.timeout(WAIT):
        await h.producer.close(flush_timeout=0.02)
    assert isinstance(future.exception(), AlreadyClosedError)
    connects = h.transport.connects
    await asyncio.sleep(0.02)
    assert h.transport.connects == connects


async def test_send_after_close_fails_and_releases_its_limits(make_harness: MakeHarness) -> None:
    h = make_harness(batching_enabled=False, memory_limit=100)
    await h.start()
    async with asyncio.timeout(WAIT):
        await h.producer.close(flush_timeout=WAIT)
    future = h.send(b"late")
    assert isinstance(future.exception(), AlreadyClosedError)
    assert h.limits_used == (0, 0)


async def test_an_encoded_op_keeps_futures_and_callbacks_but_not_the_messages(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3)
    await h.start()
    called: list[tuple[BaseException | None, MessageId | None]] = []
    futures = [
        h.send(b"a", callback=lambda error, message_id: called.append((error, message_id))),
        h.send(b"b"),
        h.send(b"c", callback=lambda error, message_id: called.append((error, message_id))),
    ]
    (op,) = h.producer._pending
    assert op.messages == [] and op.count == 3 and op.frame  # the frame holds the payloads
    h.transport.receipt(0, 2)
    assert [f.result() for f in futures] == [FakeMessageId(0, i) for i in range(3)]
    assert called == [(None, FakeMessageId(0, 0)), (None, FakeMessageId(0, 2))]
    called.clear()
    failing = h.send(b"d", callback=lambda error, message_id: called.append((error, message_id)))
    h.producer._close_batch()
    h.transport.disconnect()
    await h.producer.close(0)
    assert isinstance(failing.exception(), MsgClientError)
    assert len(called) == 1 and isinstance(called[0][0], MsgClientError)


async def test_a_send_with_a_callback_makes_no_future_and_flush_waits_for_it(
    make_harness: MakeHarness,
) -> None:
    """As pulsar-client's send_async(content, callback): nothing returned, the callback
    hears; an op of callbacks alone keeps no futures, and flush still waits for it."""
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=2)
    await h.start()
    producer = producer_over(h)
    called: list[tuple[BaseException | None, MessageId | None]] = []

    def callback(error: BaseException | None, message_id: MessageId | None) -> None:
        called.append((error, message_id))

    assert await producer.send_async(b"a", callback) is None
    assert await producer.send_async(b"b", callback) is None  # closes the batch
    (op,) = h.producer._pending
    assert op.futures is None and op.callbacks == [callback, callback]
    flush = asyncio.ensure_future(producer.flush())
    await asyncio.sleep(0)
    assert not flush.done()
    h.transport.receipt(0, 1)
    async with asyncio.timeout(WAIT):
        await flush
    assert called == [(None, FakeMessageId(0, 0)), (None, FakeMessageId(0, 1))]
    # A batch of both kinds: the future and the callback each get their own message's id.
    called.clear()
    future = await producer.send_async(b"c")
    assert await producer.send_async(b"d", callback) is None
    h.transport.receipt(2, 3)
    assert future.result() == FakeMessageId(2, 0)
    assert called == [(None, FakeMessageId(2, 1))]
    # Failure reaches the callback; flush of a failed op returns.
    called.clear()
    await producer.send_async(b"e", callback)
    flush = asyncio.ensure_future(producer.flush())
    await h.transport.wait_until(lambda: len(h.transport.written) == 3)
    await h.producer.close(0)
    async with asyncio.timeout(WAIT):
        await flush
    ((error, message_id),) = called
    assert isinstance(error, MsgClientError) and message_id is None


async def test_a_raising_callback_is_reported_and_the_others_still_run(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3)
    await h.start()
    producer = producer_over(h)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    called: list[str] = []

    def calling(name: str) -> Callable[[BaseException | None, MessageId | None], None]:
        def callback(error: BaseException | None, message_id: MessageId | None) -> None:
            called.append(name)
            if name == "b":
                raise RuntimeError("the application's bug")

        return callback

    try:
        for name in "abc":
            await producer.send_async(name.encode(), calling(name))
        h.transport.receipt(0, 2)
    finally:
        loop.set_exception_handler(None)
    assert called == ["a", "b", "c"]
    (context,) = reported
    assert context["message"] == "exception in send callback"
    assert str(context["exception"]) == "the application's bug"


# -- messages without options: kept by the batch as columns -------------------------------


async def test_messages_without_options_go_as_columns_with_their_futures_and_callbacks(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=3, columns=True)
    await h.start()
    producer = producer_over(h)
    called: list[tuple[BaseException | None, MessageId | None]] = []

    def callback(error: BaseException | None, message_id: MessageId | None) -> None:
        called.append((error, message_id))

    first = await producer.send_async(b"a")
    assert await producer.send_async(None, callback) is None  # a null value
    third = await producer.send_async(b"ccc")  # closes the batch: 3 messages
    (op,) = h.producer._pending
    assert h.transport.as_columns == [True] and not op.is_bulk
    assert h.transport.encoded == [[b"a", None, b"ccc"]]
    assert h.transport.written == [b"0-2"]
    assert h.limits_used == (3, 4)
    h.transport.receipt(0, 2)
    assert (first.result(), third.result()) == (FakeMessageId(0, 0), FakeMessageId(0, 2))
    assert called == [(None, FakeMessageId(0, 1))]
    assert h.limits_used == (0, 0)


async def test_a_message_with_options_turns_the_open_columns_into_messages_in_order(
    make_harness: MakeHarness,
) -> None:
    """One batch keeps the order (and consecutive sequence ids) of both kinds."""
    h = make_harness(**NO_DELAY_BATCHING, batching_max_messages=4, columns=True)
    await h.start()
    producer = producer_over(h)
    futures = [
        await producer.send_async(b"a"),
        await producer.send_async(b"b", properties={"k": "v"}),
        await producer.send_async(b"c"),
        await producer.send_async(None),
    ]
    (op,) = h.producer._pending
    assert h.transport.as_columns == [False] and op.count == 4
    assert h.transport.encoded == [[b"a", b"b", b"c", None]]
    assert h.transport.written == [b"0-3"]
    h.transport.receipt(0, 3)
    assert [f.result() for f in futures] == [FakeMessageId(0, i) for i in range(4)]
    # The next batch is columns again.
    await producer.send_async(b"d")
    h.producer._close_batch()
    assert h.transport.encoded[-1] == [b"d"] and h.transport.as_columns == [False, True]


async def test_columns_close_on_bytes_and_a_message_that_does_not_fit_starts_the_next(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(**NO_DELAY_BATCHING, batching_max_allowed_size_in_bytes=5, columns=True)
    await h.start()
    producer = producer_over(h)
    for value in (b"aa", b"bb", b"ccc", b"dd"):
        await producer.send_async(value)
    h.producer._close_batch()
    assert h.transport.encoded == [[b"aa", b"bb"], [b"ccc", b"dd"]]
    assert h.transport.written == [b"0-1", b"2-3"]


async def test_open_columns_fail_at_close_and_a_send_after_close_fails(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batching_max_publish_delay_ms=60_000, columns=True)
    await h.start()
    producer = producer_over(h)
    called: list[BaseException | None] = []
    open_future = await producer.send_async(b"open")
    await producer.send_async(b"open too", lambda error, _: called.append(error))
    h.transport.disconnect()  # nothing can be delivered: close gives up at once
    await h.producer.close(0)
    assert isinstance(open_future.exception(), AlreadyClosedError)
    assert len(called) == 1 and isinstance(called[0], AlreadyClosedError)
    assert h.limits_used == (0, 0)
    late = asyncio.get_running_loop().create_future()
    assert not h.producer.enqueue_plain(b"late", 4, late, None)
    assert isinstance(late.exception(), AlreadyClosedError)


# -- chunked messages: a pending-message permit per chunk ----------------------------------

CHUNKING = {"batching_enabled": False, "chunking_enabled": True}


async def chunking_harness(make_harness: MakeHarness, max_pending: int, **options: Any) -> Harness:
    h = make_harness(max_pending=max_pending, memory_limit=10_000, **CHUNKING, **options)
    await h.start()
    h.transport.chunk_size = 10
    return h


async def test_each_chunk_holds_a_pending_permit_until_the_receipt(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=10)
    future = await h.send_chunkable(b"x" * 35)  # 4 chunks
    assert h.limits_used == (4, 35)
    assert h.transport.written == [b"0-0"]
    h.transport.receipt(0)
    assert future.done()
    assert h.limits_used == (0, 0)


async def test_chunks_that_do_not_fit_fail_fast_and_take_nothing(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=4)
    first = await h.send_chunkable(b"x" * 15, block=False)  # 2 chunks
    with pytest.raises(ProducerQueueIsFullError, match="3 chunks needs 3 of the 4"):
        await h.send_chunkable(b"y" * 25, block=False)
    assert h.limits_used == (2, 15)  # the refused message holds nothing
    small = await h.send_chunkable(b"z", block=False)
    assert h.transport.written == [b"0-0", b"1-1"]  # its sequence id went to the next
    h.transport.receipt(0)
    h.transport.receipt(1)
    await settled(first, small)
    assert h.limits_used == (0, 0)


async def test_a_blocked_chunked_message_waits_for_permits_and_later_sends_wait_behind_it(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=4)
    first = await h.send_chunkable(b"x" * 25)  # 3 chunks
    chunked = asyncio.ensure_future(h.send_chunkable(b"y" * 25))  # 3 more: waits
    await settle_tasks()
    later = asyncio.ensure_future(h.send_chunkable(b"z"))  # would fit, waits in line
    await settle_tasks()
    assert not chunked.done() and not later.done()
    assert h.transport.written == [b"0-0"]
    h.transport.receipt(0)
    async with asyncio.timeout(WAIT):
        second, third = await chunked, await later
    assert h.transport.written == [b"0-0", b"1-1", b"2-2"]  # in the order sent
    h.transport.receipt(1)
    h.transport.receipt(2)
    await settled(first, second, third)
    assert h.limits_used == (0, 0)


async def test_a_message_of_more_chunks_than_the_limit_goes_alone(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=3)
    small = await h.send_chunkable(b"a")
    big = asyncio.ensure_future(h.send_chunkable(b"x" * 55))  # 6 chunks > 3
    await settle_tasks()
    assert not big.done()
    h.transport.receipt(0)
    async with asyncio.timeout(WAIT):
        big_future = await big
    assert h.limits_used == (6, 55)
    h.transport.receipt(1)
    await settled(small, big_future)
    assert h.limits_used == (0, 0)


async def test_a_chunked_send_cancelled_while_waiting_gives_its_limits_back(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=2)
    first = await h.send_chunkable(b"x" * 15)  # 2 chunks
    waiting = asyncio.ensure_future(h.send_chunkable(b"y" * 15))
    await settle_tasks()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert h.limits_used == (2, 15)
    h.transport.receipt(0)
    await settled(first)
    assert h.limits_used == (0, 0)
    assert h.transport.written == [b"0-0"]


async def test_a_chunked_send_waiting_when_the_producer_closes_fails(
    make_harness: MakeHarness,
) -> None:
    h = await chunking_harness(make_harness, max_pending=2)
    first = await h.send_chunkable(b"x" * 15)
    waiting = asyncio.ensure_future(h.send_chunkable(b"y" * 15))
    await settle_tasks()
    await h.producer.close(0)  # fails the first: its permits let the waiter on
    async with asyncio.timeout(WAIT):
        second = await waiting
    assert isinstance(first.exception(), AlreadyClosedError)
    assert isinstance(second.exception(), AlreadyClosedError)
    assert h.limits_used == (0, 0)


async def test_a_send_timeout_releases_every_chunk_permit(make_harness: MakeHarness) -> None:
    clock = FakeScheduler()
    h = await chunking_harness(make_harness, max_pending=10, clock=clock, send_timeout_millis=50)
    future = await h.send_chunkable(b"x" * 45)  # 5 chunks
    assert h.limits_used == (5, 45)
    clock.advance(0.051)
    assert isinstance(future.exception(), SendTimeoutError)
    assert h.limits_used == (0, 0)


async def settle_tasks() -> None:
    for _ in range(5):
        await asyncio.sleep(0)
