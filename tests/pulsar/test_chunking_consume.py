"""msgclient reassembles chunked messages: its own, the official client's, interleaved,
incomplete; acks and negative acks cover every chunk.

Shared subscriptions throughout: pulsar-lite dispatches the chunks of a message of 3+
chunks more than once on Exclusive/Failover (brokers.md).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import pulsar
import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.consumer import PulsarConsumerTransport
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.producer import PulsarProducerTransport
from tests.pulsar.helpers import Publish, chunking, official_produce, wait_until, within

CHUNK = 100 * 1024
Shared = msgclient.ConsumerType.Shared
_rng = random.Random(2026)


async def _subscribe(client: msgclient.Client, topic: str, **options: Any) -> msgclient.Consumer:
    return await client.subscribe(
        topic,
        "sub",
        consumer_type=Shared,
        initial_position=msgclient.InitialPosition.Earliest,
        **options,
    )


async def _chunking_producer(client: msgclient.Client, topic: str) -> msgclient.Producer:
    return await client.create_producer(topic, **chunking(CHUNK))


async def test_round_trip_of_our_chunks(pulsar_broker: PulsarBroker, topic: str) -> None:
    big = _rng.randbytes(12 * CHUNK)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await _subscribe(client, topic)
        producer = await _chunking_producer(client, topic)
        sent = await within(producer.send(big, properties={"k": "v"}))
        await within(producer.send(b"small"))
        message = await consumer.receive(timeout_millis=10_000)
        small = await consumer.receive(timeout_millis=10_000)

    assert message.data() == big and message.properties() == {"k": "v"}
    assert small.data() == b"small"
    received = message.message_id()
    assert isinstance(received, ChunkMessageId) and received == sent
    assert len(received.chunk_ids) == 13
    assert ChunkMessageId.deserialize(received.serialize()) == received


async def test_official_chunks_reassembled(pulsar_broker: PulsarBroker, topic: str) -> None:
    # The official Python client chunks at the broker's limit (it has no chunk size option).
    big = _rng.randbytes(12 * 1024 * 1024)
    url = pulsar_broker.service_url
    async with msgclient.Client(url) as client:
        consumer = await _subscribe(client, topic)
        published = await official_produce(
            url, topic, [Publish(big)], chunking_enabled=True, batching_enabled=False
        )
        message = await consumer.receive(timeout_millis=10_000)

    assert message.data() == big
    received = message.message_id()
    assert isinstance(received, ChunkMessageId) and len(received.chunk_ids) == 3
    # Their id's bytes read back to ours, and ours serialize to theirs.
    official = published.ids[0]
    assert PulsarMessageId.deserialize(official.serialize()) == received
    assert received.serialize() == official.serialize()
    assert str(received) == str(official)


class HeldFrames:
    """A producer whose SEND frames are held instead of written: the test writes the chunk
    frames it wants, in the order it wants, on the producer's own connection (as a
    producer that interleaves, or dies mid-message, would have)."""

    def __init__(self, producer: msgclient.Producer) -> None:
        transport = producer._partitions[0]._transport
        assert isinstance(transport, PulsarProducerTransport)
        self.producer = producer
        self.transport = transport
        self.held: list[bytes] = []
        transport.write = lambda op: self.held.append(op.frame)  # type: ignore[method-assign]

    def chunks(self, index: int) -> list[bytes]:
        """The SEND frames of the ``index``-th op held, one per chunk."""
        data, frames, at = self.held[index], [], 0
        while at < len(data):
            end = at + 4 + int.from_bytes(data[at : at + 4], "big")
            frames.append(data[at:end])
            at = end
        return frames

    def write(self, frames: list[bytes]) -> None:
        connection = self.transport._connection
        assert connection is not None
        for frame in frames:
            connection.write(frame)


def _pending_chunked(consumer: msgclient.Consumer) -> int:
    transport = consumer._partitions[0]._transport
    assert isinstance(transport, PulsarConsumerTransport)
    return len(transport._chunks._assembler)


async def test_interleaved_chunks_of_two_producers(pulsar_broker: PulsarBroker, topic: str) -> None:
    first, second = _rng.randbytes(3 * CHUNK), _rng.randbytes(4 * CHUNK)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await _subscribe(client, topic)
        one = await _chunking_producer(client, topic)
        two = await _chunking_producer(client, topic)
        held_one, held_two = HeldFrames(one), HeldFrames(two)
        futures = [await one.send_async(first), await two.send_async(second)]
        # Their chunks alternate on the topic: a0 b0 a1 b1 ...
        for a, b in itertools.zip_longest(held_one.chunks(0), held_two.chunks(0)):
            held_one.write([a] if a else [])
            held_two.write([b] if b else [])
        ids = await within(asyncio.gather(*futures))
        got = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(2)]

    assert got == [first, second]  # the first completes first
    one_id, two_id = ids
    assert isinstance(one_id, ChunkMessageId) and isinstance(two_id, ChunkMessageId)
    assert one_id.first_chunk_id.entry_id < two_id.first_chunk_id.entry_id < one_id.entry_id


async def _send_partial(
    client: msgclient.Client, topic: str, payload: bytes, chunks: int
) -> tuple[HeldFrames, asyncio.Future[msgclient.MessageId]]:
    """A producer that writes only the first ``chunks`` chunks of ``payload``, as one dying
    mid-message would (its held frames, and the send, which times out in 0.3 s)."""
    producer = await client.create_producer(topic, **chunking(CHUNK, send_timeout_millis=300))
    held = HeldFrames(producer)
    doomed = await producer.send_async(payload)
    held.write(held.chunks(0)[:chunks])
    return held, doomed


async def _after_reconnect(url: str, topic: str, **options: Any) -> msgclient.Message | None:
    """What a new consumer of the subscription is given first, if anything, within 0.5 s."""
    async with msgclient.Client(url) as client:
        consumer = await _subscribe(client, topic, **options)
        try:
            return await consumer.receive(timeout_millis=500)
        except msgclient.ReceiveTimeoutError:
            return None


async def test_ack_covers_every_chunk(pulsar_broker: PulsarBroker, topic: str) -> None:
    big = _rng.randbytes(4 * CHUNK)
    url = pulsar_broker.service_url
    async with msgclient.Client(url) as client:
        consumer = await _subscribe(client, topic)
        producer = await _chunking_producer(client, topic)
        await within(producer.send(big))
        await within(producer.send(b"marker"))
        message = await consumer.receive(timeout_millis=10_000)
        await within(consumer.acknowledge(message))
        marker = await consumer.receive(timeout_millis=10_000)
        await within(consumer.acknowledge(marker))
        await consumer.close()
    # A new client on the subscription: nothing is redelivered, no chunk left unacked.
    with_official = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        again = with_official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        try:
            stray = again.receive(timeout_millis=500)
        except pulsar.Timeout:
            stray = None
        assert stray is None, f"redelivered after the ack: {stray.message_id()}"
    finally:
        with_official.close()


async def test_negative_ack_redelivers_the_whole_message(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    big = _rng.randbytes(4 * CHUNK)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await _subscribe(client, topic, negative_ack_redelivery_delay_ms=100)
        producer = await _chunking_producer(client, topic)
        await within(producer.send(big))
        message = await consumer.receive(timeout_millis=10_000)
        consumer.negative_acknowledge(message)
        again = await consumer.receive(timeout_millis=10_000)

    assert again.data() == big
    assert again.message_id() == message.message_id()
    assert again.redelivery_count() == 1


async def test_incomplete_message_expires(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = pulsar_broker.service_url
    whole = _rng.randbytes(3 * CHUNK)
    async with msgclient.Client(url) as client:
        # The expiry well past the producer's send timeout (300 ms): with the two equal,
        # the partial message could expire before the test saw it held.
        consumer = await _subscribe(client, topic, expire_time_of_incomplete_chunked_message=1500)
        _, doomed = await _send_partial(client, topic, _rng.randbytes(5 * CHUNK), 2)
        await wait_until(lambda: _pending_chunked(consumer) == 1, "the partial chunks")
        with pytest.raises(msgclient.SendTimeoutError):
            await within(doomed)  # the whole message's future fails, typed
        producer = await _chunking_producer(client, topic)  # the producer "restarted"
        await within(producer.send(whole))
        message = await consumer.receive(timeout_millis=10_000)
        assert message.data() == whole
        consumer.acknowledge(message)
        await wait_until(lambda: _pending_chunked(consumer) == 0, "the expiry")
        await consumer.close()
    # Expired chunks are acknowledged: nothing comes back.
    assert await _after_reconnect(url, topic) is None


@pytest.mark.parametrize("auto_ack", [True, False], ids=["auto-ack", "no-auto-ack"])
async def test_max_pending_chunked_message(
    pulsar_broker: PulsarBroker, topic: str, auto_ack: bool
) -> None:
    url = pulsar_broker.service_url
    whole = _rng.randbytes(3 * CHUNK)
    options: dict[str, Any] = {
        "max_pending_chunked_message": 1,
        "auto_ack_oldest_chunked_message_on_queue_full": auto_ack,
    }
    async with msgclient.Client(url) as client:
        consumer = await _subscribe(client, topic, **options)
        _, doomed = await _send_partial(client, topic, _rng.randbytes(5 * CHUNK), 2)
        await wait_until(lambda: _pending_chunked(consumer) == 1, "the partial chunks")
        producer = await _chunking_producer(client, topic)
        await within(producer.send(whole))  # its first chunk pushes the partial one out
        message = await consumer.receive(timeout_millis=10_000)
        assert message.data() == whole
        await within(consumer.acknowledge(message))
        with pytest.raises(msgclient.SendTimeoutError):
            await within(doomed)
        await consumer.close()
        # A new consumer of the subscription: the partial message's chunks come back only
        # if they were left unacknowledged.
        again = await _subscribe(client, topic, **options)
        if auto_ack:
            with pytest.raises(msgclient.ReceiveTimeoutError):
                await again.receive(timeout_millis=500)
            assert _pending_chunked(again) == 0
        else:
            await wait_until(lambda: _pending_chunked(again) == 1, "the partial, redelivered")


async def test_compressed_chunks_round_trip(pulsar_broker: PulsarBroker, topic: str) -> None:
    big = _rng.randbytes(4 * CHUNK) + b"z" * (8 * CHUNK)  # compressed, still 4+ chunks
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await _subscribe(client, topic)
        producer = await client.create_producer(
            topic, **chunking(CHUNK, compression_type=msgclient.CompressionType.LZ4)
        )
        await within(producer.send(big))
        message = await consumer.receive(timeout_millis=10_000)

    assert message.data() == big
    received = message.message_id()
    assert isinstance(received, ChunkMessageId) and 4 <= len(received.chunk_ids) < 12


async def test_a_timed_out_chunked_send_leaves_nothing_behind(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """The transport counts a chunked message's receipts; one whose send timed out gets
    none, and the next receipt (receipts come in order) drops its count."""
    async with msgclient.Client(pulsar_broker.service_url) as client:
        held, doomed = await _send_partial(client, topic, _rng.randbytes(3 * CHUNK), 1)
        with pytest.raises(msgclient.SendTimeoutError):
            await within(doomed)
        del held.transport.write  # writes go to the connection again
        assert await within(held.producer.send(b"small")) is not None
        assert held.transport._chunk_counts == {}


@pytest.mark.parametrize("inclusive", [True, False], ids=["inclusive", "exclusive"])
async def test_a_reader_starts_at_a_chunked_message(
    pulsar_broker: PulsarBroker, topic: str, inclusive: bool
) -> None:
    """Inclusive: the whole message, from its first chunk; exclusive: what follows its
    last. Two chunks: readers are Exclusive, where pulsar-lite dispatches the chunks of
    3+ more than once (brokers.md)."""
    whole = _rng.randbytes(CHUNK + CHUNK // 2)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await _chunking_producer(client, topic)
        chunked_id = await within(producer.send(whole))
        assert isinstance(chunked_id, ChunkMessageId)
        await within(producer.send(b"after"))
        reader = await client.create_reader(topic, chunked_id, start_message_id_inclusive=inclusive)
        first = await within(reader.read_next())
        await reader.close()
    assert first.data() == (whole if inclusive else b"after")
