"""PulsarBackend: the Pulsar adapter, registered for ``pulsar://`` and ``pulsar+ssl://``."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re

from msgclient._version import __version__
from msgclient.auth import Authentication
from msgclient.contract import (
    ConsumerEvents,
    ConsumerTransport,
    ProducerEvents,
    ProducerTransport,
    ProtocolBackend,
)
from msgclient.core.network.connection import open_connection
from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.core.network.tls import client_ssl_context
from msgclient.errors import (
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    InvalidConfigurationError,
    InvalidServiceUrlError,
    MsgClientError,
)
from msgclient.options import (
    ClientOptions,
    ConsumerOptions,
    ProducerOptions,
    RegexSubscriptionMode,
)
from msgclient.url import ServiceUrl, parse_service_url
from protocols.pulsarwire import topic as topics
from protocols.pulsarwire.admin import PulsarAdmin
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.consumer import PulsarConsumerTransport
from protocols.pulsarwire.context import PulsarContext
from protocols.pulsarwire.framing import encode_command
from protocols.pulsarwire.lookup import PulsarLookupService
from protocols.pulsarwire.producer import PulsarProducerTransport
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.topic_pattern import LOOKUP_MODES, TopicPattern

PLAIN_SCHEME, TLS_SCHEME = "pulsar", "pulsar+ssl"
DEFAULT_PORTS = {PLAIN_SCHEME: 6650, TLS_SCHEME: 6651}
PROTOCOL_VERSION = 21
CLIENT_VERSION = f"msgclient-{__version__}"


class PulsarBackend(ProtocolBackend[None]):
    def __init__(self, url: ServiceUrl, options: ClientOptions) -> None:
        self._use_service(url, options)
        self.pool: ConnectionPool[PulsarConnection] = ConnectionPool(
            self._connect, options.connections_per_broker
        )
        self.lookup = PulsarLookupService(
            self.pool,
            self._addresses(url),
            self._use_tls,
            options.max_lookup_redirects,
            options.listener_name,
        )
        # Ids only need to be unique per connection, but some brokers (pulsar-lite) key
        # consumers by id per subscription: clients that all start at 0 would collide on a
        # shared subscription. A random start per client keeps them apart.
        first_id = random.randrange(2**31)
        self._producer_ids = itertools.count(first_id)
        self._consumer_ids = itertools.count(first_id)
        self.context = PulsarContext(
            self.pool, self.lookup, self._producer_ids.__next__, self._consumer_ids.__next__
        )

    def _use_service(self, url: ServiceUrl, options: ClientOptions) -> None:
        """Check ``url`` and ``options`` (authentication, TLS trust), then adopt them: a
        bad one raises and leaves the service in use unchanged."""
        if not self.serves(url):
            raise InvalidServiceUrlError(
                f"{url.raw!r}: the Pulsar adapter serves pulsar:// and pulsar+ssl://"
            )
        use_tls = url.scheme == TLS_SCHEME
        auth = options.authentication
        certificate = auth.client_certificate if auth is not None else None
        if certificate is not None and not use_tls:
            raise InvalidConfigurationError(
                f"option authentication={auth!r} needs a pulsar+ssl:// service "
                "URL: its certificate goes in the TLS handshake"
            )
        ssl_context = client_ssl_context(options, certificate) if use_tls else None
        if auth is not None:
            auth.start(options)
        self.default_port = DEFAULT_PORTS[url.scheme]
        self._options = options
        self._use_tls = use_tls
        self._authentication = auth
        self._ssl_context = ssl_context

    def _addresses(self, url: ServiceUrl) -> list[str]:
        return [
            f"{url.scheme}://{host}:{port}"
            for host, port in url.with_default_port(DEFAULT_PORTS[url.scheme])
        ]

    # -- cluster failover (msgclient.contract.SwitchableBackend) -------------

    def serves(self, url: ServiceUrl) -> bool:
        return url.scheme in DEFAULT_PORTS

    def switch_service(self, url: ServiceUrl, options: ClientOptions) -> None:
        """Use another cluster: later lookups go to ``url``, with ``options``'
        authentication and TLS trust; every connection is dropped, so every producer and
        consumer reconnects through a lookup there."""
        self._use_service(url, options)
        self.lookup.switch_service(self._addresses(url), self._use_tls)
        self.pool.drop_all(f"the client switched to the cluster at {url.raw}")

    async def probe(self, url: ServiceUrl, timeout: float) -> bool:
        """Whether a host of ``url`` accepts a TCP connection within ``timeout`` (the
        Java client's AutoClusterFailover probe)."""
        for host, port in url.with_default_port(DEFAULT_PORTS[url.scheme]):
            try:
                async with asyncio.timeout(timeout):
                    _, writer = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError):
                continue
            writer.close()
            with contextlib.suppress(OSError):  # a reset as it closes: it did answer
                await writer.wait_closed()
            return True
        return False

    # -- ProtocolBackend ----------------------------------------------------------------

    def normalize_topic(self, topic: str) -> str:
        return topics.normalize_topic(topic)

    async def partition_count(self, topic: str) -> int:
        return await self.lookup.get_partition_count(topic)

    def partition_name(self, topic: str, partition: int) -> str:
        return topics.partition_name(topic, partition)

    async def list_topics(self, pattern: re.Pattern[str], mode: RegexSubscriptionMode) -> list[str]:
        # GET_TOPICS_OF_NAMESPACE in the mode's domains, matched here too: a broker may
        # ignore the pattern (its answer says whether it filtered).
        topic_pattern = TopicPattern(pattern)
        listed = await self.lookup.topics_of_namespace(
            topic_pattern.namespace, LOOKUP_MODES[mode], topic_pattern.broker_pattern
        )
        return topic_pattern.matching(listed.topics, mode)

    def subscription_context(
        self, topics: list[str], subscription: str, options: ConsumerOptions
    ) -> None:
        return None  # Pulsar's partition consumers share nothing: the broker keeps the state

    def producer_transport(
        self, topic: str, partition: int, options: ProducerOptions, events: ProducerEvents
    ) -> ProducerTransport:
        return PulsarProducerTransport(self.context, topic, partition, options, events)

    def consumer_transport(
        self,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        events: ConsumerEvents,
        context: None,
    ) -> ConsumerTransport:
        return PulsarConsumerTransport(
            self.context, topic, partition, subscription, options, events
        )

    def connection_counts(self) -> tuple[int, int]:
        return self.pool.open_count, self.pool.opened

    def admin_transport(self) -> PulsarAdmin:
        return PulsarAdmin(self.context)

    async def close(self) -> None:
        await self.pool.close()

    # -- connections --------------------------------------------------------------------

    async def _connect(self, logical: str, physical: str) -> PulsarConnection:
        """Open a socket to ``physical`` and run the CONNECT/CONNECTED handshake."""
        url = parse_service_url(physical)
        ((host, port),) = url.with_default_port(self.default_port)
        options = self._options
        auth = self._authentication
        # Credentials first: a token fetched from an issuer holds no socket open meanwhile.
        auth_data = await self._auth_data(auth) if auth is not None else b""
        connection = await open_connection(
            self._new_connection,
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
        if auth is not None:
            connect.auth_method_name = auth.method_name
            connect.auth_data = auth_data
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
                await connection.connected
        except TimeoutError as error:
            connection.close()
            raise ConnectError(
                f"no CONNECTED from {physical} within the operation timeout"
            ) from error
        except ConnectionClosedError as error:
            connection.close()
            if self._use_tls:
                # A TLS 1.3 server that requires a client certificate refuses one (or its
                # absence) after the TLS handshake, by closing: still a failure to connect.
                raise ConnectError(
                    f"cannot connect to {physical}: the server closed the connection during "
                    "the handshake (does it require a client certificate?)"
                ) from error
            raise
        except BaseException:
            connection.close()
            raise
        return connection

    def _new_connection(
        self, *, address: str, operation_timeout: float, keepalive_interval: float
    ) -> PulsarConnection:
        responder = self._auth_response if self._authentication is not None else None
        return PulsarConnection(
            address=address,
            operation_timeout=operation_timeout,
            keepalive_interval=keepalive_interval,
            auth_responder=responder,
        )

    async def _auth_response(self) -> bytes:
        """AUTH_RESPONSE to the broker's AUTH_CHALLENGE: the current credentials, refreshed
        if due (the Java client answers a "refresh" challenge with fresh ones)."""
        auth = self._authentication
        assert auth is not None
        response = pb.CommandAuthResponse(
            client_version=CLIENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            response=pb.AuthData(
                auth_method_name=auth.method_name, auth_data=await self._auth_data(auth)
            ),
        )
        return encode_command(
            pb.BaseCommand(type=pb.BaseCommand.AUTH_RESPONSE, authResponse=response)
        )

    @staticmethod
    async def _auth_data(auth: Authentication) -> bytes:
        try:
            return await auth.auth_data()
        except MsgClientError:
            raise
        except Exception as error:  # a custom provider's failure: typed, its text unshown
            raise AuthenticationError(f"{auth!r} failed: {type(error).__name__}") from error
