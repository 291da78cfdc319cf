"""Kafka partitioning: murmur2 as Java's Utils.murmur2, keyed and sticky unkeyed routing."""

from __future__ import annotations

import asyncio
import itertools
import random
import warnings
from collections import Counter

import pytest

from msgclient.errors import InvalidConfigurationError
from msgclient.message import OutgoingMessage
from protocols.kafkawire.partitioner import make_kafka_router, murmur2, partition_for_key

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.testMurmur2
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


_LOOP = asyncio.new_event_loop()  # only makes the (never awaited) futures
_LOOP.close()


def message(value: bytes = b"v", key: str | bytes | None = None) -> OutgoingMessage:
    return OutgoingMessage(value, _LOOP.create_future(), partition_key=key)


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS.items())
def test_murmur2_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_python() -> None:
    rng = random.Random(1234)
    for _ in range(500):
        data = rng.randbytes(rng.randrange(64))
        result = murmur2(data)
        assert -(2**31) <= result < 2**31
        assert result & 0xFFFFFFFF == kafka_python_murmur2(data)


class FakeCluster:
    """What kafka-python's DefaultPartitioner asks of its cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.all = set(range(partitions))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.all

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.all


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 16, 100])
def test_keyed_partition_matches_kafka_python(partitions: int) -> None:
    kafka_python = DefaultPartitioner()
    cluster = FakeCluster(partitions)
    rng = random.Random(partitions)
    keys = [rng.randbytes(rng.randrange(1, 40)) for _ in range(300)]
    keys += [b"", "é".encode(), b"\xff\x00"]
    router = make_kafka_router(partitions, 16384)
    for key in keys:
        expected = kafka_python.partition("t", key, key, None, None, cluster)
        assert partition_for_key(key, partitions) == expected
        assert router(message(key=key)) == expected


def test_str_key_is_hashed_as_utf8() -> None:
    for key in ["k", "clé", "\U0001f600", ""]:
        assert partition_for_key(key, 13) == partition_for_key(key.encode(), 13)
    router = make_kafka_router(13, 100)
    assert router(message(key="clé")) == partition_for_key("clé".encode(), 13)
    # An undecodable Kafka key read back as text hashes as the original bytes.
    raw = b"\xff\xfe-key"
    assert partition_for_key(raw.decode("utf-8", "surrogateescape"), 13) == (
        partition_for_key(raw, 13)
    )


def test_keyed_messages_do_not_move_the_sticky_partition() -> None:
    router = make_kafka_router(8, 10, rng=random.Random(5))
    sticky = router(message(b"12345"))
    for i in range(100):
        router(message(b"x" * 100, key=f"k{i}"))
    assert router(message(b"1234")) == sticky  # 9 bytes so far: no switch yet
    assert router(message(b"1")) == sticky  # crosses 10 bytes: still here, then switches
    assert router(message(b"1")) != sticky


def test_sticky_switches_after_batch_size_bytes() -> None:
    batch_size = 1000
    router = make_kafka_router(10, batch_size, rng=random.Random(42))
    runs: list[tuple[int, int]] = []  # (partition, bytes routed there in a row)
    for _ in range(2000):
        partition = router(message(b"x" * 100))
        if runs and runs[-1][0] == partition:
            runs[-1] = (partition, runs[-1][1] + 100)
        else:
            runs.append((partition, 100))
    # every run but the last is exactly one batch_size: 10 messages of 100 bytes
    assert all(size == batch_size for _, size in runs[:-1])
    assert len(runs) == 200
    # never the same partition twice in a row
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))


def test_sticky_switch_with_uneven_values() -> None:
    router = make_kafka_router(4, 100, rng=random.Random(3))
    first = router(message(b"x" * 60))
    assert router(message(b"x" * 60)) == first  # 120 >= 100: sent here, then switch
    second = router(message(b"x" * 10))
    assert second != first
    assert router(message(b"x" * 250)) == second  # one large value still goes here
    assert router(message(b"")) != second


def test_sticky_spreads_over_all_partitions() -> None:
    partitions = 6
    router = make_kafka_router(partitions, 1, rng=random.Random(7))
    one = message()
    counts = Counter(router(one) for _ in range(60000))
    assert set(counts) == set(range(partitions))
    for count in counts.values():  # uniform: 10000 each, within a few percent
        assert 9400 < count < 10600


def test_single_partition_topic() -> None:
    router = make_kafka_router(1, 1, rng=random.Random(0))
    assert {router(message(b"x" * 10)) for _ in range(100)} == {0}
    assert router(message(key=b"any")) == 0


@pytest.mark.parametrize(("partitions", "batch_size"), [(0, 100), (3, 0), (-1, 1)])
def test_invalid_arguments(partitions: int, batch_size: int) -> None:
    with pytest.raises(InvalidConfigurationError):
        make_kafka_router(partitions, batch_size)
