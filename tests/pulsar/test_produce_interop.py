"""msgclient produces, the official pulsar-client reads: bytes, metadata, ids and routing agree."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pulsar
import pytest

import msgclient
from msgclient.core.network.connection import Connection
from msgclient.core.send.hashing import java_string_hash, murmur3_32_hash, sign_safe_mod
from msgclient.embedded import PulsarBroker
from msgclient.message import OutgoingMessage
from protocols.pulsarwire.compression import PULSAR_COMPRESSION_TYPES
from tests.pulsar.helpers import (
    assert_nothing_more,
    assert_same_id,
    official_client,
    receive,
    settle,
    strictly_increasing,
    subscribe,
    within,
)

CompressionType = msgclient.CompressionType
HashingScheme = msgclient.HashingScheme
RoutingMode = msgclient.PartitionsRoutingMode

_rng = random.Random(6650)
PAYLOADS = [
    b"",
    b"\x00\xff\x00 binary, not text",
    _rng.randbytes(1000),
    b"compressible " * 5000,
    _rng.randbytes(1 << 20),  # 1 MiB: over the 128 KiB batch limit, so it travels alone
    *(b"small-%d" % i for i in range(20)),
]

# -- plain topics -------------------------------------------------------------------------


@pytest.mark.parametrize("compression", PULSAR_COMPRESSION_TYPES, ids=lambda c: c.name)
@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_payloads_and_ids_round_trip(
    pulsar_broker: PulsarBroker, topic: str, batching: bool, compression: CompressionType
) -> None:
    payloads = PAYLOADS
    if compression is CompressionType.ZLIB and not batching:
        # Not a msgclient or broker issue: the official C++ consumer discards an unbatched
        # empty ZLIB message ("Failed to decompress zlib buffer: -2 ... uncompressed size:
        # 0"), and does so for its own C++ producer's messages too (pulsar-client 3.13).
        payloads = [p for p in PAYLOADS if p]
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(
                topic, batching_enabled=batching, compression_type=compression
            )
            ids = await settle([await producer.send_async(p) for p in payloads])
        received = await receive(consumer, len(payloads))
        await assert_nothing_more(consumer)

    assert [m.data() for m in received] == payloads
    for ours, message in zip(ids, received, strict=True):
        assert_same_id(ours, message.message_id())
    assert strictly_increasing(ids)
    if batching:  # the 20 small messages share one entry, told apart by their batch index
        assert max(i.batch_index for i in ids) == 19
    else:
        assert {i.batch_index for i in ids} == {-1}
        assert len({i.entry_id for i in ids}) == len(payloads)


@pytest.fixture
def bytes_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of everything msgclient writes to any socket from now on."""
    sizes: list[int] = []
    write = Connection.write

    def counting_write(self: Connection[Any], data: bytes) -> None:
        sizes.append(len(data))
        write(self, data)

    monkeypatch.setattr(Connection, "write", counting_write)
    return sizes


@pytest.mark.parametrize("compression", PULSAR_COMPRESSION_TYPES, ids=lambda c: c.name)
async def test_compression_is_applied_on_the_wire(
    pulsar_broker: PulsarBroker, topic: str, compression: CompressionType, bytes_written: list[int]
) -> None:
    # Without this, a codec silently falling back to NONE would pass the round trip above.
    payload = b"abc" * 100_000
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, compression_type=compression)
            bytes_written.clear()  # count the SEND frame only, not the handshake
            await within(producer.send(payload))
            on_wire = sum(bytes_written)
        [message] = await receive(consumer, 1)
    assert message.data() == payload
    if compression is CompressionType.NONE:
        assert on_wire > len(payload)
    else:
        assert on_wire < len(payload) // 10


@attrs.frozen
class Sent:
    """One message and the send options it goes with."""

    value: bytes
    partition_key: str | None = None
    ordering_key: str | bytes | None = None
    properties: dict[str, str] | None = None
    event_timestamp: int | None = None

    def options(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if k != "value" and v is not None}


EVENT_TIME = 1_700_000_000_123  # ms
METADATA_MESSAGES = [
    Sent(b"plain"),
    Sent(b"keyed", partition_key="key-7"),
    Sent(b"non-ascii key", partition_key="clé 日本語 😀"),
    Sent(b"str ordering key", ordering_key="order-1"),
    Sent(b"bytes ordering key", ordering_key=b"order-2"),
    Sent(b"properties", properties={"a": "1", "ключ": "значение", "empty": ""}),
    Sent(b"event time", event_timestamp=EVENT_TIME),
    Sent(
        b"everything",
        partition_key="k",
        ordering_key="o",
        properties={"p": "q"},
        event_timestamp=EVENT_TIME + 1,
    ),
    Sent(b"plain again"),  # no key after keyed ones: nothing leaks from its neighbours
]


def _as_str(key: str | bytes | None) -> str:
    return key.decode() if isinstance(key, bytes) else (key or "")


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_keys_properties_and_event_time_round_trip(
    pulsar_broker: PulsarBroker, topic: str, batching: bool
) -> None:
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, batching_enabled=batching)
            futures = [await producer.send_async(m.value, **m.options()) for m in METADATA_MESSAGES]
            ids = await settle(futures)
        received = await receive(consumer, len(METADATA_MESSAGES))

    if batching:  # all in one batch: per-message metadata must not be the batch's
        assert len({(i.ledger_id, i.entry_id) for i in ids}) == 1
    for sent, ours, message in zip(METADATA_MESSAGES, ids, received, strict=True):
        assert message.data() == sent.value
        assert message.partition_key() == (sent.partition_key or "")  # "" means none
        assert message.ordering_key() == _as_str(sent.ordering_key)
        assert message.properties() == (sent.properties or {})
        assert message.event_timestamp() == (sent.event_timestamp or 0)  # 0 means none
        assert_same_id(ours, message.message_id())


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_many_messages_arrive_in_order(
    pulsar_broker: PulsarBroker, topic: str, batching: bool
) -> None:
    count = 3000
    values = [b"message-%05d" % i for i in range(count)]
    url = pulsar_broker.service_url
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, batching_enabled=batching)
            ids = await settle([await producer.send_async(v) for v in values])
        received = await receive(consumer, count)
        await assert_nothing_more(consumer)
    assert [m.data() for m in received] == values
    assert strictly_increasing(ids)
    for ours, message in zip(ids, received, strict=True):
        assert_same_id(ours, message.message_id())


# -- partitioned topics -------------------------------------------------------------------

PARTITIONS = 5


@attrs.frozen
class RoutingVector:
    """A key, its hashes as the Java client computes them, and its partition of 5."""

    key: str
    java_hash: int  # String.hashCode() & Integer.MAX_VALUE, printed by OpenJDK 17
    java_partition: int
    murmur_hash: int  # MurmurHash3_x86_32(UTF-8 bytes, seed 0) & MAX_VALUE, reference C code
    murmur_partition: int


# Not computed with msgclient: Java values from OpenJDK's String.hashCode(), Murmur3 values
# from the reference C implementation (the mmh3 package). By hand, for two of them:
#   "hello": 104*31^4 + 101*31^3 + 108*31^2 + 108*31 + 111 = 99162322
#   "😀" (U+1F600) is the UTF-16 pair D83D DE00: 55357*31 + 56832 = 1772899
ROUTING_VECTORS = [
    RoutingVector("hello", 99162322, 2, 613153351, 1),
    RoutingVector("polygenelubricants", 0, 0, 1101602400, 0),  # hashCode() == MIN_VALUE
    RoutingVector("Aa", 2112, 2, 713673153, 3),  # "Aa" and "BB": the classic Java collision
    RoutingVector("BB", 2112, 2, 1707312886, 1),
    RoutingVector("clé", 98720, 0, 1778668227, 2),
    RoutingVector("日本語", 25921943, 3, 631534231, 1),
    RoutingVector("Ключ", 32356570, 0, 1813970204, 4),
    RoutingVector("😀", 1772899, 4, 1051995898, 3),
    RoutingVector("emoji-😀-key", 1573774940, 0, 1928808793, 3),  # hashCode() is negative
    RoutingVector("user-1234567890-long-key-over-sixteen", 646741682, 2, 1050795904, 4),
]


@pytest.fixture
def partitioned(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> Iterator[tuple[str, str]]:
    """A broker of our own on which ``topic`` has PARTITIONS partitions: (url, full name)."""
    broker = make_pulsar_broker(partitioned_topics={topic: PARTITIONS})
    yield broker.service_url, f"persistent://public/default/{topic}"


async def _produce(
    url: str, topic: str, messages: list[Sent], **options: Any
) -> tuple[list[Any], list[pulsar.Message]]:
    """Send ``messages`` one by one with msgclient; read them all back with the official client.

    Returns msgclient's ids (in send order) and the official messages (partitions interleave).
    """
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        async with msgclient.Client(url) as client:
            producer = await client.create_producer(topic, **options)
            ids = [await within(producer.send(m.value, **m.options())) for m in messages]
        received = await receive(consumer, len(messages))
        await assert_nothing_more(consumer)
    return ids, received


def _partition_of(message: pulsar.Message, topic: str) -> int:
    """The partition the official client read ``message`` from, checked two ways."""
    partition: int = message.message_id().partition()
    assert message.topic_name() == f"{topic}-partition-{partition}"
    return partition


@pytest.mark.parametrize("scheme", list(HashingScheme), ids=lambda s: s.name)
async def test_keyed_messages_go_where_the_java_client_puts_them(
    partitioned: tuple[str, str], scheme: HashingScheme
) -> None:
    url, topic = partitioned
    java = scheme is HashingScheme.JavaStringHash
    expected = {v.key: v.java_partition if java else v.murmur_partition for v in ROUTING_VECTORS}
    for v in ROUTING_VECTORS:  # msgclient's hashes are the Java ones, bit for bit
        assert java_string_hash(v.key) == v.java_hash
        assert murmur3_32_hash(v.key) == v.murmur_hash
        hashed = v.java_hash if java else v.murmur_hash
        assert hashed % PARTITIONS == expected[v.key]
    messages = [
        Sent(f"{v.key}#{i}".encode(), partition_key=v.key)
        for v in ROUTING_VECTORS
        for i in range(3)
    ]

    ids, received = await _produce(url, topic, messages, hashing_scheme=scheme)

    assert [i.partition for i in ids] == [expected[m.partition_key] for m in messages]  # type: ignore[index]
    by_value = {m.data(): m for m in received}
    for sent, ours in zip(messages, ids, strict=True):
        message = by_value[sent.value]
        assert message.partition_key() == sent.partition_key
        assert _partition_of(message, topic) == expected[sent.partition_key]  # type: ignore[index]
        assert_same_id(ours, message.message_id())


async def test_official_producer_routed_with_java_hash_agrees(
    partitioned: tuple[str, str],
) -> None:
    # The official Python client (3.13) has no hashing_scheme option: its keyed routing is
    # the C++ BoostHash, which is not portable. Its message_router hook is the way to
    # share partitions with Java and msgclient; this checks the two clients agree through it.
    url, topic = partitioned
    with official_client(url) as official:
        consumer = subscribe(official, topic)
        producer = official.create_producer(
            topic,
            message_routing_mode=pulsar.PartitionsRoutingMode.CustomPartition,
            message_router=lambda message, partitions: sign_safe_mod(
                java_string_hash(message.partition_key()), partitions
            ),
        )
        for v in ROUTING_VECTORS:
            producer.send(v.key.encode(), partition_key=v.key)
        received = await receive(consumer, len(ROUTING_VECTORS))
    expected = {v.key: v.java_partition for v in ROUTING_VECTORS}
    assert {m.partition_key(): _partition_of(m, topic) for m in received} == expected


async def test_round_robin_unbatched_visits_every_partition_in_turn(
    partitioned: tuple[str, str],
) -> None:
    url, topic = partitioned
    messages = [Sent(b"rr-%d" % i) for i in range(4 * PARTITIONS)]
    ids, received = await _produce(url, topic, messages, batching_enabled=False)
    partitions = [i.partition for i in ids]
    assert all((b - a) % PARTITIONS == 1 for a, b in itertools.pairwise(partitions))
    assert Counter(_partition_of(m, topic) for m in received) == dict.fromkeys(range(PARTITIONS), 4)


async def test_round_robin_batched_switches_partition_per_batch_window(
    partitioned: tuple[str, str],
) -> None:
    # Batched round robin switches partition every 10 batching delays (the Java client's
    # partitionSwitchMs: 10 ms here); each awaited send takes at least one delay (1 ms), so
    # 100 of them span at least 10 windows, visited one after the other.
    url, topic = partitioned
    messages = [Sent(b"rr-%d" % i) for i in range(100)]
    ids, received = await _produce(url, topic, messages)
    assert {i.partition for i in ids} == set(range(PARTITIONS))
    assert {_partition_of(m, topic) for m in received} == set(range(PARTITIONS))


async def test_use_single_partition_keeps_unkeyed_messages_together(
    partitioned: tuple[str, str],
) -> None:
    url, topic = partitioned
    hello = ROUTING_VECTORS[0]
    messages = [Sent(b"single-%d" % i) for i in range(30)]
    messages.append(Sent(b"keyed", partition_key=hello.key))  # a key still routes by hash
    ids, received = await _produce(
        url, topic, messages, message_routing_mode=RoutingMode.UseSinglePartition
    )
    [single] = {i.partition for i in ids[:-1]}
    assert ids[-1].partition == hello.java_partition
    for message in received:
        expected = hello.java_partition if message.data() == b"keyed" else single
        assert _partition_of(message, topic) == expected


async def test_custom_partition_uses_the_router(partitioned: tuple[str, str]) -> None:
    url, topic = partitioned
    seen_counts: set[int] = set()

    def router(message: OutgoingMessage, partitions: int) -> int:
        seen_counts.add(partitions)
        return message.value[0] % partitions

    messages = [Sent(bytes([i]) + b"-custom") for i in range(3 * PARTITIONS)]
    ids, received = await _produce(
        url,
        topic,
        messages,
        message_routing_mode=RoutingMode.CustomPartition,
        message_router=router,
    )
    assert seen_counts == {PARTITIONS}
    assert [i.partition for i in ids] == [i % PARTITIONS for i in range(len(messages))]
    for message in received:
        assert _partition_of(message, topic) == message.data()[0] % PARTITIONS


async def test_custom_router_out_of_range_is_rejected(partitioned: tuple[str, str]) -> None:
    url, topic = partitioned
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(
            topic,
            message_routing_mode=RoutingMode.CustomPartition,
            message_router=lambda message, partitions: partitions,
        )
        with pytest.raises(msgclient.InvalidConfigurationError, match="message_router returned 5"):
            await producer.send_async(b"nowhere")
        assert client.memory_used == 0 and producer.pending_count == 0
