"""The official client's producer and consumer arguments, checked as it checks them and
turned into msgclient's options; shared by ``Client`` and ``asyncio.Client``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from msgclient import options as core
from msgclient.message import OutgoingMessage
from msgclient.options import CompressionType as CoreCompressionType
from msgclient.pulsar_compat.arguments import check_type, check_type_or_none
from msgclient.pulsar_compat.encryption import CryptoKeyReader
from msgclient.pulsar_compat.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    to_msgclient,
)
from msgclient.pulsar_compat.message import PayloadSchema
from msgclient.pulsar_compat.policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
)
from msgclient.pulsar_compat.producer import RoutedMessage
from msgclient.schema import BytesSchema, Schema

MessageRouter = Callable[[RoutedMessage, int], int]

log = logging.getLogger(__name__)


def producer_options(
    producer_name: str | None = None,
    schema: PayloadSchema | None = None,
    initial_sequence_id: int | None = None,
    send_timeout_millis: int = 30000,
    compression_type: CompressionType = CompressionType.NONE,
    max_pending_messages: int = 1000,
    max_pending_messages_across_partitions: int = 50000,
    block_if_queue_full: bool = False,
    batching_enabled: bool = False,
    batching_max_messages: int = 1000,
    batching_max_allowed_size_in_bytes: int = 128 * 1024,
    batching_max_publish_delay_ms: int = 10,
    chunking_enabled: bool = False,
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
    lazy_start_partitioned_producers: bool = False,
    properties: dict[str, str] | None = None,
    batching_type: BatchingType = BatchingType.Default,
    encryption_key: str | None = None,
    crypto_key_reader: CryptoKeyReader | None = None,
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
    message_router: MessageRouter | None = None,
) -> tuple[dict[str, Any], PayloadSchema]:
    """msgclient's producer options for the official ``create_producer`` arguments."""
    check_type_or_none(str, producer_name, "producer_name")
    check_type_or_none(int, initial_sequence_id, "initial_sequence_id")
    check_type(int, send_timeout_millis, "send_timeout_millis")
    check_type(CompressionType, compression_type, "compression_type")
    check_type(int, max_pending_messages, "max_pending_messages")
    check_type(
        int, max_pending_messages_across_partitions, "max_pending_messages_across_partitions"
    )
    check_type(bool, block_if_queue_full, "block_if_queue_full")
    check_type(bool, batching_enabled, "batching_enabled")
    check_type(int, batching_max_messages, "batching_max_messages")
    check_type(int, batching_max_allowed_size_in_bytes, "batching_max_allowed_size_in_bytes")
    check_type(int, batching_max_publish_delay_ms, "batching_max_publish_delay_ms")
    check_type(bool, chunking_enabled, "chunking_enabled")
    check_type(PartitionsRoutingMode, message_routing_mode, "message_routing_mode")
    check_type(bool, lazy_start_partitioned_producers, "lazy_start_partitioned_producers")
    check_type_or_none(dict, properties, "properties")
    check_type(BatchingType, batching_type, "batching_type")
    check_type_or_none(str, encryption_key, "encryption_key")
    check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
    check_type(ProducerAccessMode, access_mode, "access_mode")
    if batching_enabled and chunking_enabled:
        raise ValueError("Batching and chunking of messages can't be enabled together.")
    schema = payload_schema(schema)
    options: dict[str, Any] = {
        "producer_name": producer_name,
        "send_timeout_millis": send_timeout_millis,
        "compression_type": to_msgclient(compression_type, CoreCompressionType),
        "max_pending_messages": max_pending_messages,
        "max_pending_messages_across_partitions": max_pending_messages_across_partitions,
        "block_if_queue_full": block_if_queue_full,
        "batching_enabled": batching_enabled,
        "chunking_enabled": chunking_enabled,
        "batching_max_messages": batching_max_messages,
        "batching_max_allowed_size_in_bytes": batching_max_allowed_size_in_bytes,
        "batching_max_publish_delay_ms": batching_max_publish_delay_ms,
        "batching_type": to_msgclient(batching_type, core.BatchingType),
        "message_routing_mode": to_msgclient(message_routing_mode, core.PartitionsRoutingMode),
        "properties": properties or None,
        "access_mode": to_msgclient(access_mode, core.ProducerAccessMode),
        "schema": schema.schema_info(),
    }
    # As the official client: encryption takes both a key name ('' is none) and a key
    # reader; with only one of them, messages go in plaintext (docs/pulsar_compat.md).
    if encryption_key and crypto_key_reader is not None:
        options["encryption_keys"] = (encryption_key,)
        options["crypto_key_reader"] = crypto_key_reader
    elif encryption_key or crypto_key_reader is not None:
        log.warning(
            "create_producer: encryption_key=%r and crypto_key_reader=%r: encryption takes "
            "both, messages are sent unencrypted",
            encryption_key,
            crypto_key_reader,
        )
    if initial_sequence_id:  # as the official client: 0 is "not set"
        options["initial_sequence_id"] = initial_sequence_id
    if message_router is not None:
        options["message_routing_mode"] = core.PartitionsRoutingMode.CustomPartition
        options["message_router"] = _router(message_router)
    return options, schema


def consumer_options(
    consumer_type: ConsumerType = ConsumerType.Exclusive,
    schema: PayloadSchema | None = None,
    receiver_queue_size: int = 1000,
    max_total_receiver_queue_size_across_partitions: int = 50000,
    consumer_name: str | None = None,
    unacked_messages_timeout_ms: int | None = None,
    broker_consumer_stats_cache_time_ms: int = 30000,
    negative_ack_redelivery_delay_ms: int = 60000,
    is_read_compacted: bool = False,
    properties: dict[str, str] | None = None,
    pattern_auto_discovery_period: int = 60,
    initial_position: InitialPosition = InitialPosition.Latest,
    crypto_key_reader: CryptoKeyReader | None = None,
    replicate_subscription_state_enabled: bool = False,
    max_pending_chunked_message: int = 10,
    auto_ack_oldest_chunked_message_on_queue_full: bool = False,
    start_message_id_inclusive: bool = False,
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
    key_shared_policy: ConsumerKeySharedPolicy | None = None,
    batch_index_ack_enabled: bool = False,
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
    crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
) -> tuple[dict[str, Any], PayloadSchema]:
    """msgclient's consumer options for the official ``subscribe`` arguments (but the
    topic, the subscription and the listener)."""
    check_type(ConsumerType, consumer_type, "consumer_type")
    check_type(int, receiver_queue_size, "receiver_queue_size")
    check_type(
        int,
        max_total_receiver_queue_size_across_partitions,
        "max_total_receiver_queue_size_across_partitions",
    )
    check_type_or_none(str, consumer_name, "consumer_name")
    check_type_or_none(int, unacked_messages_timeout_ms, "unacked_messages_timeout_ms")
    check_type(int, broker_consumer_stats_cache_time_ms, "broker_consumer_stats_cache_time_ms")
    check_type(int, negative_ack_redelivery_delay_ms, "negative_ack_redelivery_delay_ms")
    check_type(int, pattern_auto_discovery_period, "pattern_auto_discovery_period")
    check_type(bool, is_read_compacted, "is_read_compacted")
    check_type_or_none(dict, properties, "properties")
    check_type(InitialPosition, initial_position, "initial_position")
    check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
    check_type(int, max_pending_chunked_message, "max_pending_chunked_message")
    check_type(
        bool,
        auto_ack_oldest_chunked_message_on_queue_full,
        "auto_ack_oldest_chunked_message_on_queue_full",
    )
    check_type(bool, start_message_id_inclusive, "start_message_id_inclusive")
    check_type_or_none(ConsumerBatchReceivePolicy, batch_receive_policy, "batch_receive_policy")
    check_type_or_none(ConsumerKeySharedPolicy, key_shared_policy, "key_shared_policy")
    check_type(bool, batch_index_ack_enabled, "batch_index_ack_enabled")
    check_type(RegexSubscriptionMode, regex_subscription_mode, "regex_subscription_mode")
    check_type_or_none(ConsumerDeadLetterPolicy, dead_letter_policy, "dead_letter_policy")
    check_type(ConsumerCryptoFailureAction, crypto_failure_action, "crypto_failure_action")
    schema = payload_schema(schema)
    options: dict[str, Any] = {
        "consumer_type": to_msgclient(consumer_type, core.ConsumerType),
        "receiver_queue_size": receiver_queue_size,
        "max_total_receiver_queue_size_across_partitions": (
            max_total_receiver_queue_size_across_partitions
        ),
        "consumer_name": consumer_name or None,
        "negative_ack_redelivery_delay_ms": negative_ack_redelivery_delay_ms,
        "properties": properties or None,
        "initial_position": to_msgclient(initial_position, core.InitialPosition),
        "replicate_subscription_state_enabled": replicate_subscription_state_enabled,
        "start_message_id_inclusive": start_message_id_inclusive,
        "batch_index_ack_enabled": batch_index_ack_enabled,
        "pattern_auto_discovery_period": pattern_auto_discovery_period,
        "regex_subscription_mode": to_msgclient(
            regex_subscription_mode, core.RegexSubscriptionMode
        ),
        "max_pending_chunked_message": max_pending_chunked_message,
        "auto_ack_oldest_chunked_message_on_queue_full": (
            auto_ack_oldest_chunked_message_on_queue_full
        ),
        **decryption_options(crypto_key_reader, crypto_failure_action),
        "schema": schema.schema_info(),
    }
    if unacked_messages_timeout_ms:
        options["unacked_messages_timeout_ms"] = unacked_messages_timeout_ms
    if batch_receive_policy is not None:
        options["batch_receive_policy"] = batch_receive_policy.policy().to_msgclient()
    if dead_letter_policy is not None:
        options["dead_letter_policy"] = dead_letter_policy.policy().to_msgclient()
    # As the official client: a policy on another subscription type is ignored.
    if key_shared_policy is not None and consumer_type is ConsumerType.KeyShared:
        options["key_shared_policy"] = key_shared_policy.policy().to_msgclient()
    return options, schema


def payload_schema(schema: PayloadSchema | None) -> PayloadSchema:
    """The ``schema`` argument, checked as the official client checks it (a
    ``pulsar_compat.schema`` one; an official ``pulsar.schema`` object is refused); None
    means BytesSchema()."""
    check_type_or_none(Schema, schema, "schema")
    return BytesSchema() if schema is None else schema


def decryption_options(
    crypto_key_reader: CryptoKeyReader | None, crypto_failure_action: ConsumerCryptoFailureAction
) -> dict[str, Any]:
    """msgclient's options for a consumer's or a reader's decryption arguments."""
    return {
        "crypto_key_reader": crypto_key_reader,
        "crypto_failure_action": to_msgclient(
            crypto_failure_action, core.ConsumerCryptoFailureAction
        ),
    }


def _router(router: MessageRouter) -> core.MessageRouter:
    def route(message: OutgoingMessage, partitions: int) -> int:
        return int(router(RoutedMessage(message), partitions))

    return route
