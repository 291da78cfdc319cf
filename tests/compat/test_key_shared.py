"""Key_Shared policies on pulsar-lite, the same program on the official client and on
pulsar_compat: Sticky consumers get exactly the keys whose hash falls in their ranges
(pulsar-lite honours sticky ranges; while a hash has no consumer its dispatch is not
reliable there, so the ranges cover 0..65535: tests/pulsar/scripted/test_key_shared_policy.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from msgclient.core.send.hashing import murmur3_32_hash
from msgclient.embedded import PulsarBroker
from tests.compat.conftest import QUIET, RECEIVE_MS

KEYS = [f"key-{i}" for i in range(60)]
LOW, HIGH = [(0, 20000), (40001, 65535)], [(20001, 40000)]


def in_ranges(key: str, ranges: list[tuple[int, int]]) -> bool:
    """Key_Shared's hash of a key: murmur3_32 modulo the 65536 hash slots."""
    key_hash = murmur3_32_hash(key) % 65536
    return any(start <= key_hash <= end for start, end in ranges)


def sticky(pulsar: ModuleType, ranges: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "consumer_type": pulsar.ConsumerType.KeyShared,
        "initial_position": pulsar.InitialPosition.Earliest,
        "key_shared_policy": pulsar.ConsumerKeySharedPolicy(
            pulsar.KeySharedMode.Sticky, sticky_ranges=ranges
        ),
    }


def receive_all(consumer: Any, count: int, pulsar: ModuleType) -> list[str]:
    """The keys of ``count`` distinct messages, less pulsar-lite's duplicate dispatches on
    Key_Shared (the same id again, redelivery count 0: see ``without_broker_duplicates`` in
    tests/pulsar/test_consume_types.py); any other extra message fails."""
    keys: list[str] = []
    seen: set[str] = set()
    while len(keys) < count:
        message = consumer.receive(RECEIVE_MS)
        consumer.acknowledge(message)
        message_id = str(message.message_id())
        if message_id in seen and message.redelivery_count() == 0:
            continue
        seen.add(message_id)
        keys.append(message.partition_key())
    with pytest.raises(pulsar.Timeout):  # and nothing more
        consumer.receive(300)
    return keys


def test_sticky_consumers_get_the_keys_of_their_ranges(
    pulsar_module: ModuleType, client: Any, topic: str, pulsar_broker: PulsarBroker
) -> None:
    pulsar = pulsar_module
    low = client.subscribe(topic, "sub", **sticky(pulsar, LOW))
    high = client.subscribe(topic, "sub", **sticky(pulsar, HIGH))
    # The producer on a connection of its own: pulsar-lite redelivers messages by itself
    # when producer and consumer share one (brokers.md).
    producing = pulsar.Client(pulsar_broker.service_url, operation_timeout_seconds=10, logger=QUIET)
    producer = producing.create_producer(topic)
    for key in KEYS:
        producer.send(key.encode(), partition_key=key)
    producing.close()
    expected_low = [k for k in KEYS if in_ranges(k, LOW)]
    expected_high = [k for k in KEYS if in_ranges(k, HIGH)]
    assert expected_low and expected_high  # both consumers have keys to get

    assert receive_all(low, len(expected_low), pulsar) == expected_low
    assert receive_all(high, len(expected_high), pulsar) == expected_high


def test_a_policy_on_a_shared_consumer_is_ignored(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    """As the official client: the policy is not sent (test_wire_options.py), and the
    Shared consumer gets every key, not those of the ranges."""
    pulsar = pulsar_module
    options = sticky(pulsar, [(0, 10)])
    options["consumer_type"] = pulsar.ConsumerType.Shared
    consumer = client.subscribe(topic, "sub", **options)
    producer = client.create_producer(topic)
    for key in KEYS[:10]:
        producer.send(key.encode(), partition_key=key)
    assert receive_all(consumer, 10, pulsar) == KEYS[:10]


@pytest.mark.parametrize("ranges", [[], [(0, 65536)], [(-1, 5)], [(0, 10), (10, 20)]], ids=str)
def test_bad_ranges_are_refused_when_the_policy_is_made(
    pulsar_module: ModuleType, ranges: list[tuple[int, int]]
) -> None:
    pulsar = pulsar_module
    with pytest.raises(ValueError):
        pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, False, ranges)
    with pytest.raises(ValueError):
        pulsar.KeySharedPolicy().set_sticky_ranges(ranges)
