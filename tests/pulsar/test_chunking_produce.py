"""msgclient chunks a message over the limit; the official pulsar-client reassembles it.

Shared subscriptions throughout: pulsar-lite dispatches the chunks of a message of 3+
chunks more than once on Exclusive/Failover (brokers.md), which the official consumer
would not reassemble.
"""

from __future__ import annotations

import random

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from tests.pulsar.helpers import (
    assert_nothing_more,
    chunking,
    official_client,
    receive,
    subscribe,
    within,
)

CHUNK = 100 * 1024
_rng = random.Random(2002)


async def test_official_consumer_reassembles_our_chunks(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    big = _rng.randbytes(12 * CHUNK + 5)  # 13 chunks of at most 100 KiB each, in all
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **chunking(CHUNK))
            small_id = await within(producer.send(b"before"))
            big_id = await within(producer.send(big, properties={"k": "v"}))
            after_id = await within(producer.send(b"after"))
        received = await receive(consumer, 3)
        await assert_nothing_more(consumer)

    assert [m.data() for m in received] == [b"before", big, b"after"]
    assert received[1].properties() == {"k": "v"}
    assert type(small_id) is PulsarMessageId and type(after_id) is PulsarMessageId
    assert isinstance(big_id, ChunkMessageId)
    # 13 entries, one per chunk, between the two small messages
    assert big_id.first_chunk_id.entry_id == small_id.entry_id + 1
    assert big_id.entry_id == small_id.entry_id + 13
    assert after_id.entry_id == big_id.entry_id + 1


async def test_compressed_payload_is_chunked_after_compression(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    # Random bytes with a compressible tail: the compressed whole is still several chunks.
    big = _rng.randbytes(4 * CHUNK) + b"z" * (8 * CHUNK)
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(
                topic, **chunking(CHUNK, compression_type=msgclient.CompressionType.LZ4)
            )
            big_id = await within(producer.send(big))
        [message] = await receive(consumer, 1)

    assert message.data() == big
    assert isinstance(big_id, ChunkMessageId)
    chunks = big_id.entry_id - big_id.first_chunk_id.entry_id + 1
    assert 4 <= chunks < 12  # split after compression: fewer chunks than the raw size needs


async def test_default_chunk_size_is_the_broker_limit(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    big = _rng.randbytes(12 * 1024 * 1024)  # 12 MiB: 3 chunks under the 5 MiB limit
    url = pulsar_broker.service_url
    with official_client(url) as official:
        # One permit at a time: pulsar-lite may hold the last of several 5 MiB entries
        # back from a consumer that reads them slowly (the official one on a loaded
        # machine, 1 run in 4), until another entry comes (not in brokers.md,
        # docs/testing.md); with one permit it never has several on the way.
        consumer = subscribe(official, topic, receiver_queue_size=1)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **chunking())
            big_id = await within(producer.send(big))
        [message] = await receive(consumer, 1)

    assert message.data() == big
    assert isinstance(big_id, ChunkMessageId)
    assert big_id.entry_id - big_id.first_chunk_id.entry_id == 2


async def test_too_big_without_chunking(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        with pytest.raises(msgclient.MessageTooBigError):
            await within(producer.send(bytes(6 * 1024 * 1024)))


async def test_chunking_with_batching_is_refused(pulsar_broker: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match="batching_enabled"):
            await client.create_producer(topic, chunking_enabled=True)


async def test_each_chunk_counts_against_max_pending_messages(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """A message of 3 chunks holds 3 of the 4 pending permits until the broker stored it:
    a second one, sent before any receipt could arrive (no await yields to the loop
    between the two calls), is refused; once the first is stored it passes."""
    three_chunks = _rng.randbytes(2 * CHUNK + 1)
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(
            topic, **chunking(CHUNK, max_pending_messages=4, block_if_queue_full=False)
        )
        first = await producer.send_async(three_chunks)
        with pytest.raises(msgclient.ProducerQueueIsFullError, match="3 chunks needs 3 of the 4"):
            await producer.send_async(three_chunks)
        first_id = await within(first)
        second_id = await within(producer.send(three_chunks))
        assert producer.last_sequence_id == 1  # the refused message took no sequence id
    assert isinstance(first_id, ChunkMessageId) and isinstance(second_id, ChunkMessageId)
