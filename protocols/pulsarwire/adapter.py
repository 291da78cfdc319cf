"""PulsarBackend: the Pulsar adapter, registered for ``pulsar://`` and ``pulsar+ssl://``."""

from __future__ import annotations

import asyncio
import itertools
import random

from msgclient import __version__
from msgclient.adapter import (
    ConsumerEvents,
    ConsumerTransport,
    ProducerEvents,
    ProducerTransport,
    ProtocolBackend,
)
from msgclient.core.connection import open_connection
from msgclient.core.connection_pool import ConnectionPool
from msgclient.core.tls import client_ssl_context
from msgclient.errors import ConnectError, InvalidServiceUrlError
from msgclient.options import ClientOptions, ConsumerOptions, ProducerOptions
from msgclient.url import ServiceUrl, parse_service_url
from protocols.pulsarwire import topic as topics
from protocols.pulsarwire.consumer import PulsarConsumerTransport
from protocols.pulsarwire.framing import encode_command
from protocols.pulsarwire.lookup import PulsarLookupService
from protocols.pulsarwire.producer import PulsarProducerTransport
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.session import PulsarConnection, PulsarSession

PLAIN_SCHEME, TLS_SCHEME = "pulsar", "pulsar+ssl"
DEFAULT_PORTS = {PLAIN_SCHEME: 6650, TLS_SCHEME: 6651}
PROTOCOL_VERSION = 21
CLIENT_VERSION = f"msgclient-{__version__}"


class PulsarBackend(ProtocolBackend):
    def __init__(self, url: ServiceUrl, options: ClientOptions) -> None:
        if url.scheme not in DEFAULT_PORTS:
            raise InvalidServiceUrlError(
                f"{url.raw!r}: the Pulsar adapter serves pulsar:// and pulsar+ssl://"
            )
        self.default_port = DEFAULT_PORTS[url.scheme]
        self._options = options
        self._use_tls = url.scheme == TLS_SCHEME
        self._ssl_context = client_ssl_context(options) if self._use_tls else None
        addresses = [
            f"{url.scheme}://{host}:{port}"
            for host, port in url.with_default_port(self.default_port)
        ]
        self.pool: ConnectionPool[PulsarSession] = ConnectionPool(
            self._connect, options.connections_per_broker
        )
        self.lookup = PulsarLookupService(
            self.pool, addresses, self._use_tls, options.max_lookup_redirects
        )
        # Ids only need to be unique per connection, but some brokers (pulsar-lite) key
        # consumers by id per subscription: clients that all start at 0 would collide on a
        # shared subscription. A random start per client keeps them apart.
        first_id = random.randrange(2**31)
        self._producer_ids = itertools.count(first_id)
        self._consumer_ids = itertools.count(first_id)

    def new_producer_id(self) -> int:
        return next(self._producer_ids)

    def new_consumer_id(self) -> int:
        return next(self._consumer_ids)

    # -- ProtocolBackend ----------------------------------------------------------------

    def normalize_topic(self, topic: str) -> str:
        return topics.normalize_topic(topic)

    async def partition_count(self, topic: str) -> int:
        return await self.lookup.get_partition_count(topic)

    def partition_name(self, topic: str, partition: int) -> str:
        return topics.partition_name(topic, partition)

    def producer_transport(
        self, topic: str, partition: int, options: ProducerOptions, events: ProducerEvents
    ) -> ProducerTransport:
        return PulsarProducerTransport(self, topic, partition, options, events)

    def consumer_transport(
        self,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        events: ConsumerEvents,
        context: object | None,
    ) -> ConsumerTransport:
        return PulsarConsumerTransport(self, topic, partition, subscription, options, events)

    async def close(self) -> None:
        await self.pool.close()

    # -- connections --------------------------------------------------------------------

    async def _connect(self, logical: str, physical: str) -> PulsarConnection:
        """Open a socket to ``physical`` and run the CONNECT/CONNECTED handshake."""
        url = parse_service_url(physical)
        ((host, port),) = url.with_default_port(self.default_port)
        options = self._options
        connection = await open_connection(
            PulsarSession,
            host,
            port,
            ssl_context=self._ssl_context,
            server_hostname=host,
            connect_timeout=options.connection_timeout_ms / 1000,
            operation_timeout=options.operation_timeout_seconds,
            keepalive_interval=options.keep_alive_interval_seconds,
        )
        connect = pb.CommandConnect(
            client_version=CLIENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            feature_flags=pb.FeatureFlags(supports_auth_refresh=True),
        )
        if logical != physical:  # through a proxy: name the broker we want
            # As host:port, like the Java and C++ clients: the proxy parses it so.
            ((broker_host, broker_port),) = parse_service_url(logical).with_default_port(
                self.default_port
            )
            connect.proxy_to_broker_url = f"{broker_host}:{broker_port}"
        connection.write(
            encode_command(pb.BaseCommand(type=pb.BaseCommand.CONNECT, connect=connect))
        )
        try:
            async with asyncio.timeout(options.operation_timeout_seconds):
                await connection.session.connected
        except TimeoutError as error:
            connection.close()
            raise ConnectError(
                f"no CONNECTED from {physical} within the operation timeout"
            ) from error
        except BaseException:
            connection.close()
            raise
        return connection
