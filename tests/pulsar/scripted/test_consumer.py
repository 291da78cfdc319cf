"""PulsarConsumerTransport against a scripted broker, driven directly with recording events:
the commands it writes, the dispatches and broker events it passes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import pytest

from msgclient.contract import AckBatch, ConsumerEvents
from msgclient.errors import BrokerError, ConnectionClosedError, InvalidConfigurationError
from msgclient.message import Message
from msgclient.options import (
    ClientOptions,
    CompressionType,
    ConsumerOptions,
    ConsumerType,
    InitialPosition,
    SubscriptionMode,
)
from msgclient.url import parse_service_url
from protocols.pulsarwire import receive_codec
from protocols.pulsarwire.adapter import PulsarBackend
from protocols.pulsarwire.compression import Codec
from protocols.pulsarwire.consumer import PulsarConsumerTransport
from protocols.pulsarwire.framing import FrameDecoder, encode_command, encode_payload_command
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    ServerConnection,
    Type,
    ack_response,
    active_consumer_change,
    close_consumer,
    error,
    message_frame,
    reached_end_of_topic,
    success,
)

TOPIC = "persistent://public/default/scripted-consumer"
SUBSCRIPTION = "sub"


class RecordingEvents(ConsumerEvents):
    def __init__(self) -> None:
        self.dispatches: list[list[Message]] = []
        self.disconnects: list[Exception] = []
        self.active: list[bool] = []
        self.ends = 0
        self._changed = asyncio.Event()

    @property
    def values(self) -> list[bytes]:
        return [m.data() for d in self.dispatches for m in d]

    def on_messages(self, messages: list[Message]) -> None:
        self.dispatches.append(messages)
        self._changed.set()

    def on_disconnected(self, error: Exception) -> None:
        self.disconnects.append(error)
        self._changed.set()

    def on_active_consumer_change(self, is_active: bool) -> None:
        self.active.append(is_active)
        self._changed.set()

    def on_reached_end_of_topic(self) -> None:
        self.ends += 1
        self._changed.set()

    def on_partition_revoked(self) -> None:
        raise AssertionError("Pulsar never revokes a partition")

    async def wait(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not condition():
                self._changed.clear()
                await self._changed.wait()


class Subscribe(Protocol):
    async def __call__(self, **options: Any) -> tuple[PulsarConsumerTransport, RecordingEvents]:
        """A subscribed transport with these consumer options, and its events."""


@pytest.fixture
async def subscribe(server: ScriptedPulsarServer) -> AsyncIterator[Subscribe]:
    client_options = ClientOptions(operation_timeout_seconds=WAIT, connection_timeout_ms=2000)
    backend = PulsarBackend(parse_service_url(server.url), client_options)

    async def make(**options: Any) -> tuple[PulsarConsumerTransport, RecordingEvents]:
        events = RecordingEvents()
        transport = backend.consumer_transport(
            TOPIC, -1, SUBSCRIPTION, ConsumerOptions(**options), events, None
        )
        assert isinstance(transport, PulsarConsumerTransport)
        async with asyncio.timeout(WAIT):
            await transport.connect()
        return transport, events

    yield make
    async with asyncio.timeout(WAIT):
        await backend.close()


def dispatch(
    server: ScriptedPulsarServer, consumer: PulsarConsumerTransport, *frames: bytes
) -> None:
    server.consumer_connection(consumer.consumer_id).write(b"".join(frames))


def ids(ack: pb.CommandAck) -> list[tuple[int, int, list[int]]]:
    return [(d.ledgerId, d.entryId, list(d.ack_set)) for d in ack.message_id]


async def test_subscribe_sends_the_options(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    await subscribe(
        consumer_type=ConsumerType.Failover,
        consumer_name="c1",
        initial_position=InitialPosition.Earliest,
        priority_level=2,
        properties={"k": "v"},
        replicate_subscription_state_enabled=True,
    )
    (received,) = server.commands(Type.SUBSCRIBE)
    sub = received.command.subscribe
    assert (sub.topic, sub.subscription, sub.consumer_name) == (TOPIC, SUBSCRIPTION, "c1")
    assert sub.subType == pb.CommandSubscribe.Failover
    assert sub.initialPosition == pb.CommandSubscribe.Earliest
    assert (sub.priority_level, sub.durable, sub.force_topic_creation) == (2, True, True)
    assert sub.replicate_subscription_state
    assert [(kv.key, kv.value) for kv in sub.metadata] == [("k", "v")]
    assert not sub.HasField("start_message_id")


@pytest.mark.parametrize(
    ("consumer_type", "wire"),
    [
        (ConsumerType.Exclusive, pb.CommandSubscribe.Exclusive),
        (ConsumerType.Shared, pb.CommandSubscribe.Shared),
        (ConsumerType.KeyShared, pb.CommandSubscribe.Key_Shared),
    ],
)
async def test_subscription_types(
    server: ScriptedPulsarServer,
    subscribe: Subscribe,
    consumer_type: ConsumerType,
    wire: int,
) -> None:
    await subscribe(consumer_type=consumer_type)
    (received,) = server.commands(Type.SUBSCRIBE)
    assert received.command.subscribe.subType == wire
    assert received.command.subscribe.initialPosition == pb.CommandSubscribe.Latest
    assert received.command.subscribe.consumer_name  # a random one, as the Java client


async def test_reader_sends_its_start_id_non_durable(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    start = PulsarMessageId(3, 4, -1, 2, 5)
    await subscribe(subscription_mode=SubscriptionMode.NonDurable, start_message_id=start)
    sub = server.commands(Type.SUBSCRIBE)[0].command.subscribe
    assert not sub.durable
    start_data = sub.start_message_id
    assert (start_data.ledgerId, start_data.entryId, start_data.batch_index) == (3, 4, 2)


async def test_flow_and_dispatch(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    consumer, events = await subscribe()
    consumer.flow(10)
    (flow,) = await server.wait_for(Type.FLOW)
    assert (flow.command.flow.consumer_id, flow.command.flow.messagePermits) == (
        consumer.consumer_id,
        10,
    )
    dispatch(
        server,
        consumer,
        message_frame(consumer.consumer_id, 1, 0, [b"one"], redelivery_count=1),
        message_frame(consumer.consumer_id, 1, 1, [b"a", b"b", b"c"], batched=True),
    )
    await events.wait(lambda: len(events.dispatches) == 2)
    single, batch = events.dispatches
    assert [m.data() for m in single] == [b"one"]
    assert single[0].message_id() == PulsarMessageId(1, 0)
    assert single[0].redelivery_count() == 1
    assert [m.data() for m in batch] == [b"a", b"b", b"c"]
    assert [m.message_id() for m in batch] == [PulsarMessageId(1, 1, -1, i, 3) for i in range(3)]


async def test_broker_close_then_resubscribe_with_the_same_id(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe()
    dispatch(server, consumer, encode_command(close_consumer(consumer.consumer_id)))
    await events.wait(lambda: len(events.disconnects) == 1)
    assert isinstance(events.disconnects[0], ConnectionClosedError)
    consumer.flow(5)  # not connected: dropped
    async with asyncio.timeout(WAIT):
        await consumer.connect()
    first, second = [r.command.subscribe for r in server.commands(Type.SUBSCRIBE)]
    assert second.consumer_id == first.consumer_id
    assert second.consumer_name == first.consumer_name
    assert len(server.connections) == 1  # the connection itself stayed up
    dispatch(server, consumer, message_frame(consumer.consumer_id, 1, 0, [b"again"]))
    await events.wait(lambda: events.values == [b"again"])
    assert server.commands(Type.FLOW) == []


async def test_closed_in_the_same_packet_as_the_answer(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    def answer_and_close(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        conn.send(success(cmd.subscribe.request_id), close_consumer(cmd.subscribe.consumer_id))

    server.handlers[Type.SUBSCRIBE] = answer_and_close
    with pytest.raises(ConnectionClosedError, match="as it subscribed"):
        await subscribe()


async def test_connection_dropped_instead_of_an_answer(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    # pulsar-lite refuses a second Exclusive consumer so (brokers.md quirk).
    server.handlers[Type.SUBSCRIBE] = lambda conn, _: conn.abort()
    with pytest.raises(ConnectionClosedError, match="may close it to refuse the subscription"):
        await subscribe()


async def test_subscribe_error_is_typed(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    server.handlers[Type.SUBSCRIBE] = lambda conn, cmd: conn.send(
        error(cmd.subscribe.request_id, pb.ConsumerBusy, "exclusive consumer is already connected")
    )
    with pytest.raises(BrokerError) as caught:
        await subscribe()
    assert caught.value.code == "ConsumerBusy"


async def test_acks_of_a_batch_wait_for_the_whole_entry(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe(consumer_type=ConsumerType.Shared)
    dispatch(
        server,
        consumer,
        message_frame(consumer.consumer_id, 1, 0, [b"a", b"b"], batched=True),
        message_frame(consumer.consumer_id, 1, 1, [b"single"]),
    )
    await events.wait(lambda: len(events.dispatches) == 2)
    a, b = events.dispatches[0]
    (single,) = events.dispatches[1]
    assert consumer.acknowledge(AckBatch((a.message_id(), single.message_id()), None)) is None
    assert consumer.acknowledge(AckBatch((b.message_id(),), None)) is None
    first, second = await server.wait_for(Type.ACK, 2)
    assert first.command.ack.ack_type == pb.CommandAck.Individual
    assert ids(first.command.ack) == [(1, 1, [])]  # not entry 0: b was still unacked
    assert ids(second.command.ack) == [(1, 0, [])]


async def test_cumulative_ack_inside_a_batch_acks_the_previous_entry(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe()
    dispatch(
        server, consumer, message_frame(consumer.consumer_id, 1, 4, [b"a", b"b"], batched=True)
    )
    await events.wait(lambda: len(events.dispatches) == 1)
    a, b = events.dispatches[0]
    consumer.acknowledge(AckBatch((), a.message_id()))
    consumer.acknowledge(AckBatch((), b.message_id()))
    first, second = await server.wait_for(Type.ACK, 2)
    assert first.command.ack.ack_type == pb.CommandAck.Cumulative
    assert ids(first.command.ack) == [(1, 3, [])]
    assert ids(second.command.ack) == [(1, 4, [])]


async def test_ack_receipts(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    consumer, _ = await subscribe(ack_receipt_enabled=True)
    receipt = consumer.acknowledge(AckBatch((PulsarMessageId(1, 0),), PulsarMessageId(1, 0)))
    assert receipt is not None
    async with asyncio.timeout(WAIT):
        await receipt
    acks = [r.command.ack for r in server.commands(Type.ACK)]
    assert len({a.request_id for a in acks}) == 2  # each its own receipt

    def refuse(conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        ack = cmd.ack
        conn.send(ack_response(ack.consumer_id, ack.request_id, pb.NotAllowedError, "no"))

    server.handlers[Type.ACK] = refuse
    receipt = consumer.acknowledge(AckBatch((PulsarMessageId(1, 1),), None))
    assert receipt is not None
    with pytest.raises(BrokerError, match="NotAllowedError: no"):
        async with asyncio.timeout(WAIT):
            await receipt


async def test_ack_while_disconnected_raises(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe()
    consumer.drop_connection("test")
    await events.wait(lambda: len(events.disconnects) == 1)
    with pytest.raises(ConnectionClosedError):
        consumer.acknowledge(AckBatch((PulsarMessageId(1, 0),), None))


@pytest.mark.parametrize(
    ("consumer_type", "by_id"),
    [
        (ConsumerType.Shared, True),
        (ConsumerType.KeyShared, True),
        (ConsumerType.Exclusive, False),
        (ConsumerType.Failover, False),
    ],
)
async def test_redeliver(
    server: ScriptedPulsarServer, subscribe: Subscribe, consumer_type: ConsumerType, by_id: bool
) -> None:
    consumer, _ = await subscribe(consumer_type=consumer_type)
    consumer.redeliver([PulsarMessageId(1, 2, -1, 0, 2), PulsarMessageId(1, 2, -1, 1, 2)])
    consumer.redeliver(None)
    first, second = [
        r.command.redeliverUnacknowledgedMessages
        for r in await server.wait_for(Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, 2)
    ]
    expected = [(1, 2)] if by_id else []
    assert [(d.ledgerId, d.entryId) for d in first.message_ids] == expected
    assert list(second.message_ids) == []
    assert first.consumer_id == second.consumer_id == consumer.consumer_id


async def test_seek(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    # pulsar-lite's SEEK is broken (brokers.md): only the scripted broker tests it.
    consumer, _ = await subscribe()
    async with asyncio.timeout(WAIT):
        await consumer.seek(PulsarMessageId(3, 7, -1, 1, 4))
        await consumer.seek(1_700_000_000_000)
    by_id, by_time = [r.command.seek for r in server.commands(Type.SEEK)]
    assert (by_id.message_id.ledgerId, by_id.message_id.entryId) == (3, 7)
    assert list(by_id.message_id.ack_set) == []  # batch-index ack is off
    assert not by_id.HasField("message_publish_time")
    assert by_time.message_publish_time == 1_700_000_000_000
    assert not by_time.HasField("message_id")


async def test_seek_refused(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    server.handlers[Type.SEEK] = lambda conn, cmd: conn.send(
        error(cmd.seek.request_id, pb.NotAllowedError, "no seeking")
    )
    consumer, _ = await subscribe()
    with pytest.raises(BrokerError, match="no seeking"):
        async with asyncio.timeout(WAIT):
            await consumer.seek(PulsarMessageId(3, 7))


async def test_get_last_message_id(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    consumer, _ = await subscribe()
    server.last_message_id = pb.MessageIdData(ledgerId=4, entryId=9, batch_index=2)
    async with asyncio.timeout(WAIT):
        assert await consumer.get_last_message_id() == PulsarMessageId(4, 9, -1, 2)
        # A real broker says "empty" with the current ledger and entry -1 (as uint64).
        server.last_message_id = pb.MessageIdData(ledgerId=4, entryId=2**64 - 1)
        assert await consumer.get_last_message_id() is None


async def test_unsubscribe_then_close_sends_nothing_more(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, _ = await subscribe()
    async with asyncio.timeout(WAIT):
        await consumer.unsubscribe()
        await consumer.close()
    (unsubscribe,) = server.commands(Type.UNSUBSCRIBE)
    assert unsubscribe.command.unsubscribe.consumer_id == consumer.consumer_id
    assert server.commands(Type.CLOSE_CONSUMER) == []


async def test_close_stops_the_events(server: ScriptedPulsarServer, subscribe: Subscribe) -> None:
    consumer, events = await subscribe()
    connection = server.consumer_connection(consumer.consumer_id)
    async with asyncio.timeout(WAIT):
        await consumer.close()
    (close,) = server.commands(Type.CLOSE_CONSUMER)
    assert close.command.close_consumer.consumer_id == consumer.consumer_id
    connection.write(message_frame(consumer.consumer_id, 1, 0, [b"late"]))
    connection.abort()
    await asyncio.sleep(0.05)  # let the client read both
    assert events.dispatches == [] and events.disconnects == []


async def test_active_consumer_change_and_end_of_topic(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe(consumer_type=ConsumerType.Failover)
    dispatch(
        server,
        consumer,
        encode_command(active_consumer_change(consumer.consumer_id, True)),
        encode_command(active_consumer_change(consumer.consumer_id, False)),
        encode_command(reached_end_of_topic(consumer.consumer_id)),
    )
    await events.wait(lambda: events.ends == 1)
    assert events.active == [True, False]


@pytest.mark.parametrize(
    ("inclusive", "expected"), [(False, [b"c", b"d"]), (True, [b"b", b"c", b"d"])]
)
async def test_reader_drops_what_comes_before_its_start(
    server: ScriptedPulsarServer, subscribe: Subscribe, inclusive: bool, expected: list[bytes]
) -> None:
    start = PulsarMessageId(1, 5, -1, 1, 4)
    consumer, events = await subscribe(
        subscription_mode=SubscriptionMode.NonDurable,
        start_message_id=start,
        start_message_id_inclusive=inclusive,
    )
    consumer.flow(100)
    # The broker starts at the start's entry, with the batch indexes before it.
    dispatch(
        server,
        consumer,
        message_frame(consumer.consumer_id, 1, 5, [b"a", b"b", b"c", b"d"], batched=True),
        message_frame(consumer.consumer_id, 1, 6, [b"e"]),
    )
    await events.wait(lambda: len(events.dispatches) == 2)
    assert events.values == [*expected, b"e"]
    # The dropped messages' permits are given back, as the core never sees them.
    permits = [r.command.flow.messagePermits for r in await server.wait_for(Type.FLOW, 2)]
    assert permits == [100, 4 - len(expected)]


async def test_reader_drops_an_unbatched_start_unless_inclusive(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe(
        subscription_mode=SubscriptionMode.NonDurable, start_message_id=PulsarMessageId(1, 5)
    )
    dispatch(
        server,
        consumer,
        message_frame(consumer.consumer_id, 1, 5, [b"start"]),
        message_frame(consumer.consumer_id, 1, 6, [b"next"]),
    )
    await events.wait(lambda: len(events.dispatches) == 1)
    assert events.values == [b"next"]


async def test_durable_subscription_ignores_a_start_id(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    # As the Java client: a durable subscription starts where the broker keeps it.
    consumer, events = await subscribe(start_message_id=PulsarMessageId(1, 5))
    assert not server.commands(Type.SUBSCRIBE)[0].command.subscribe.HasField("start_message_id")
    dispatch(server, consumer, message_frame(consumer.consumer_id, 1, 5, [b"start"]))
    await events.wait(lambda: events.values == [b"start"])


async def test_reader_resubscribes_after_the_last_dispatched_message(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe(
        subscription_mode=SubscriptionMode.NonDurable, start_message_id=PulsarMessageId(1, 0)
    )
    dispatch(
        server, consumer, message_frame(consumer.consumer_id, 1, 3, [b"x", b"y"], batched=True)
    )
    await events.wait(lambda: len(events.dispatches) == 1)
    consumer.drop_connection("test")
    await events.wait(lambda: len(events.disconnects) == 1)
    async with asyncio.timeout(WAIT):
        await consumer.connect()
    start = server.commands(Type.SUBSCRIBE)[1].command.subscribe.start_message_id
    assert (start.ledgerId, start.entryId, start.batch_index) == (1, 3, 1)
    # The broker starts again at entry 3: what was dispatched already is dropped.
    dispatch(
        server,
        consumer,
        message_frame(consumer.consumer_id, 1, 3, [b"x", b"y"], batched=True),
        message_frame(consumer.consumer_id, 1, 4, [b"z"]),
    )
    await events.wait(lambda: len(events.dispatches) == 2)
    assert events.values == [b"x", b"y", b"z"]


async def test_corrupt_entry_is_acked_as_such_and_its_permit_given_back(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    consumer, events = await subscribe()
    corrupt = message_frame(consumer.consumer_id, 1, 0, [b"a", b"b"], batched=True)
    # Cut the batch short inside the frame: sizes and checksum stay valid, the batch not.
    corrupt = _truncate_payload(corrupt, 1)
    dispatch(server, consumer, corrupt, message_frame(consumer.consumer_id, 1, 1, [b"ok"]))
    await events.wait(lambda: events.values == [b"ok"])
    (ack,) = await server.wait_for(Type.ACK)
    assert ack.command.ack.validation_error == pb.CommandAck.BatchDeSerializeError
    assert ids(ack.command.ack) == [(1, 0, [])]
    (flow,) = await server.wait_for(Type.FLOW)
    assert flow.command.flow.messagePermits == 2
    assert events.disconnects == []  # the connection stayed up


async def test_entry_with_a_bad_checksum_is_acked_as_such_and_the_connection_stays(
    server: ScriptedPulsarServer, subscribe: Subscribe
) -> None:
    # The Java client's discardCorruptedMessage: closing the connection instead would get
    # the same stored entry redelivered, again and again.
    consumer, events = await subscribe()
    corrupt = bytearray(message_frame(consumer.consumer_id, 1, 0, [b"a", b"b"], batched=True))
    corrupt[-1] ^= 0x01  # one payload bit: the CRC32C no longer matches
    dispatch(server, consumer, bytes(corrupt), message_frame(consumer.consumer_id, 1, 1, [b"ok"]))
    await events.wait(lambda: events.values == [b"ok"])
    (ack,) = await server.wait_for(Type.ACK)
    assert ack.command.ack.validation_error == pb.CommandAck.ChecksumMismatch
    assert ids(ack.command.ack) == [(1, 0, [])]
    assert events.disconnects == []


async def test_entry_this_client_cannot_decompress_stays_unacked(
    server: ScriptedPulsarServer, subscribe: Subscribe, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(kind: CompressionType) -> Codec:
        raise InvalidConfigurationError(f"{kind.name} compression needs a package")

    monkeypatch.setattr(receive_codec, "get_codec", missing)
    consumer, events = await subscribe()
    compressed = _with_metadata(
        message_frame(consumer.consumer_id, 1, 0, [b"x"]), compression=pb.LZ4, uncompressed_size=1
    )
    dispatch(server, consumer, compressed, message_frame(consumer.consumer_id, 1, 1, [b"ok"]))
    await events.wait(lambda: events.values == [b"ok"])
    (flow,) = await server.wait_for(Type.FLOW)
    assert flow.command.flow.messagePermits == 1
    assert server.commands(Type.ACK) == []  # the entry is sound: another consumer may read it


def _with_metadata(frame: bytes, **fields: Any) -> bytes:
    """``frame`` re-encoded with these MessageMetadata fields changed."""
    (decoded,) = FrameDecoder().feed(frame)
    assert decoded.metadata is not None and decoded.payload is not None
    for name, value in fields.items():
        setattr(decoded.metadata, name, value)
    return encode_payload_command(
        decoded.command, decoded.metadata.SerializeToString(), decoded.payload
    )


def _truncate_payload(frame: bytes, cut: int) -> bytes:
    """``frame`` re-encoded with its payload ``cut`` bytes shorter."""
    (decoded,) = FrameDecoder().feed(frame)
    assert decoded.metadata is not None and decoded.payload is not None
    return encode_payload_command(
        decoded.command, decoded.metadata.SerializeToString(), decoded.payload[:-cut]
    )
