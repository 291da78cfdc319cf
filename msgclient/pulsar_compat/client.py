"""Client: the official client's entry point over msgclient's blocking client.

Every keyword of the official ``pulsar.Client`` and its ``create_*`` / ``subscribe``
methods is accepted with the official defaults. Options that mean nothing here (thread
counts of the C++ core, its stats and log-file settings) are accepted and have no effect;
those asking for what msgclient does not do (a reader's decryption, ...) raise
``OperationNotSupported`` rather than silently doing less.
docs/pulsar_compat.md lists each option's status.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from msgclient import blocking
from msgclient import options as core
from msgclient.core.network import cluster_failover as core_failover
from msgclient.message import Message as CoreMessage
from msgclient.pulsar_compat.arguments import check_type, check_type_or_none
from msgclient.pulsar_compat.authentication import Authentication
from msgclient.pulsar_compat.consumer import Consumer
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
)
from msgclient.pulsar_compat.exceptions import InvalidUrl, OperationNotSupported, pulsar_errors
from msgclient.pulsar_compat.failover import (
    AutoClusterFailover,
    ProvidedServices,
    ServiceInfo,
    ServiceInfoProvider,
)
from msgclient.pulsar_compat.loggers import ConsoleLogger, FileLogger, route_logs
from msgclient.pulsar_compat.message import Message, PayloadSchema
from msgclient.pulsar_compat.message_id import MessageId, reader_start
from msgclient.pulsar_compat.policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
)
from msgclient.pulsar_compat.producer import Producer
from msgclient.pulsar_compat.reader import Reader
from msgclient.pulsar_compat.settings import (
    MessageRouter,
    consumer_options,
    decryption_options,
    payload_schema,
    producer_options,
)
from msgclient.pulsar_compat.tableview import TableView

_PULSAR_SCHEMES = ("pulsar://", "pulsar+ssl://")

MessageListener = Callable[[Consumer, Message], None]


class Client:
    """``Client(service_url, authentication=None, operation_timeout_seconds=30, ...)``, as
    the official one; a ``pulsar://`` or ``pulsar+ssl://`` service URL."""

    def __init__(
        self,
        service_url: str | AutoClusterFailover | ServiceInfoProvider,
        authentication: Authentication | None = None,
        operation_timeout_seconds: int = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: logging.Logger | ConsoleLogger | FileLogger | None = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
    ) -> None:
        failover = isinstance(service_url, AutoClusterFailover | ServiceInfoProvider)
        if not failover and not isinstance(service_url, str):
            raise ValueError(
                "Argument service_url is expected to be of type 'str', 'AutoClusterFailover' or "
                "'ServiceInfoProvider'"
            )
        if failover and authentication is not None:
            raise ValueError(
                "Argument authentication is not supported when service_url is an "
                "AutoClusterFailover or ServiceInfoProvider; set authentication on each "
                "ServiceInfo instead"
            )
        if failover and tls_trust_certs_file_path is not None:
            raise ValueError(
                "Argument tls_trust_certs_file_path is not supported when service_url is an "
                "AutoClusterFailover or ServiceInfoProvider; set tls_trust_certs_file_path on "
                "each ServiceInfo instead"
            )
        check_type_or_none(Authentication, authentication, "authentication")
        check_type(int, operation_timeout_seconds, "operation_timeout_seconds")
        check_type(int, connection_timeout_ms, "connection_timeout_ms")
        # No effect (checked as the official client does): the C++ core's threads, lookup
        # throttle, log configuration file and stats; use_tls is decided by the URL there too.
        check_type(int, io_threads, "io_threads")
        check_type(int, message_listener_threads, "message_listener_threads")
        check_type(int, concurrent_lookup_requests, "concurrent_lookup_requests")
        check_type_or_none(str, log_conf_file_path, "log_conf_file_path")
        check_type(int, stats_interval_in_seconds, "stats_interval_in_seconds")
        check_type(bool, use_tls, "use_tls")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        check_type(bool, tls_allow_insecure_connection, "tls_allow_insecure_connection")
        check_type(bool, tls_validate_hostname, "tls_validate_hostname")
        check_type_or_none(str, listener_name, "listener_name")
        check_type_or_none(str, tls_private_key_file_path, "tls_private_key_file_path")
        check_type_or_none(str, tls_certificate_file_path, "tls_certificate_file_path")
        if isinstance(service_url, str) and not service_url.lower().startswith(_PULSAR_SCHEMES):
            raise InvalidUrl(
                f"service_url {service_url!r}: pulsar_compat speaks the Pulsar binary "
                "protocol (pulsar:// or pulsar+ssl://); HTTP lookup URLs are not offered"
            )
        if tls_private_key_file_path is not None or tls_certificate_file_path is not None:
            raise OperationNotSupported(
                "tls_certificate_file_path / tls_private_key_file_path are not offered: pass "
                "authentication=AuthenticationTLS(certificate_path, private_key_path) instead"
            )
        route_logs(logger)
        with pulsar_errors():
            self._client = blocking.Client(
                _core_service(service_url),
                message_listener_threads=message_listener_threads,
                operation_timeout_seconds=operation_timeout_seconds,
                connection_timeout_ms=connection_timeout_ms,
                tls_trust_certs_file_path=tls_trust_certs_file_path,
                tls_allow_insecure_connection=tls_allow_insecure_connection,
                tls_validate_hostname=tls_validate_hostname,
                authentication=None if authentication is None else authentication.auth,
                listener_name=listener_name,
            )

    def get_service_info(self) -> ServiceInfo:
        """The cluster in use (as the official client's, without its authentication)."""
        info = self._client.service_info
        return ServiceInfo(info.service_url, None, info.tls_trust_certs_file_path)

    @property
    def msgclient_client(self) -> blocking.Client:
        """The blocking msgclient client underneath (for msgclient-only features)."""
        return self._client

    def create_producer(
        self,
        topic: str,
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
    ) -> Producer:
        """A producer on ``topic``, with the official defaults (batching off, 10 ms batch
        delay, 1000 pending messages). ``chunking_enabled`` splits a message over the
        broker's limit into chunks (with batching off, as the official client).
        ``lazy_start_partitioned_producers`` is accepted with no effect (every partition's
        producer starts at once)."""
        check_type(str, topic, "topic")
        options, schema = producer_options(
            producer_name=producer_name,
            schema=schema,
            initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis,
            compression_type=compression_type,
            max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            chunking_enabled=chunking_enabled,
            message_routing_mode=message_routing_mode,
            lazy_start_partitioned_producers=lazy_start_partitioned_producers,
            properties=properties,
            batching_type=batching_type,
            encryption_key=encryption_key,
            crypto_key_reader=crypto_key_reader,
            access_mode=access_mode,
            message_router=message_router,
        )
        with pulsar_errors():
            return Producer(self._client.create_producer(topic, **options), schema)

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: PayloadSchema | None = None,
        message_listener: MessageListener | None = None,
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
    ) -> Consumer:
        """Subscribe to a topic, a list of topics, or the topics of one namespace that a
        compiled pattern matches (``re.compile('persistent://public/default/my-.*')``),
        listed again every ``pattern_auto_discovery_period`` seconds in the domains of
        ``regex_subscription_mode``. ``message_listener(consumer, message)`` runs on a
        listener thread for each message (``receive`` is then not allowed).
        ``max_pending_chunked_message`` and ``auto_ack_oldest_chunked_message_on_queue_full``
        bound the chunked messages being reassembled, as the official client. Accepted with
        no effect: ``broker_consumer_stats_cache_time_ms``, ``is_read_compacted`` (the
        whole topic is read)."""
        check_type(str, subscription_name, "subscription_name")
        if not isinstance(topic, str | list | re.Pattern):
            raise ValueError(
                "Argument 'topic' is expected to be of a type between (str, list, re.pattern)"
            )
        options, schema = consumer_options(
            consumer_type=consumer_type,
            schema=schema,
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            broker_consumer_stats_cache_time_ms=broker_consumer_stats_cache_time_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            is_read_compacted=is_read_compacted,
            properties=properties,
            pattern_auto_discovery_period=pattern_auto_discovery_period,
            initial_position=initial_position,
            crypto_key_reader=crypto_key_reader,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack_oldest_chunked_message_on_queue_full,
            start_message_id_inclusive=start_message_id_inclusive,
            batch_receive_policy=batch_receive_policy,
            key_shared_policy=key_shared_policy,
            batch_index_ack_enabled=batch_index_ack_enabled,
            regex_subscription_mode=regex_subscription_mode,
            dead_letter_policy=dead_letter_policy,
            crypto_failure_action=crypto_failure_action,
        )
        if message_listener is not None:
            options["message_listener"] = _listener(message_listener, schema, consumer_type)
        with pulsar_errors():
            consumer = self._client.subscribe(topic, subscription_name, **options)
        return Consumer(consumer, schema, consumer_type)

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: PayloadSchema | None = None,
        reader_listener: Callable[[Reader, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: CryptoKeyReader | None = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
    ) -> Reader:
        """Read ``topic`` from ``start_message_id`` (``MessageId.earliest``,
        ``MessageId.latest`` or a message's id). Accepted with no effect:
        ``subscription_role_prefix``, ``is_read_compacted``."""
        check_type(str, topic, "topic")
        check_type(MessageId, start_message_id, "start_message_id")
        check_type(int, receiver_queue_size, "receiver_queue_size")
        check_type_or_none(str, reader_name, "reader_name")
        check_type_or_none(str, subscription_role_prefix, "subscription_role_prefix")
        check_type(bool, is_read_compacted, "is_read_compacted")
        check_type(bool, start_message_id_inclusive, "start_message_id_inclusive")
        check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
        check_type(ConsumerCryptoFailureAction, crypto_failure_action, "crypto_failure_action")
        reader_schema = payload_schema(schema)
        if reader_listener is not None:
            raise OperationNotSupported(
                "reader_listener is not offered: call read_next() in a thread of yours"
            )
        start = reader_start(start_message_id)
        with pulsar_errors():
            reader = self._client.create_reader(
                topic,
                start,
                reader_name=reader_name,
                receiver_queue_size=receiver_queue_size,
                start_message_id_inclusive=start_message_id_inclusive,
                schema=reader_schema.schema_info(),
                **decryption_options(crypto_key_reader, crypto_failure_action),
            )
        return Reader(reader, reader_schema)

    def create_table_view(
        self,
        topic: str,
        subscription_name: str | None = None,
        schema: PayloadSchema | None = None,
    ) -> TableView:
        """A view of the latest value of every key of ``topic``; returns once it holds
        everything the topic held. ``subscription_name`` names the view's reader."""
        check_type(str, topic, "topic")
        check_type_or_none(str, subscription_name, "subscription_name")
        view_schema = payload_schema(schema)
        with pulsar_errors():
            reader = self._client.create_reader(
                topic,
                core.InitialPosition.Earliest,
                reader_name=subscription_name,
                schema=view_schema.schema_info(),
            )
        return TableView(reader, topic, subscription_name, view_schema)

    def get_topic_partitions(self, topic: str) -> list[str]:
        """The topic's partition names (the topic itself when it is not partitioned)."""
        check_type(str, topic, "topic")
        with pulsar_errors():
            return self._client.get_topic_partitions(topic)

    def shutdown(self) -> None:
        """Close the client. (The official one drops what is in flight; this one flushes
        and closes as ``close`` does, which is never less safe.)"""
        self.close()

    def close(self) -> None:
        """Close every producer, consumer and reader of this client, then the client."""
        with pulsar_errors():
            self._client.close()


def _core_service(
    service_url: str | AutoClusterFailover | ServiceInfoProvider,
) -> str | core_failover.AutoClusterFailover | core_failover.ServiceInfoProvider:
    if isinstance(service_url, AutoClusterFailover):
        return service_url.core()
    if isinstance(service_url, ServiceInfoProvider):
        return ProvidedServices(service_url)
    return service_url


def _listener(
    listener: MessageListener, schema: PayloadSchema, consumer_type: ConsumerType
) -> blocking.MessageListener:
    # As the official client: the listener gets facade objects made for each message.
    def deliver(consumer: blocking.Consumer, message: CoreMessage) -> None:
        listener(Consumer(consumer, schema, consumer_type), Message(message, schema))

    return deliver
