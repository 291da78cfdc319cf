"""Client and producer options: defaults, and errors that name the option and what it takes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from msgclient import Client
from msgclient.errors import InvalidConfigurationError
from msgclient.options import (
    BatchingType,
    ClientOptions,
    CompressionType,
    HashingScheme,
    PartitionsRoutingMode,
    ProducerOptions,
)
from msgclient.validators import build


def test_client_defaults_follow_the_official_client() -> None:
    options = ClientOptions()
    assert options.operation_timeout_seconds == 30.0
    assert options.connection_timeout_ms == 10_000
    assert options.keep_alive_interval_seconds == 30.0
    assert options.connections_per_broker == 1
    assert options.memory_limit == 64 * 1024 * 1024
    assert options.max_lookup_redirects == 20
    assert options.tls_allow_insecure_connection is False


def test_producer_defaults_follow_the_official_client() -> None:
    options = ProducerOptions()
    assert options.send_timeout_millis == 30_000
    assert options.batching_enabled is True
    assert options.batching_max_messages == 1000
    assert options.batching_max_allowed_size_in_bytes == 128 * 1024
    assert options.batching_max_publish_delay_ms == 1.0
    assert options.batching_type is BatchingType.Default
    assert options.compression_type is CompressionType.NONE
    assert options.message_routing_mode is PartitionsRoutingMode.RoundRobinDistribution
    assert options.hashing_scheme is HashingScheme.JavaStringHash
    assert options.max_pending_messages == 0
    assert options.initial_sequence_id is None


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("operation_timeout_seconds", 0, "a number >= 0.001"),
        ("operation_timeout_seconds", "30", "a number >= 0.001"),
        ("operation_timeout_seconds", True, "a number >= 0.001"),
        ("connection_timeout_ms", 0, "an integer >= 1"),
        ("connection_timeout_ms", 1.5, "an integer >= 1"),
        ("keep_alive_interval_seconds", 0.001, "a number >= 0.01"),
        ("connections_per_broker", 0, "an integer >= 1"),
        ("connections_per_broker", True, "an integer >= 1"),
        ("memory_limit", -1, "an integer >= 0"),
        ("max_lookup_redirects", 0, "an integer >= 1"),
        ("initial_backoff_interval_ms", 0, "an integer >= 1"),
        ("tls_trust_certs_file_path", 42, "a string or None"),
        ("tls_allow_insecure_connection", "yes", "True or False"),
        ("tls_validate_hostname", 1, "True or False"),
    ],
)
def test_bad_client_option_is_named(name: str, value: Any, expected: str) -> None:
    with pytest.raises(InvalidConfigurationError) as caught:
        ClientOptions(**{name: value})
    assert str(caught.value) == f"option {name}={value!r} is invalid: expected {expected}"


def test_max_backoff_below_initial_names_both() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"max_backoff_interval_ms=50 .*>= initial"):
        ClientOptions(initial_backoff_interval_ms=100, max_backoff_interval_ms=50)
    ClientOptions(initial_backoff_interval_ms=100, max_backoff_interval_ms=100)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("producer_name", 7, "a string or None"),
        ("send_timeout_millis", -1, "an integer >= 0"),
        ("compression_type", "LZ4", "one of CompressionType.NONE"),
        ("max_pending_messages", -5, "an integer >= 0"),
        ("block_if_queue_full", None, "True or False"),
        ("batching_enabled", 0, "True or False"),
        ("batching_max_messages", 0, "an integer >= 1"),
        ("batching_max_allowed_size_in_bytes", 0, "an integer >= 1"),
        ("batching_max_publish_delay_ms", -0.5, "a number >= 0"),
        ("batching_type", "KeyBased", "one of BatchingType.Default, BatchingType.KeyBased"),
        ("message_routing_mode", 0, "one of PartitionsRoutingMode.RoundRobinDistribution"),
        ("hashing_scheme", "murmur", "one of HashingScheme.JavaStringHash"),
        ("message_router", "not callable", "a callable or None"),
        ("properties", {"a": 1}, "a mapping of str to str"),
        ("properties", [("a", "b")], "a mapping of str to str"),
        ("initial_sequence_id", -2, "an integer >= -1 or None"),
        ("initial_sequence_id", 1.5, "an integer >= -1 or None"),
        ("initial_sequence_id", True, "an integer >= -1 or None"),
    ],
)
def test_bad_producer_option_is_named(name: str, value: Any, expected: str) -> None:
    with pytest.raises(InvalidConfigurationError) as caught:
        ProducerOptions(**{name: value})
    assert str(caught.value).startswith(f"option {name}={value!r} is invalid: expected {expected}")


def test_good_producer_options_are_kept() -> None:
    def router(message: Any, partitions: int) -> int:
        return 0

    options = ProducerOptions(
        producer_name="p",
        initial_sequence_id=-1,
        send_timeout_millis=0,
        batching_max_publish_delay_ms=0,
        message_routing_mode=PartitionsRoutingMode.CustomPartition,
        message_router=router,
        properties={"k": "v"},
    )
    assert options.message_router is router
    assert options.initial_sequence_id == -1
    assert options.properties == {"k": "v"}


def test_custom_routing_needs_a_router_and_a_router_needs_custom_routing() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"message_router=None .*CustomPartition"):
        ProducerOptions(message_routing_mode=PartitionsRoutingMode.CustomPartition)
    with pytest.raises(InvalidConfigurationError, match=r"message_router=.*CustomPartition"):
        ProducerOptions(message_router=lambda message, partitions: 0)


def test_build_names_unknown_options_and_lists_the_valid_ones() -> None:
    with pytest.raises(InvalidConfigurationError) as caught:
        build(ClientOptions, "client", {"operation_timeout": 3, "zzz": 1})
    message = str(caught.value)
    assert message.startswith("unknown client option(s) operation_timeout, zzz; valid: ")
    assert "operation_timeout_seconds" in message


def test_build_passes_known_options() -> None:
    options = build(ProducerOptions, "producer", {"batching_enabled": False})
    assert options == ProducerOptions(batching_enabled=False)


def test_options_are_frozen() -> None:
    options = ClientOptions()
    with pytest.raises(AttributeError):
        options.memory_limit = 1  # type: ignore[misc]


def test_client_rejects_bad_options_before_connecting() -> None:
    with pytest.raises(InvalidConfigurationError, match=re.escape("connections_per_broker=0")):
        Client("pulsar://127.0.0.1:1", connections_per_broker=0)
    with pytest.raises(InvalidConfigurationError, match="unknown client option"):
        Client("pulsar://127.0.0.1:1", operation_timeout_ms=5)
