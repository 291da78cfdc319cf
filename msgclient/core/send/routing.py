"""Partition routing: which partition of a partitioned topic a message goes to.

The same rules as the Java client, so that producers in any language put a key on the
same partition: a keyed message goes to ``hash(key) mod partitions``; otherwise the
routing mode decides.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Callable

from msgclient.contract import Router
from msgclient.core.send.hashing import java_string_hash, murmur3_32_hash, sign_safe_mod
from msgclient.errors import InvalidConfigurationError
from msgclient.message import OutgoingMessage
from msgclient.options import HashingScheme, PartitionsRoutingMode, ProducerOptions

# Java ProducerConfigurationData.roundRobinRouterBatchingPartitionSwitchFrequency
BATCHING_PARTITION_SWITCH_FREQUENCY = 10

HASHES: dict[HashingScheme, Callable[[str], int]] = {
    HashingScheme.JavaStringHash: java_string_hash,
    HashingScheme.Murmur3_32Hash: murmur3_32_hash,
}


def pulsar_key(key: str | bytes) -> str:
    """The key as Pulsar carries and hashes it: bytes keys (Java's keyBytes) as base64."""
    return key if type(key) is str else base64.b64encode(key).decode()  # type: ignore[arg-type]


def make_router(options: ProducerOptions, partitions: int) -> Router:
    """A function from message to partition index for a topic with ``partitions``."""
    key_hash = HASHES[options.hashing_scheme]
    mode = options.message_routing_mode

    if mode is PartitionsRoutingMode.CustomPartition:
        custom = options.message_router
        assert custom is not None  # ProducerOptions checks this

        def route_custom(message: OutgoingMessage) -> int:
            partition = custom(message, partitions)
            if not isinstance(partition, int) or not 0 <= partition < partitions:
                raise InvalidConfigurationError(
                    f"message_router returned {partition!r}: expected 0..{partitions - 1}"
                )
            return partition

        return route_custom

    if mode is PartitionsRoutingMode.UseSinglePartition:
        chosen = random.randrange(partitions)

        def route_single(message: OutgoingMessage) -> int:
            key = message.partition_key
            return chosen if key is None else sign_safe_mod(key_hash(pulsar_key(key)), partitions)

        return route_single

    start = random.randrange(partitions)
    if options.batching_enabled:
        # Switch partition once per window of several batch delays, so that consecutive
        # messages share batches (the Java client's partitionSwitchMs).
        window_ms = max(
            1, int(options.batching_max_publish_delay_ms * BATCHING_PARTITION_SWITCH_FREQUENCY)
        )

        def route_by_window(message: OutgoingMessage) -> int:
            key = message.partition_key
            if key is not None:
                return sign_safe_mod(key_hash(pulsar_key(key)), partitions)
            return (time.monotonic_ns() // 1_000_000 // window_ms + start) % partitions

        return route_by_window

    counter = start

    def route_round_robin(message: OutgoingMessage) -> int:
        nonlocal counter
        key = message.partition_key
        if key is not None:
            return sign_safe_mod(key_hash(pulsar_key(key)), partitions)
        counter += 1
        return counter % partitions

    return route_round_robin
