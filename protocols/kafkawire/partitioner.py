"""Kafka producer partitioning, as the Java client does it.

A keyed record goes to ``murmur2(key) mod partitions``, the hash every Kafka client shares
(Java ``Utils.murmur2``), so that producers in any language put a key on the same
partition. Unkeyed records follow the uniform sticky partitioner of KIP-794 (the Java
client's built-in partitioner since 3.3): stay on one partition until about ``batch.size``
bytes went to it, then switch to another chosen at random, so that batches fill up.
"""

from __future__ import annotations

import random
import struct

from msgclient.contract import Router
from msgclient.errors import InvalidConfigurationError
from msgclient.message import OutgoingMessage

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's ``Utils.murmur2`` of ``data``: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    if words:
        for k in struct.unpack_from(f"<{words}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """The partition of a keyed record (Java ``BuiltInPartitioner.partitionForKey``).

    A str key is hashed as its UTF-8 bytes (surrogate-escaped bytes as they were, the
    same bytes ``Message.key_bytes()`` gives back).
    """
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogateescape")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def make_kafka_router(partitions: int, batch_size: int, rng: random.Random | None = None) -> Router:
    """A function from message to partition for a topic with ``partitions``.

    Keyed messages go by ``partition_for_key``. Unkeyed ones stick to one partition until
    at least ``batch_size`` bytes of values were routed there (the message that crosses
    the threshold still goes there), then move to a different partition drawn uniformly
    from the others. Unlike Java, the draw never repeats the partition just left: a repeat
    would only make one batch twice as long. ``rng`` is for tests.
    """
    if partitions < 1:
        raise InvalidConfigurationError(f"partitions must be >= 1, got {partitions}")
    if batch_size < 1:
        raise InvalidConfigurationError(f"batch_size must be >= 1, got {batch_size}")
    if partitions == 1:
        return _only_partition  # a call per message sent: skip the sticky bookkeeping
    randrange = (rng or random.Random()).randrange
    current = randrange(partitions)
    produced = 0

    def route(message: OutgoingMessage) -> int:
        nonlocal current, produced
        key = message.partition_key
        if key is not None:
            return partition_for_key(key, partitions)
        chosen = current
        produced += len(message.value)
        if produced >= batch_size:
            produced = 0
            if partitions > 1:
                # Draw among the partitions - 1 others: skip over the current one.
                other = randrange(partitions - 1)
                current = other + 1 if other >= chosen else other
        return chosen

    return route


def _only_partition(message: OutgoingMessage) -> int:
    return 0
