"""Partition routing: keyed messages by hash, unkeyed ones by routing mode."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from msgclient.core.send import routing
from msgclient.core.send.hashing import java_string_hash, murmur3_32_hash, sign_safe_mod
from msgclient.core.send.routing import make_router
from msgclient.errors import InvalidConfigurationError
from msgclient.message import OutgoingMessage
from msgclient.options import HashingScheme, PartitionsRoutingMode, ProducerOptions

PARTITIONS = 7
KEYS = [f"key-{i}" for i in range(50)] + ["", "é", "\U0001f600"]


def message(key: str | None = None) -> OutgoingMessage:
    loop = asyncio.new_event_loop()
    loop.close()
    return OutgoingMessage(b"v", loop.create_future(), partition_key=key)


class FakeMonotonic:
    """Stands in for the ``time`` module in routing: a settable monotonic_ns."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def monotonic_ns(self) -> int:
        return self.ms * 1_000_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    fake = FakeMonotonic()
    monkeypatch.setattr(routing, "time", SimpleNamespace(monotonic_ns=fake.monotonic_ns))
    return fake


MODES = [
    ProducerOptions(batching_enabled=True),
    ProducerOptions(batching_enabled=False),
    ProducerOptions(message_routing_mode=PartitionsRoutingMode.UseSinglePartition),
]


@pytest.mark.parametrize("options", MODES, ids=["round-robin-batched", "round-robin", "single"])
@pytest.mark.parametrize(
    ("scheme", "hash_"),
    [
        (HashingScheme.JavaStringHash, java_string_hash),
        (HashingScheme.Murmur3_32Hash, murmur3_32_hash),
    ],
)
def test_keyed_messages_go_to_hash_mod_partitions(
    options: ProducerOptions, scheme: HashingScheme, hash_: Any
) -> None:
    options = ProducerOptions(
        batching_enabled=options.batching_enabled,
        message_routing_mode=options.message_routing_mode,
        hashing_scheme=scheme,
    )
    route = make_router(options, PARTITIONS)
    for key in KEYS:
        assert route(message(key)) == sign_safe_mod(hash_(key), PARTITIONS), key


def test_the_two_hashing_schemes_disagree_somewhere() -> None:
    # Guards the test above: it would pass with either hash if both gave the same partitions.
    java = make_router(ProducerOptions(hashing_scheme=HashingScheme.JavaStringHash), PARTITIONS)
    murmur = make_router(ProducerOptions(hashing_scheme=HashingScheme.Murmur3_32Hash), PARTITIONS)
    assert [java(message(k)) for k in KEYS] != [murmur(message(k)) for k in KEYS]


def test_known_key_lands_where_the_java_client_puts_it() -> None:
    # String.hashCode() by its definition, s[0]*31^(n-1) + ... + s[n-1], for an ASCII key.
    expected_hash = sum(ord(c) * 31 ** (4 - i) for i, c in enumerate("key-0")) & 0x7FFFFFFF
    assert expected_hash == 101943362
    route = make_router(ProducerOptions(), PARTITIONS)
    assert route(message("key-0")) == 101943362 % PARTITIONS


def test_round_robin_without_batching_rotates_strictly() -> None:
    route = make_router(ProducerOptions(batching_enabled=False), PARTITIONS)
    chosen = [route(message()) for _ in range(3 * PARTITIONS)]
    for previous, current in itertools.pairwise(chosen):
        assert current == (previous + 1) % PARTITIONS
    assert sorted(chosen[:PARTITIONS]) == list(range(PARTITIONS))


def test_round_robin_rotation_is_not_disturbed_by_keyed_messages() -> None:
    route = make_router(ProducerOptions(batching_enabled=False), PARTITIONS)
    first = route(message())
    route(message("some key"))
    assert route(message()) == (first + 1) % PARTITIONS


def test_round_robin_with_batching_switches_partition_per_window(clock: FakeMonotonic) -> None:
    # The window is several batch delays long (Java's partitionSwitchMs), so that the
    # messages of a window fill batches on one partition.
    delay_ms = 2
    window = delay_ms * routing.BATCHING_PARTITION_SWITCH_FREQUENCY
    assert window > delay_ms
    route = make_router(
        ProducerOptions(batching_enabled=True, batching_max_publish_delay_ms=delay_ms), PARTITIONS
    )
    clock.ms = 1000 * window  # the start of a window
    first = route(message())
    for _ in range(window - 1):  # within the window, one partition
        clock.ms += 1
        assert route(message()) == first
    clock.ms += 1  # next window, next partition
    assert route(message()) == (first + 1) % PARTITIONS
    assert route(message()) == (first + 1) % PARTITIONS
    clock.ms += 3 * window  # three windows on
    assert route(message()) == (first + 4) % PARTITIONS


def test_round_robin_with_a_zero_delay_still_has_a_one_ms_window(clock: FakeMonotonic) -> None:
    route = make_router(
        ProducerOptions(batching_enabled=True, batching_max_publish_delay_ms=0), PARTITIONS
    )
    first = route(message())
    assert route(message()) == first
    clock.ms += 1
    assert route(message()) == (first + 1) % PARTITIONS


def test_use_single_partition_sends_every_unkeyed_message_to_one_partition() -> None:
    options = ProducerOptions(message_routing_mode=PartitionsRoutingMode.UseSinglePartition)
    route = make_router(options, PARTITIONS)
    chosen = {route(message()) for _ in range(50)}
    assert len(chosen) == 1
    assert 0 <= chosen.pop() < PARTITIONS
    # ... and across routers the partition is picked at random, so load spreads.
    picked = {make_router(options, PARTITIONS)(message()) for _ in range(200)}
    assert len(picked) > 1


def test_custom_router_gets_the_message_and_the_partition_count() -> None:
    seen: list[tuple[str | None, int]] = []

    def router(msg: OutgoingMessage, partitions: int) -> int:
        seen.append((msg.partition_key, partitions))
        return partitions - 1

    options = ProducerOptions(
        message_routing_mode=PartitionsRoutingMode.CustomPartition, message_router=router
    )
    route = make_router(options, PARTITIONS)
    assert route(message("k")) == PARTITIONS - 1  # the custom router decides, even for keys
    assert route(message()) == PARTITIONS - 1
    assert seen == [("k", PARTITIONS), (None, PARTITIONS)]


@pytest.mark.parametrize("bad", [-1, PARTITIONS, 2.0, "1", None])
def test_custom_router_result_is_validated(bad: Any) -> None:
    options = ProducerOptions(
        message_routing_mode=PartitionsRoutingMode.CustomPartition,
        message_router=lambda msg, partitions: bad,
    )
    route = make_router(options, PARTITIONS)
    with pytest.raises(InvalidConfigurationError) as caught:
        route(message())
    assert str(caught.value) == (f"message_router returned {bad!r}: expected 0..{PARTITIONS - 1}")
