"""The core consumer (PartitionConsumer + Consumer) against a fake transport: no broker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any

import pytest

from msgclient.consumer import Consumer
from msgclient.contract import AckBatch, ConsumerEvents, ConsumerTransport
from msgclient.core.network.backoff import Backoff
from msgclient.core.receive.dead_letters import ORIGIN_MESSAGE_ID, REAL_TOPIC, DeadLetterRouter
from msgclient.core.receive.partition_consumer import PartitionConsumer
from msgclient.core.receive.receive_queue import ReceiveQueue
from msgclient.errors import (
    AlreadyClosedError,
    ConnectionClosedError,
    InvalidConfigurationError,
    ReceiveTimeoutError,
)
from msgclient.message import Message, MessageId
from msgclient.options import (
    BatchReceivePolicy,
    ConsumerOptions,
    ConsumerType,
    DeadLetterPolicy,
    InitialPosition,
    SubscriptionMode,
)
from msgclient.reader import Reader
from tests.unit.fakes import FakeScheduler

TOPIC = "persistent://public/default/t"


class Id(MessageId):
    __slots__ = ("entry",)

    def __init__(self, entry: int) -> None:
        self.entry = entry

    def _sort_key(self) -> tuple[int, ...]:
        return (self.entry,)

    def serialize(self) -> bytes:
        return str(self.entry).encode()

    def __repr__(self) -> str:
        return f"Id({self.entry})"


def message(entry: int, redelivery_count: int = 0, value: bytes = b"v") -> Message:
    return Message(value, Id(entry), TOPIC, redelivery_count=redelivery_count)


class FakeTransport(ConsumerTransport):
    """Records what the consumer asks of the broker."""

    def __init__(self, events: ConsumerEvents) -> None:
        self.events = events
        self.connects = 0
        self.permits: list[int] = []
        self.acks: list[AckBatch] = []
        self.redelivered: list[list[MessageId] | None] = []
        self.closed = False

    async def connect(self) -> None:
        self.connects += 1

    def flow(self, permits: int) -> None:
        self.permits.append(permits)

    def acknowledge(self, batch: AckBatch) -> Awaitable[None] | None:
        self.acks.append(batch)
        return None

    def redeliver(self, message_ids: list[MessageId] | None) -> None:
        self.redelivered.append(message_ids)

    async def seek(self, position: MessageId | int) -> None:
        pass

    async def get_last_message_id(self) -> MessageId | None:
        return None

    async def unsubscribe(self) -> None:
        pass

    def drop_connection(self, reason: str) -> None:
        self.events.on_disconnected(ConnectionClosedError(reason))

    async def close(self) -> None:
        self.closed = True

    @property
    def acked(self) -> list[MessageId]:
        return [i for batch in self.acks for i in batch.individual]


class Sent:
    """A fake producer for the dead-letter router."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, Mapping[str, str] | None]] = []

    def sender(self, topic: str, initial_subscription: str | None) -> Any:
        outer = self

        class _Sender:
            async def send(self, value: bytes, **options: Any) -> MessageId:
                outer.messages.append((topic, value, options.get("properties")))
                return Id(len(outer.messages))

        async def create() -> Any:
            return _Sender()

        return create()


async def make(
    dead_letters: Sent | None = None, clock: FakeScheduler | None = None, **options: Any
) -> tuple[Consumer, PartitionConsumer, FakeTransport]:
    """A consumer on a fake transport; its ack grouping, nack delay and ack timeout on
    ``clock`` when given (the loop's otherwise)."""
    consumer_options = ConsumerOptions(**options)
    queue: ReceiveQueue[Message] = ReceiveQueue()
    transports: list[FakeTransport] = []

    def factory(events: ConsumerEvents) -> ConsumerTransport:
        transports.append(FakeTransport(events))
        return transports[-1]

    router = None
    if dead_letters is not None:
        assert consumer_options.dead_letter_policy is not None
        router = DeadLetterRouter(
            consumer_options.dead_letter_policy, TOPIC, "sub", dead_letters.sender
        )
    partition = PartitionConsumer(
        TOPIC,
        -1,
        consumer_options,
        queue,
        consumer_options.receiver_queue_size,
        factory,
        Backoff(0.01, 0.05),
        router,
        scheduler=clock,
    )
    await partition.start(timeout=1)
    consumer = Consumer([TOPIC], "sub", consumer_options, [partition], queue, lambda _: None)
    return consumer, partition, transports[0]


async def test_grants_the_queue_then_refills_after_half_was_taken() -> None:
    consumer, partition, transport = await make(receiver_queue_size=10)
    assert transport.permits == [10]
    partition.on_messages([message(i) for i in range(10)])
    for _ in range(4):
        await consumer.receive(timeout_millis=1000)
    assert transport.permits == [10]
    await consumer.receive(timeout_millis=1000)
    assert transport.permits == [10, 5]
    assert consumer.stats().queue_depth == 5
    assert consumer.stats().permits_granted == 15


async def test_acks_are_grouped_and_duplicates_of_pending_acks_are_dropped() -> None:
    clock = FakeScheduler()
    consumer, partition, transport = await make(clock=clock, acknowledgment_group_time_ms=50)
    partition.on_messages([message(1), message(2)])
    for _ in range(2):
        consumer.acknowledge(await consumer.receive(timeout_millis=1000))
    partition.on_messages([message(1)])  # redelivered while its ack is pending
    assert consumer.stats().queue_depth == 0
    clock.advance(0.049)
    assert transport.acks == []
    clock.advance(0.002)
    assert transport.acks == [AckBatch((Id(1), Id(2)), None)]
    assert consumer.stats().acknowledged == 2


class Watched(list[Message]):
    """A dispatch that records whose ids were read (as the duplicate check reads them;
    the payload sizes the stats add up are not)."""

    def __init__(self, messages: list[Message]) -> None:
        self.looked_at: set[int] = set()
        super().__init__(_Watching(m, self, i) for i, m in enumerate(messages))


class _Watching(Message):
    __slots__ = ("_dispatch", "_index")

    def __init__(self, message: Message, dispatch: Watched, index: int) -> None:
        super().__init__(
            message.data(),
            Message.message_id(message),
            TOPIC,
            redelivery_count=message.redelivery_count(),
        )
        self._dispatch, self._index = dispatch, index

    def message_id(self) -> MessageId:
        self._dispatch.looked_at.add(self._index)
        return super().message_id()


async def test_only_a_dispatch_not_newer_than_all_before_is_checked_message_by_message() -> None:
    consumer, partition, _ = await make(acknowledgment_group_time_ms=50)
    partition.on_messages([message(1), message(2)])
    consumer.acknowledge(await consumer.receive(timeout_millis=1000))  # 1: its ack pending
    newer = Watched([message(3), message(4), message(5)])
    partition.on_messages(newer)
    assert newer.looked_at == {0, 2}  # its first and last ids only
    again = Watched([message(1), message(6)])  # a redelivery: 1 is acked
    partition.on_messages(again)
    assert again.looked_at == {0, 1}
    got = [(await consumer.receive(timeout_millis=1000)).message_id() for _ in range(5)]
    assert got == [Id(2), Id(3), Id(4), Id(5), Id(6)]
    assert consumer.stats().queue_depth == 0


async def test_negative_ack_redelivers_after_the_delay_not_before() -> None:
    clock = FakeScheduler()
    consumer, _, transport = await make(
        clock=clock, consumer_type=ConsumerType.Shared, negative_ack_redelivery_delay_ms=200
    )
    consumer._partitions[0].on_messages([message(7)])
    consumer.negative_acknowledge(await consumer.receive(timeout_millis=1000))
    clock.advance(0.199)
    assert transport.redelivered == []
    clock.advance(0.002)
    assert transport.redelivered == [[Id(7)]]
    assert consumer.stats().negatively_acknowledged == 1


async def test_ack_timeout_redelivers_unacked_messages() -> None:
    clock = FakeScheduler()
    consumer, partition, transport = await make(
        clock=clock,
        consumer_type=ConsumerType.Shared,
        unacked_messages_timeout_ms=1000,
        tick_duration_ms=100,
    )
    partition.on_messages([message(1), message(2)])
    first = await consumer.receive(timeout_millis=1000)
    await consumer.receive(timeout_millis=1000)
    consumer.acknowledge(first)
    clock.advance(0.999)
    assert transport.redelivered == []
    clock.advance(0.002)
    assert transport.redelivered == [[Id(2)]]


async def test_reconnect_drops_queued_messages_and_grants_a_fresh_window() -> None:
    consumer, partition, transport = await make(receiver_queue_size=4)
    partition.on_messages([message(1), message(2)])
    await consumer.receive(timeout_millis=1000)
    transport.drop_connection("test")
    assert consumer.stats().queue_depth == 0  # the broker redelivers what was not acked
    await wait_until(lambda: transport.connects == 2 and len(transport.permits) == 2)
    assert transport.connects == 2
    assert transport.permits == [4, 4]


async def test_after_max_redeliveries_a_nacked_message_goes_to_the_dead_letter_topic() -> None:
    sent = Sent()
    clock = FakeScheduler()
    consumer, partition, transport = await make(
        dead_letters=sent,
        clock=clock,
        consumer_type=ConsumerType.Shared,
        dead_letter_policy=DeadLetterPolicy(max_redeliver_count=2),
        negative_ack_redelivery_delay_ms=100,
        acknowledgment_group_time_ms=0,
    )
    partition.on_messages([message(1, redelivery_count=1)])
    consumer.negative_acknowledge(await consumer.receive(timeout_millis=1000))
    clock.advance(0.1)
    assert transport.redelivered == [[Id(1)]] and sent.messages == []  # one more try
    partition.on_messages([message(1, redelivery_count=2, value=b"last")])
    consumer.negative_acknowledge(await consumer.receive(timeout_millis=1000))
    clock.advance(0.1)
    await wait_until(lambda: bool(transport.acked))  # the DLQ send runs in a task
    assert transport.redelivered == [[Id(1)]]  # not again: it went to the DLQ
    ((topic, value, properties),) = sent.messages
    assert (topic, value) == (f"{TOPIC}-sub-DLQ", b"last")
    assert properties is not None
    assert properties[REAL_TOPIC] == TOPIC and properties[ORIGIN_MESSAGE_ID] == "Id(1)"
    assert transport.acked == [Id(1)]  # acknowledged only after the DLQ send


async def test_zero_queue_asks_for_one_message_per_receive() -> None:
    consumer, partition, transport = await make(receiver_queue_size=0)
    assert transport.permits == []
    receiving = asyncio.ensure_future(consumer.receive(timeout_millis=1000))
    await asyncio.sleep(0)
    assert transport.permits == [1]
    partition.on_messages([message(1)])
    assert (await receiving).message_id() == Id(1)
    assert transport.permits == [1]


async def test_receive_times_out_with_a_typed_error() -> None:
    consumer, _, _ = await make()
    with pytest.raises(ReceiveTimeoutError):
        await consumer.receive(timeout_millis=50)


async def test_batch_receive_stops_at_the_message_limit_or_the_timeout() -> None:
    consumer, partition, _ = await make(
        batch_receive_policy=BatchReceivePolicy(max_num_messages=3, timeout_ms=100)
    )
    partition.on_messages([message(i) for i in range(5)])
    assert [m.message_id() for m in await consumer.batch_receive()] == [Id(0), Id(1), Id(2)]
    assert [m.message_id() for m in await consumer.batch_receive()] == [Id(3), Id(4)]
    assert await consumer.batch_receive() == []


async def test_batch_receive_takes_whole_dispatches_and_returns_their_permits() -> None:
    consumer, partition, transport = await make(
        receiver_queue_size=10,
        # No byte limit: whole dispatches at once, not message by message.
        batch_receive_policy=BatchReceivePolicy(
            max_num_messages=100, max_num_bytes=-1, timeout_ms=0
        ),
    )
    granted = sum(transport.permits)
    partition.on_messages([message(i) for i in range(6)])  # one batch entry
    partition.on_messages([message(6)])
    received = await consumer.batch_receive()
    assert [m.message_id() for m in received] == [Id(i) for i in range(7)]
    assert transport.permits[1:] == [6]  # the entry's 6 in one grant; 1 earned of 5
    assert sum(transport.permits) == granted + 6


async def test_batch_receive_stops_at_the_byte_limit() -> None:
    consumer, partition, _ = await make(
        batch_receive_policy=BatchReceivePolicy(
            max_num_messages=100, max_num_bytes=25, timeout_ms=100
        )
    )
    partition.on_messages([message(i, value=b"x" * 10) for i in range(5)])
    assert [m.message_id() for m in await consumer.batch_receive()] == [Id(0), Id(1), Id(2)]
    assert [m.message_id() for m in await consumer.batch_receive()] == [Id(3), Id(4)]


async def test_batch_receive_tracks_each_message_for_the_ack_timeout() -> None:
    clock = FakeScheduler()
    consumer, partition, transport = await make(
        clock=clock,
        consumer_type=ConsumerType.Shared,
        unacked_messages_timeout_ms=1000,
        tick_duration_ms=100,
        batch_receive_policy=BatchReceivePolicy(
            max_num_messages=10, max_num_bytes=-1, timeout_ms=0
        ),
    )
    partition.on_messages([message(i) for i in range(3)])
    received = await consumer.batch_receive()
    consumer.acknowledge(received[1])
    clock.advance(0.999)
    assert transport.redelivered == []
    clock.advance(0.002)
    assert transport.redelivered == [[Id(0), Id(2)]]


async def test_close_flushes_pending_acks() -> None:
    consumer, partition, transport = await make(acknowledgment_group_time_ms=10_000)
    partition.on_messages([message(1)])
    consumer.acknowledge(await consumer.receive(timeout_millis=1000))
    await consumer.close()
    assert transport.acked == [Id(1)]
    assert transport.closed


async def test_a_non_durable_subscription_keeps_its_queue_across_a_reconnect() -> None:
    # A reader resumes after the last message it received: the broker will not send the
    # queued ones again, so they must not be dropped.
    consumer, partition, transport = await make(
        receiver_queue_size=4, subscription_mode=SubscriptionMode.NonDurable
    )
    partition.on_messages([message(1), message(2), message(3)])
    await consumer.receive(timeout_millis=1000)
    transport.drop_connection("test")
    await wait_until(lambda: len(transport.permits) == 2)
    assert transport.connects == 2
    assert transport.permits == [4, 2]  # the window less the two still queued
    assert [(await consumer.receive(timeout_millis=1000)).message_id() for _ in range(2)] == [
        Id(2),
        Id(3),
    ]


async def wait_until(condition: Any, timeout: float = 10.0) -> None:
    """Poll ``condition`` (work on the loop: a reconnect, a task) until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout:g} s")
        await asyncio.sleep(0.005)


async def test_exclusive_redelivery_asks_for_everything_and_drops_the_queued_copies() -> None:
    # Exclusive keeps order: the broker redelivers all unacked messages, the queued ones too.
    clock = FakeScheduler()
    consumer, partition, transport = await make(clock=clock, negative_ack_redelivery_delay_ms=100)
    partition.on_messages([message(1), message(2), message(3)])
    consumer.negative_acknowledge(await consumer.receive(timeout_millis=1000))
    clock.advance(0.1)
    assert transport.redelivered == [None]
    assert consumer.stats().queue_depth == 0
    assert transport.permits == [1000]  # the two dropped plus one taken: below the refill


async def test_close_wakes_a_waiting_receive() -> None:
    consumer, _, _ = await make()
    receiving = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0)
    await consumer.close()
    with pytest.raises(AlreadyClosedError):
        await asyncio.wait_for(receiving, 1)


async def test_a_window_paused_across_a_reconnect_grants_on_resume() -> None:
    consumer, _, transport = await make(receiver_queue_size=4)
    consumer.pause_message_listener()
    transport.drop_connection("test")
    await wait_until(lambda: transport.connects == 2)
    assert transport.permits == [4]
    consumer.resume_message_listener()
    assert transport.permits == [4, 4]


async def test_batch_receive_on_a_zero_queue_asks_for_a_message() -> None:
    consumer, _, transport = await make(
        receiver_queue_size=0, batch_receive_policy=BatchReceivePolicy(timeout_ms=50)
    )
    assert await consumer.batch_receive() == []
    assert transport.permits == [1]


async def test_cumulative_acks_are_refused_on_shared() -> None:
    consumer, partition, _ = await make(consumer_type=ConsumerType.Shared)
    partition.on_messages([message(1)])
    with pytest.raises(InvalidConfigurationError):
        consumer.acknowledge_cumulative(await consumer.receive(timeout_millis=1000))


async def test_seek_gives_back_the_permits_of_the_dropped_messages() -> None:
    consumer, partition, transport = await make(receiver_queue_size=4)
    partition.on_messages([message(i) for i in range(4)])
    await consumer.seek(Id(0))
    assert consumer.stats().queue_depth == 0
    assert transport.permits == [4, 4]


async def test_a_reader_skips_second_copies_of_what_it_read() -> None:
    consumer, partition, _ = await make(subscription_mode=SubscriptionMode.NonDurable)
    reader = Reader(consumer, InitialPosition.Earliest, inclusive=False)
    partition.on_messages([message(1), message(2)])
    partition.on_messages([message(2), message(3)])  # the broker dispatched 2 twice
    assert [(await reader.read_next(1000)).message_id() for _ in range(3)] == [
        Id(1),
        Id(2),
        Id(3),
    ]
    with pytest.raises(ReceiveTimeoutError):
        await reader.read_next(50)
