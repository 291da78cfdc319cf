"""Client and producer options: attrs classes that validate every value.

Names and defaults follow the official pulsar-client (Python names, Java defaults): a bad
value raises InvalidConfigurationError naming the option and what it accepts.
"""

from __future__ import annotations

import enum
import itertools
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from msgclient.auth import Authentication
from msgclient.crypto_key_reader import CryptoKeyReader
from msgclient.errors import InvalidConfigurationError
from msgclient.message import MessageId
from msgclient.redelivery_backoff import RedeliveryBackoff
from msgclient.schema_info import SchemaInfo
from msgclient.validators import (
    check,
    check_properties,
    int_at_least,
    is_bool,
    member_of,
    non_empty_str,
    number_at_least,
    one_of,
    optional_authentication,
    optional_callable,
    optional_instance,
    optional_secret,
    optional_str,
)

if TYPE_CHECKING:
    from msgclient.message import OutgoingMessage


# Called with (consumer, message) for each message instead of receive(); may return an
# awaitable, awaited before the next message.
MessageListener = Callable[[Any, Any], Any]


class CompressionType(enum.Enum):
    """Values of ``CompressionType`` in PulsarApi.proto (``MessageMetadata.compression``),
    and GZIP, which only Kafka has (as Kafka has no ZLIB)."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4
    GZIP = 5


class PartitionsRoutingMode(enum.Enum):
    """Where a message without a key goes on a partitioned topic."""

    RoundRobinDistribution = 0
    UseSinglePartition = 1
    CustomPartition = 2


class HashingScheme(enum.Enum):
    """Hash of the partition key. Both are the Java client's, so routing is portable.

    The official C++/Python client's default BoostHash depends on the Boost build and is
    not offered.
    """

    JavaStringHash = 0
    Murmur3_32Hash = 1


class BatchingType(enum.Enum):
    """Default: one batch of any keys; KeyBased: one batch per key (for Key_Shared)."""

    Default = 0
    KeyBased = 1


class ProducerAccessMode(enum.Enum):
    """Who may produce on a topic (PulsarApi.proto's numbers, the official names).

    Shared: any number of producers. Exclusive: fail (ProducerBusyError) if another producer
    is connected. WaitForExclusive: creation waits until the others are gone.
    ExclusiveWithFencing: take the topic, fencing the current producer off (its next
    reconnect fails with ProducerFencedError).
    """

    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class ConsumerCryptoFailureAction(enum.Enum):
    """What a consumer does with a message it cannot decrypt (no crypto_key_reader, no
    key that opens it): the official names and numbers.

    FAIL: not delivered, left unacknowledged (an error is logged). DISCARD: acknowledged
    (as a DecryptionError) and dropped. CONSUME: delivered still encrypted, and a batch as
    one message (see docs/encryption.md).
    """

    FAIL = 0
    DISCARD = 1
    CONSUME = 2


MessageRouter = Callable[["OutgoingMessage", int], int]


def _key_names(value: object) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) and i for i in items):
        raise InvalidConfigurationError(
            f"option encryption_keys={value!r} is invalid: expected a key name (a non-empty "
            "str) or a list of them"
        )
    return tuple(dict.fromkeys(items))  # each name once, in order


def _name_or_random(value: str | None) -> str:
    return secrets.token_hex(5) if value is None else value


def _str_tuple(value: object) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise InvalidConfigurationError(
            f"option partition_assignment_strategy={value!r} is invalid: expected a str or "
            "a list of str"
        )
    return tuple(items)


class RebalanceListener(Protocol):
    """Told of partitions leaving and joining a Kafka consumer (Java's
    ConsumerRebalanceListener). Revoked partitions' acknowledged offsets are committed
    before ``on_partitions_revoked`` runs. Each may be a plain function or a coroutine."""

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> Any: ...

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> Any: ...


def _optional_listener(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check(
        value is None
        or (
            callable(getattr(value, "on_partitions_revoked", None))
            and callable(getattr(value, "on_partitions_assigned", None))
        ),
        attribute.name,
        value,
        "an object with on_partitions_revoked and on_partitions_assigned, or None",
    )


def _telemetry_provider(method: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """An OpenTelemetry provider (an object with ``method``), True (the global one) or
    None (off); checked without importing opentelemetry."""

    def validate(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check(
            value is None or value is True or callable(getattr(value, method, None)),
            attribute.name,
            value,
            f"None, True (the global provider) or an OpenTelemetry provider (with {method})",
        )

    return validate


MIB = 1024 * 1024


@attrs.frozen(kw_only=True)
class ClientOptions:
    """Options of ``Client(url, **options)``."""

    operation_timeout_seconds: float = attrs.field(default=30.0, validator=number_at_least(0.001))
    connection_timeout_ms: int = attrs.field(default=10_000, validator=int_at_least(1))
    keep_alive_interval_seconds: float = attrs.field(default=30.0, validator=number_at_least(0.01))
    connections_per_broker: int = attrs.field(default=1, validator=int_at_least(1))
    memory_limit: int = attrs.field(default=64 * MIB, validator=int_at_least(0))
    max_lookup_redirects: int = attrs.field(default=20, validator=int_at_least(1))
    initial_backoff_interval_ms: int = attrs.field(default=100, validator=int_at_least(1))
    max_backoff_interval_ms: int = attrs.field(default=60_000, validator=int_at_least(1))
    tls_trust_certs_file_path: str | None = attrs.field(default=None, validator=optional_str)
    tls_allow_insecure_connection: bool = attrs.field(default=False, validator=is_bool)
    tls_validate_hostname: bool = attrs.field(default=False, validator=is_bool)
    # OpenTelemetry (the otel extra; docs/metrics.md): metrics from this MeterProvider, a
    # span per send and per receive from this TracerProvider with the trace context in the
    # messages' properties (Kafka headers). True: the global provider. None: off, and
    # opentelemetry is not imported.
    meter_provider: Any = attrs.field(default=None, validator=_telemetry_provider("get_meter"))
    tracer_provider: Any = attrs.field(default=None, validator=_telemetry_provider("get_tracer"))
    # -- Pulsar only (the Kafka adapter uses sasl_* below) --
    # Its repr hides every secret, so it may stay in ClientOptions' repr.
    authentication: Authentication | None = attrs.field(
        default=None, validator=optional_authentication
    )
    # The broker listener to be pointed at (advertisedListeners): each LOOKUP names it, and
    # the broker answers that listener's URL. None: the broker's default listener.
    listener_name: str | None = attrs.field(default=None, validator=optional_str)
    # -- Kafka only (the Pulsar adapter ignores these) --
    client_id: str = attrs.field(default="msgclient", validator=non_empty_str)
    metadata_max_age_ms: int = attrs.field(default=300_000, validator=int_at_least(1))
    # SASL over the connection: "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"
    sasl_mechanism: str | None = attrs.field(default=None, validator=optional_str)
    sasl_username: str | None = attrs.field(default=None, validator=optional_secret, repr=False)
    sasl_password: str | None = attrs.field(default=None, validator=optional_secret, repr=False)

    def __attrs_post_init__(self) -> None:
        check(
            self.sasl_mechanism is None
            or (self.sasl_username is not None and self.sasl_password is not None),
            "sasl_mechanism",
            self.sasl_mechanism,
            "sasl_username and sasl_password set with it",
        )
        check(
            self.max_backoff_interval_ms >= self.initial_backoff_interval_ms,
            "max_backoff_interval_ms",
            self.max_backoff_interval_ms,
            f"a value >= initial_backoff_interval_ms ({self.initial_backoff_interval_ms})",
        )


def _properties(_: Any, attribute: attrs.Attribute[Any], value: Mapping[str, str] | None) -> None:
    check_properties(attribute.name, value)


@attrs.frozen(kw_only=True)
class ProducerOptions:
    """Options of ``client.create_producer(topic, **options)``.

    ``max_pending_messages=0`` means no count limit (the Java default since memory limits
    bound producers); the client's ``memory_limit`` still bounds the bytes held.
    """

    producer_name: str | None = attrs.field(default=None, validator=optional_str)
    initial_sequence_id: int | None = attrs.field(default=None)
    send_timeout_millis: int = attrs.field(default=30_000, validator=int_at_least(0))
    compression_type: CompressionType = attrs.field(
        default=CompressionType.NONE, validator=member_of(CompressionType)
    )
    max_pending_messages: int = attrs.field(default=0, validator=int_at_least(0))
    max_pending_messages_across_partitions: int = attrs.field(
        default=50_000, validator=int_at_least(0)
    )
    block_if_queue_full: bool = attrs.field(default=False, validator=is_bool)
    batching_enabled: bool = attrs.field(default=True, validator=is_bool)
    batching_max_messages: int = attrs.field(default=1000, validator=int_at_least(1))
    batching_max_allowed_size_in_bytes: int = attrs.field(
        default=128 * 1024, validator=int_at_least(1)
    )
    batching_max_publish_delay_ms: float = attrs.field(default=1.0, validator=number_at_least(0))
    batching_type: BatchingType = attrs.field(
        default=BatchingType.Default, validator=member_of(BatchingType)
    )
    message_routing_mode: PartitionsRoutingMode = attrs.field(
        default=PartitionsRoutingMode.RoundRobinDistribution,
        validator=member_of(PartitionsRoutingMode),
    )
    hashing_scheme: HashingScheme = attrs.field(
        default=HashingScheme.JavaStringHash, validator=member_of(HashingScheme)
    )
    message_router: MessageRouter | None = attrs.field(default=None, validator=optional_callable)
    properties: Mapping[str, str] | None = attrs.field(default=None, validator=_properties)
    # Create this subscription with the topic, so that nothing sent is lost before a
    # consumer subscribes (dead-letter producers use it).
    initial_subscription_name: str | None = attrs.field(default=None, validator=optional_str)
    # -- Pulsar only (the Kafka adapter refuses them) --
    access_mode: ProducerAccessMode = attrs.field(
        default=ProducerAccessMode.Shared, validator=member_of(ProducerAccessMode)
    )
    # The payloads' schema, told to the broker in PRODUCER (None: raw bytes, as the
    # official client's BytesSchema). Payloads are encoded above the core (msgclient.schema).
    schema: SchemaInfo | None = attrs.field(default=None, validator=optional_instance(SchemaInfo))
    # End-to-end encryption (docs/encryption.md): each entry's payload is encrypted with a
    # data key wrapped for each of these key names, whose public keys crypto_key_reader gives.
    encryption_keys: tuple[str, ...] = attrs.field(default=(), converter=_key_names)
    crypto_key_reader: CryptoKeyReader | None = attrs.field(
        default=None, validator=optional_instance(CryptoKeyReader)
    )
    # Chunking (docs/producer.md): a message over the broker's max message size (or over
    # chunk_max_message_size when set; 0 = the broker's) goes as several entries that the
    # consumer reassembles. Exclusive with batching, as in the Java client. With
    # encryption_keys each chunk is encrypted on its own, as the official clients do.
    chunking_enabled: bool = attrs.field(default=False, validator=is_bool)
    chunk_max_message_size: int = attrs.field(default=0, validator=int_at_least(0))
    # -- Kafka only (the Pulsar adapter ignores these) --
    # acks: 0 (no answer), 1 (the leader), -1 (all in-sync replicas, Kafka's "all")
    acks: int = attrs.field(default=-1, validator=one_of(0, 1, -1))
    enable_idempotence: bool = attrs.field(default=True, validator=is_bool)
    max_in_flight_requests_per_connection: int = attrs.field(default=5, validator=int_at_least(1))
    max_request_size: int = attrs.field(default=1024 * 1024, validator=int_at_least(1024))
    # Transactions (docs/transactions.md): producers of one client with the same
    # transactional_id share one transaction (one producer id and epoch); such a producer
    # is idempotent with acks=all.
    transactional_id: str | None = attrs.field(default=None, validator=optional_str)
    transaction_timeout_ms: int = attrs.field(default=60_000, validator=int_at_least(1))

    def __attrs_post_init__(self) -> None:
        check(
            not (self.chunking_enabled and self.batching_enabled),
            "chunking_enabled",
            self.chunking_enabled,
            "False while batching_enabled is True (batching and chunking are exclusive: "
            "set batching_enabled=False to chunk)",
        )
        if self.initial_sequence_id is not None:
            check(
                isinstance(self.initial_sequence_id, int)
                and not isinstance(self.initial_sequence_id, bool)
                and self.initial_sequence_id >= -1,
                "initial_sequence_id",
                self.initial_sequence_id,
                "an integer >= -1 or None",
            )
        check(
            (self.message_routing_mode is PartitionsRoutingMode.CustomPartition)
            == (self.message_router is not None),
            "message_router",
            self.message_router,
            "a callable exactly when message_routing_mode is CustomPartition",
        )
        check(
            not self.encryption_keys or self.crypto_key_reader is not None,
            "crypto_key_reader",
            self.crypto_key_reader,
            "a CryptoKeyReader (e.g. FileCryptoKeyReader) when encryption_keys are given",
        )
        if self.transactional_id is not None:
            check(
                self.enable_idempotence,
                "enable_idempotence",
                self.enable_idempotence,
                "True with a transactional_id (a transactional producer is idempotent)",
            )
            check(
                self.acks == -1,
                "acks",
                self.acks,
                "-1 (all) with a transactional_id (a transaction commits only what all "
                "in-sync replicas stored)",
            )


class ConsumerType(enum.Enum):
    """Subscription types, as in Pulsar."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(enum.Enum):
    """Where a new subscription starts."""

    Latest = 0
    Earliest = 1


class SubscriptionMode(enum.Enum):
    """Durable subscriptions keep their position on the broker; NonDurable ones (readers)
    exist only while connected."""

    Durable = 0
    NonDurable = 1


class RegexSubscriptionMode(enum.Enum):
    """Which topics a pattern subscription takes, by domain (Pulsar; Kafka has none)."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class KeySharedMode(enum.Enum):
    """How a Key_Shared subscription splits the key hash range (0..65535) among consumers.

    AutoSplit: the broker splits it among the consumers as they come and go. Sticky: each
    consumer names its own ranges (``KeySharedPolicy.sticky_ranges``).
    """

    AutoSplit = 0
    Sticky = 1


HASH_RANGE_SIZE = 65536  # Key_Shared hashes keys into 0..65535


def _sticky_ranges(value: object) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(
        isinstance(r, list | tuple)
        and len(r) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in r)
        for r in value
    ):
        raise InvalidConfigurationError(
            f"sticky_ranges={value!r} is invalid: expected a list of (start, end) integer pairs"
        )
    return tuple((start, end) for start, end in value)


def _check_sticky_ranges(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    check(bool(value), attribute.name, list(value), "at least one (start, end) range")
    for start, end in value:
        check(
            0 <= start <= end < HASH_RANGE_SIZE,
            attribute.name,
            list(value),
            f"ranges with 0 <= start <= end <= {HASH_RANGE_SIZE - 1} (not ({start}, {end}))",
        )
    ordered = sorted(value)
    for (_, end), (start, _) in itertools.pairwise(ordered):
        check(
            start > end,
            attribute.name,
            list(value),
            f"ranges that do not overlap (both ends are inclusive: {end} and {start} overlap)",
        )


@attrs.frozen
class KeySharedPolicy:
    """How a Key_Shared consumer takes keys: the official client's ConsumerKeySharedPolicy
    (same positional order and checks). ``sticky_ranges`` are inclusive (start, end) hash
    ranges in 0..65535, required with ``KeySharedMode.Sticky``; AutoSplit does not send
    them, as the official client. ``allow_out_of_order_delivery`` lets the broker deliver a
    key to a new consumer before the old one acknowledged its earlier messages."""

    key_shared_mode: KeySharedMode = attrs.field(
        default=KeySharedMode.AutoSplit, validator=member_of(KeySharedMode)
    )
    allow_out_of_order_delivery: bool = attrs.field(default=False, validator=is_bool)
    sticky_ranges: tuple[tuple[int, int], ...] | None = attrs.field(
        default=None, converter=_sticky_ranges, validator=_check_sticky_ranges
    )

    def __attrs_post_init__(self) -> None:
        check(
            self.key_shared_mode is not KeySharedMode.Sticky or self.sticky_ranges is not None,
            "sticky_ranges",
            None,
            "ranges when key_shared_mode is KeySharedMode.Sticky",
        )


def _optional_topic(_: Any, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    check(
        value is None or (isinstance(value, str) and bool(value)), attribute.name, value, "a topic"
    )


@attrs.frozen(kw_only=True)
class DeadLetterPolicy:
    """After ``max_redeliver_count`` redeliveries a message goes to the dead-letter topic
    (default ``<topic>-<subscription>-DLQ``) instead of back to the consumer.
    ``retry_letter_topic`` (default ``<topic>-<subscription>-RETRY``) receives
    ``reconsume_later`` messages."""

    max_redeliver_count: int = attrs.field(validator=int_at_least(1))
    dead_letter_topic: str | None = attrs.field(default=None, validator=_optional_topic)
    retry_letter_topic: str | None = attrs.field(default=None, validator=_optional_topic)
    initial_subscription_name: str | None = attrs.field(default=None, validator=optional_str)


@attrs.frozen(kw_only=True)
class BatchReceivePolicy:
    """``batch_receive`` returns when any limit is reached: messages, bytes or time.
    Defaults are the Java client's (no message limit, 10 MiB, 100 ms)."""

    max_num_messages: int = attrs.field(default=-1, validator=int_at_least(-1))
    max_num_bytes: int = attrs.field(default=10 * MIB, validator=int_at_least(-1))
    timeout_ms: int = attrs.field(default=100, validator=int_at_least(0))

    def __attrs_post_init__(self) -> None:
        check(
            self.max_num_messages > 0 or self.max_num_bytes > 0 or self.timeout_ms > 0,
            "batch_receive_policy",
            self,
            "at least one limit (messages, bytes or timeout) above 0",
        )


def _ack_timeout(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
    check(
        isinstance(value, int) and not isinstance(value, bool) and (value == 0 or value >= 1000),
        attribute.name,
        value,
        "0 (off) or at least 1000 ms",
    )


def _backoff(_: Any, attribute: attrs.Attribute[Any], value: RedeliveryBackoff | None) -> None:
    check(
        value is None or callable(getattr(value, "next", None)),
        attribute.name,
        value,
        "a RedeliveryBackoff (e.g. MultiplierRedeliveryBackoff) or None",
    )


@attrs.frozen(kw_only=True)
class ConsumerOptions:
    """Options of ``client.subscribe(topic, subscription_name, **options)``."""

    consumer_type: ConsumerType = attrs.field(
        default=ConsumerType.Exclusive, validator=member_of(ConsumerType)
    )
    # None: ten random hex characters, as the official client (one name for every partition:
    # Failover orders consumers by name).
    consumer_name: str = attrs.field(
        default=None, converter=_name_or_random, validator=non_empty_str
    )
    receiver_queue_size: int = attrs.field(default=1000, validator=int_at_least(0))
    max_total_receiver_queue_size_across_partitions: int = attrs.field(
        default=50_000, validator=int_at_least(1)
    )
    initial_position: InitialPosition = attrs.field(
        default=InitialPosition.Latest, validator=member_of(InitialPosition)
    )
    subscription_mode: SubscriptionMode = attrs.field(
        default=SubscriptionMode.Durable, validator=member_of(SubscriptionMode)
    )
    priority_level: int = attrs.field(default=0, validator=int_at_least(0))
    unacked_messages_timeout_ms: int = attrs.field(default=0, validator=_ack_timeout)
    tick_duration_ms: int = attrs.field(default=1000, validator=int_at_least(100))
    negative_ack_redelivery_delay_ms: int = attrs.field(default=60_000, validator=int_at_least(0))
    negative_ack_redelivery_backoff: RedeliveryBackoff | None = attrs.field(
        default=None, validator=_backoff
    )
    acknowledgment_group_time_ms: int = attrs.field(default=100, validator=int_at_least(0))
    max_acknowledgment_group_size: int = attrs.field(default=1000, validator=int_at_least(1))
    ack_receipt_enabled: bool = attrs.field(default=False, validator=is_bool)
    batch_index_ack_enabled: bool = attrs.field(default=False, validator=is_bool)
    dead_letter_policy: DeadLetterPolicy | None = attrs.field(
        default=None, validator=optional_instance(DeadLetterPolicy)
    )
    # Also subscribe to the retry topic, where reconsume_later sends messages (Java's
    # enableRetry); needs a dead_letter_policy.
    retry_enable: bool = attrs.field(default=False, validator=is_bool)
    batch_receive_policy: BatchReceivePolicy = attrs.field(
        factory=BatchReceivePolicy, validator=attrs.validators.instance_of(BatchReceivePolicy)
    )
    properties: Mapping[str, str] | None = attrs.field(default=None, validator=_properties)
    replicate_subscription_state_enabled: bool = attrs.field(default=False, validator=is_bool)
    # Readers: where to start, instead of the subscription's position.
    start_message_id: MessageId | None = attrs.field(
        default=None, validator=optional_instance(MessageId)
    )
    start_message_id_inclusive: bool = attrs.field(default=False, validator=is_bool)
    # The payloads' schema, told to the broker in SUBSCRIBE (None: raw bytes).
    schema: SchemaInfo | None = attrs.field(default=None, validator=optional_instance(SchemaInfo))
    # Key_Shared only: AutoSplit (the default) or Sticky hash ranges.
    key_shared_policy: KeySharedPolicy | None = attrs.field(
        default=None, validator=optional_instance(KeySharedPolicy)
    )
    # listener(consumer, message), a function or a coroutine function, called on the event
    # loop for every message instead of receive() (msgclient/core/receive/message_listener.py).
    message_listener: MessageListener | None = attrs.field(
        default=None, validator=optional_callable
    )
    # Pattern subscriptions (subscribe(re.compile(...))): how often, in seconds, the
    # matching topics are listed again (the official client's default, 60 s).
    pattern_auto_discovery_period: float = attrs.field(
        default=60.0, validator=number_at_least(0.01)
    )
    # -- Pulsar only --
    # Pattern subscriptions: persistent topics only (the default), non-persistent or all.
    regex_subscription_mode: RegexSubscriptionMode = attrs.field(
        default=RegexSubscriptionMode.PersistentOnly, validator=member_of(RegexSubscriptionMode)
    )
    # Decrypts end-to-end encrypted messages (docs/encryption.md); what to do with those it
    # cannot decrypt (or all encrypted ones, without a reader).
    crypto_key_reader: CryptoKeyReader | None = attrs.field(
        default=None, validator=optional_instance(CryptoKeyReader)
    )
    crypto_failure_action: ConsumerCryptoFailureAction = attrs.field(
        default=ConsumerCryptoFailureAction.FAIL, validator=member_of(ConsumerCryptoFailureAction)
    )
    # Chunked messages (docs/consumer.md), the Java client's defaults: at most this many
    # incomplete ones kept (0: no bound), the oldest dropped beyond it (its chunks acked
    # if auto_ack_oldest..., else left to be redelivered); one incomplete for longer than
    # expire_time... ms is dropped and its chunks acked (0: never).
    max_pending_chunked_message: int = attrs.field(default=10, validator=int_at_least(0))
    auto_ack_oldest_chunked_message_on_queue_full: bool = attrs.field(
        default=False, validator=is_bool
    )
    expire_time_of_incomplete_chunked_message: int = attrs.field(
        default=60_000, validator=int_at_least(0)
    )
    # -- Kafka only (the Pulsar adapter ignores these) --
    session_timeout_ms: int = attrs.field(default=45_000, validator=int_at_least(1))
    heartbeat_interval_ms: int = attrs.field(default=3_000, validator=int_at_least(1))
    rebalance_timeout_ms: int = attrs.field(default=300_000, validator=int_at_least(1))
    fetch_min_bytes: int = attrs.field(default=1, validator=int_at_least(1))
    fetch_max_bytes: int = attrs.field(default=50 * MIB, validator=int_at_least(1))
    max_partition_fetch_bytes: int = attrs.field(default=MIB, validator=int_at_least(1))
    fetch_max_wait_ms: int = attrs.field(default=500, validator=int_at_least(0))
    # assignors by their Kafka names, preferred first
    partition_assignment_strategy: tuple[str, ...] = attrs.field(
        default=("range", "cooperative-sticky"), converter=_str_tuple
    )
    group_instance_id: str | None = attrs.field(default=None, validator=optional_str)
    # read_committed (librdkafka's default; the Java client's is read_uncommitted): records
    # of open and aborted transactions are never delivered, reads stop at the last stable
    # offset. On topics without transactions both read the same records.
    isolation_level: str = attrs.field(
        default="read_committed", validator=one_of("read_committed", "read_uncommitted")
    )
    rebalance_listener: RebalanceListener | None = attrs.field(
        default=None, validator=_optional_listener
    )

    def __attrs_post_init__(self) -> None:
        check(
            self.key_shared_policy is None or self.consumer_type is ConsumerType.KeyShared,
            "key_shared_policy",
            self.key_shared_policy,
            "None unless consumer_type is ConsumerType.KeyShared",
        )
