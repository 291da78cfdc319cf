"""KafkaBackend: the Kafka adapter, registered for ``kafka://`` and ``kafka+ssl://``.

``kafka://host:port,host:port`` lists bootstrap servers. Every connection starts with the
ApiVersions handshake (and SASL when configured); the pool shares one connection per broker
among all producers and consumers of the client.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from msgclient._version import __version__
from msgclient.contract import (
    ConsumerEvents,
    ConsumerTransport,
    ProducerEvents,
    ProducerTransport,
    ProtocolBackend,
    Router,
    TransactionTransport,
)
from msgclient.core.network.connection import open_connection
from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.core.network.tls import client_ssl_context
from msgclient.errors import (
    AuthenticationError,
    ConnectError,
    InvalidConfigurationError,
    InvalidServiceUrlError,
    InvalidTopicNameError,
    NotSupportedError,
)
from msgclient.message import MessageId
from msgclient.options import (
    ClientOptions,
    ConsumerOptions,
    ConsumerType,
    ProducerAccessMode,
    ProducerOptions,
    RegexSubscriptionMode,
)
from msgclient.schema_info import SchemaInfo
from msgclient.url import ServiceUrl
from protocols.kafkawire import errors
from protocols.kafkawire.admin import KafkaAdmin
from protocols.kafkawire.api import API_VERSIONS_FIRST, ApiVersionTable
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.consumer import KafkaConsumerTransport, KafkaSubscription
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.metadata import KafkaLookupService, split_partition_name
from protocols.kafkawire.partitioner import make_kafka_router
from protocols.kafkawire.produce_sender import ProduceSenders
from protocols.kafkawire.producer import KafkaProducerTransport
from protocols.kafkawire.sasl import make_mechanism
from protocols.kafkawire.transaction_manager import TransactionManager

PLAIN_SCHEME, TLS_SCHEME = "kafka", "kafka+ssl"
DEFAULT_PORTS = {PLAIN_SCHEME: 9092, TLS_SCHEME: 9093}
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class KafkaBackend(ProtocolBackend[KafkaSubscription]):
    # Kafka's producer defaults where they differ from Pulsar's: linger.ms 5, batch.size
    # 16 KiB, delivery.timeout.ms 120 s.
    producer_defaults: Mapping[str, Any] = {
        "batching_max_publish_delay_ms": 5,
        "batching_max_allowed_size_in_bytes": 16 * 1024,
        "send_timeout_millis": 120_000,
    }
    supports_transactions = True

    def __init__(self, url: ServiceUrl, options: ClientOptions) -> None:
        if url.scheme not in DEFAULT_PORTS:
            raise InvalidServiceUrlError(
                f"{url.raw!r}: the Kafka adapter serves kafka:// and kafka+ssl://"
            )
        self.default_port = DEFAULT_PORTS[url.scheme]
        self.client_id = options.client_id
        self.operation_timeout = options.operation_timeout_seconds
        self._options = options
        self._ssl_context = client_ssl_context(options) if url.scheme == TLS_SCHEME else None
        if options.authentication is not None:
            raise InvalidConfigurationError(
                "option authentication is for Pulsar; Kafka authenticates with SASL "
                "(sasl_mechanism, sasl_username, sasl_password) or TLS"
            )
        if options.listener_name is not None:
            raise InvalidConfigurationError(
                "option listener_name is for Pulsar's advertised listeners; Kafka's "
                "bootstrap servers answer each client with the listener it connected to"
            )
        if options.sasl_mechanism is not None:  # bad names and credentials fail here
            assert options.sasl_username is not None and options.sasl_password is not None
            make_mechanism(options.sasl_mechanism, options.sasl_username, options.sasl_password)
        self.pool: ConnectionPool[KafkaConnection] = ConnectionPool(
            self._connect, options.connections_per_broker
        )
        bootstrap = [f"{host}:{port}" for host, port in url.with_default_port(self.default_port)]
        self.lookup = KafkaLookupService(
            self.pool.get_connection, bootstrap, options.metadata_max_age_ms / 1000
        )
        self.context = KafkaContext(
            self.pool, self.lookup, ProduceSenders(), self.client_id, self.operation_timeout
        )
        self._transactions: dict[str, TransactionManager] = {}
        self._admin: KafkaAdmin | None = None

    # -- ProtocolBackend ----------------------------------------------------------------

    def normalize_topic(self, topic: str) -> str:
        if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
            raise InvalidTopicNameError(
                f"invalid Kafka topic name {topic!r}: 1 to 249 of a-z A-Z 0-9 . _ -"
            )
        return topic

    async def partition_count(self, topic: str) -> int:
        return await self.lookup.get_partition_count(topic)

    def partition_name(self, topic: str, partition: int) -> str:
        return f"{topic}-{partition}"

    def make_router(self, options: ProducerOptions, partitions: int) -> Router:
        return make_kafka_router(partitions, options.batching_max_allowed_size_in_bytes)

    def producer_transport(
        self, topic: str, partition: int, options: ProducerOptions, events: ProducerEvents
    ) -> ProducerTransport:
        # Made in create_producer, before any connection: its refusals come from there.
        if options.access_mode is not ProducerAccessMode.Shared:
            raise NotSupportedError(
                f"option access_mode={options.access_mode.name} is Pulsar only: a Kafka topic "
                "takes any number of producers (Shared, the default, is the only mode on Kafka)"
            )
        _refuse_schema(options.schema)
        if options.encryption_keys or options.crypto_key_reader is not None:
            # Ignoring them would send plaintext the application believes encrypted.
            raise NotSupportedError(
                "options encryption_keys and crypto_key_reader are Pulsar only: msgclient does "
                "not encrypt Kafka records (there is no agreed format for it)"
            )
        if options.chunking_enabled:
            # Kafka's large records go whole, up to max_request_size and the broker's
            # message.max.bytes; Pulsar's chunk metadata has no Kafka counterpart.
            raise NotSupportedError(
                "option chunking_enabled is Pulsar only: msgclient does not chunk Kafka "
                "records; raise max_request_size (and the topic's max.message.bytes) instead"
            )
        base, _ = split_partition_name(topic)
        transactions = None
        if options.transactional_id is not None:
            transactions = self._transactions[options.transactional_id]
        return KafkaProducerTransport(self.context, base, partition, options, events, transactions)

    def transaction_transport(self, transactional_id: str, timeout_ms: int) -> TransactionTransport:
        manager = self._transactions.get(transactional_id)
        if manager is None:
            manager = TransactionManager(self.context, transactional_id, timeout_ms)
            self._transactions[transactional_id] = manager
        elif manager.timeout_ms != timeout_ms:
            raise InvalidConfigurationError(
                f"option transaction_timeout_ms={timeout_ms} differs from the "
                f"{manager.timeout_ms} of this client's other producers with transactional_id "
                f"{transactional_id!r}: they share one transaction, and its timeout"
            )
        return manager

    def partition_of(self, message_id: MessageId) -> int | None:
        if not isinstance(message_id, KafkaMessageId):
            raise InvalidConfigurationError(f"not a Kafka message id: {message_id!r}")
        return message_id.partition

    def check_consumer(self, options: ConsumerOptions) -> None:
        if options.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise NotSupportedError(
                f"{options.consumer_type.name} subscriptions are not supported on Kafka: a "
                "Kafka partition is read by one member of a consumer group at a time, so "
                "messages of one partition cannot be spread over consumers. Use Failover or "
                "Exclusive (a consumer group) and more partitions."
            )
        _refuse_schema(options.schema)
        if options.regex_subscription_mode is not RegexSubscriptionMode.PersistentOnly:
            raise NotSupportedError(
                f"option regex_subscription_mode={options.regex_subscription_mode.name} is "
                "Pulsar only: Kafka topics have no persistent and non-persistent domains"
            )
        if options.crypto_key_reader is not None:
            raise NotSupportedError(
                "option crypto_key_reader is Pulsar only: msgclient does not decrypt Kafka "
                "records (there is no agreed format for it)"
            )

    def consumer_transport(
        self,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        events: ConsumerEvents,
        context: KafkaSubscription,
    ) -> ConsumerTransport:
        base, _ = split_partition_name(topic)
        return KafkaConsumerTransport(context, base, partition, options, events)

    def subscription_context(
        self, topics: list[str], subscription: str, options: ConsumerOptions
    ) -> KafkaSubscription:
        return KafkaSubscription(self.context, topics, subscription, options)

    def update_subscription(self, context: KafkaSubscription, topics: list[str]) -> None:
        context.set_topics(topics)

    async def close_subscription(self, context: KafkaSubscription) -> None:
        await context.release()

    async def list_topics(self, pattern: re.Pattern[str], mode: RegexSubscriptionMode) -> list[str]:
        # Kafka's subscribe(Pattern): every topic of a full Metadata answer, matched here;
        # internal topics (__consumer_offsets...) left out.
        listed = await self.admin_transport().list_topics(None, include_internal=False)
        return [name for name in listed if pattern.fullmatch(name)]

    async def end_prepared_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        # A manager of its own: this client may hold the id's live manager, whose producer
        # id and epoch are the next transaction's.
        manager = TransactionManager(self.context, transactional_id, timeout_ms=0)
        try:
            await manager.end_prepared(producer_id, producer_epoch, commit)
        finally:
            await manager.close()

    def connection_counts(self) -> tuple[int, int]:
        return self.pool.open_count, self.pool.opened

    def admin_transport(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = KafkaAdmin(self.context)
        return self._admin

    async def close(self) -> None:
        for manager in self._transactions.values():
            await manager.close()
        await self.pool.close()

    # -- connections --------------------------------------------------------------------

    async def _connect(self, logical: str, physical: str) -> KafkaConnection:
        """Open a socket to ``physical`` and run ApiVersions (and SASL)."""
        host, _, port = physical.rpartition(":")
        options = self._options
        connection = await open_connection(
            lambda **settings: KafkaConnection(client_id=self.client_id, **settings),
            host,
            int(port),
            ssl_context=self._ssl_context,
            server_hostname=host,
            connect_timeout=options.connection_timeout_ms / 1000,
            operation_timeout=options.operation_timeout_seconds,
            keepalive_interval=options.keep_alive_interval_seconds,
        )
        try:
            async with asyncio.timeout(options.operation_timeout_seconds):
                await self._negotiate_versions(connection)
                if options.sasl_mechanism is not None:
                    await self._authenticate(connection)
        except TimeoutError as error:
            connection.close()
            raise ConnectError(f"no handshake answer from {physical} in time") from error
        except BaseException:
            connection.close()
            raise
        return connection

    async def _negotiate_versions(self, connection: KafkaConnection) -> None:
        session = connection.session
        request = ApiVersionsRequest(
            client_software_name="msgclient", client_software_version=__version__
        )
        answer = await connection.request(request, API_VERSIONS_FIRST)
        if answer.error_code == errors.UNSUPPORTED_VERSION:  # an older broker: ask at v0
            answer = await connection.request(ApiVersionsRequest(), 0)
        if answer.error_code:
            raise errors.kafka_error(answer.error_code, f"ApiVersions from {connection.address}")
        session.versions = ApiVersionTable(
            {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys},
            connection.address,
        )

    async def _authenticate(self, connection: KafkaConnection) -> None:
        options = self._options
        assert options.sasl_mechanism is not None
        assert options.sasl_username is not None and options.sasl_password is not None
        mechanism = make_mechanism(
            options.sasl_mechanism, options.sasl_username, options.sasl_password
        )
        handshake = await connection.request(SaslHandshakeRequest(mechanism=mechanism.name))
        if handshake.error_code:
            raise AuthenticationError(
                f"{connection.address} does not offer SASL {mechanism.name} "
                f"(it offers {', '.join(handshake.mechanisms) or 'none'})"
            )
        message: bytes | None = mechanism.initial_response()
        while message is not None:
            answer = await connection.request(SaslAuthenticateRequest(auth_bytes=message))
            if answer.error_code:
                raise AuthenticationError(
                    f"SASL {mechanism.name} at {connection.address} failed: "
                    f"{answer.error_message or errors.kafka_error(answer.error_code, 'SASL')}"
                )
            message = mechanism.respond(bytes(answer.auth_bytes or b""))


def _refuse_schema(schema: SchemaInfo | None) -> None:
    if schema is not None:
        raise NotSupportedError(
            "option schema is Pulsar only: a Kafka broker keeps no schemas. Encode the "
            "payloads yourself (msgclient.schema's schema.encode(value)) and leave schema unset"
        )
