"""Kafka TLS (kafka+ssl://) and SASL (PLAIN, SCRAM-SHA-256/512) against a scripted broker.

No real broker here can show these (tansu's listener is plaintext and cannot authenticate
with memory storage), so the scripted server of ``server.py`` plays the broker: the Kafka
wire format throughout, SASL run server side as Kafka's SaslServerAuthenticator does, TLS
with certificates made per run by the helpers of the Pulsar TLS tests.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import ssl
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateResponse

import msgclient
from msgclient import AuthenticationError, ConnectError, InvalidConfigurationError
from protocols.kafkawire.message_id import KafkaMessageId
from tests.kafka.scripted.server import (
    API_VERSIONS,
    WAIT,
    Received,
    SaslState,
    ScriptedKafkaServer,
    ServerConnection,
)

pytest.importorskip("cryptography", reason="the TLS tests make their certificates with it")

from tests.pulsar.scripted.test_tls import Authority, make_authority, make_server_context

TOPIC = "secured"
USER = "alice-Us3r-XYZ"
PASSWORD = "s3cr3t-Pa55-QWE"
WRONG_PASSWORD = "wr0ng-Pa55-RTY"
SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
ALL_MECHANISMS = ["PLAIN", *SCRAM]

# Fast failures: every scripted exchange takes milliseconds.
FAST_CLIENT: dict[str, Any] = {
    "operation_timeout_seconds": 2.0,
    "connection_timeout_ms": 2000,
    "initial_backoff_interval_ms": 10,
    "max_backoff_interval_ms": 100,
}

MakeServer = Callable[..., Awaitable[ScriptedKafkaServer]]
MakeClient = Callable[..., msgclient.Client]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    """``await make_server(ssl_context=None, **ScriptedKafkaServer options)``; stopped after."""
    servers: list[ScriptedKafkaServer] = []

    async def make(ssl_context: ssl.SSLContext | None = None, **options: Any) -> Any:
        server = await ScriptedKafkaServer(ssl_context, **options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.stop()
    assert [e for server in servers for e in server.errors] == []


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """``make_client(url, **options)``: a Client with fast timeouts; closed at teardown."""
    clients: list[msgclient.Client] = []

    def make(url: str, **options: Any) -> msgclient.Client:
        client = msgclient.Client(url, **{**FAST_CLIENT, **options})
        clients.append(client)
        return client

    yield make
    async with asyncio.timeout(5):
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("kafka-pki"), "kafka-test-ca")


@pytest.fixture
def server_tls(authority: Authority, tmp_path: Path) -> ssl.SSLContext:
    """The broker's TLS context: a certificate for 127.0.0.1 signed by ``authority``."""
    return make_server_context(tmp_path, authority, "127.0.0.1")


def sasl_options(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"sasl_mechanism": mechanism, "sasl_username": USER, "sasl_password": password}


async def produce(client: msgclient.Client, *values: bytes, **options: Any) -> list[Any]:
    """Create a producer on TOPIC and send ``values`` one by one; their message ids."""
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False, **options)
        ids = [await producer.send(value) for value in values]
        await producer.close()
    return ids


def assert_authenticated_first(server: ScriptedKafkaServer, connection: int = 0) -> None:
    """ApiVersions, then the handshake, then SaslAuthenticate until done, then the rest."""
    names = server.names(connection)
    assert names[:2] == ["ApiVersions", "SaslHandshake"], names
    rounds = 0
    while 2 + rounds < len(names) and names[2 + rounds] == "SaslAuthenticate":
        rounds += 1
    assert rounds >= 1, names
    requests = [r for r in server.received if r.connection.index == connection]
    assert all(r.state is SaslState.AUTHENTICATE for r in requests[2 : 2 + rounds])
    rest = requests[2 + rounds :]
    assert rest, "nothing was sent after authenticating"
    assert all(r.state is SaslState.AUTHENTICATED and not r.refused for r in rest), names


# -- SASL: success ---------------------------------------------------------------------------


async def test_plain_sends_the_exact_credentials_then_produces(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(mechanisms=["PLAIN"], users={USER: PASSWORD})
    client = make_client(server.url, **sasl_options("PLAIN"))
    (message_id,) = await produce(client, b"over plain")

    assert server.sasl_tokens() == [f"\0{USER}\0{PASSWORD}".encode()]
    (handshake,) = server.requests(ApiKey.SaslHandshake)
    assert handshake.request.mechanism == "PLAIN" and handshake.version == 1
    assert [r.version for r in server.requests(ApiKey.SaslAuthenticate)] == [2]
    assert server.names(0) == [
        "ApiVersions",
        "SaslHandshake",
        "SaslAuthenticate",
        "Metadata",
        "InitProducerId",
        "Produce",
    ]
    assert_authenticated_first(server)
    assert server.connections[0].principal == USER
    assert server.values(TOPIC) == [b"over plain"]
    assert message_id == KafkaMessageId(TOPIC, 0, 0)


@pytest.mark.parametrize("mechanism", SCRAM)
async def test_scram_full_exchange_then_produces(
    make_server: MakeServer, make_client: MakeClient, mechanism: str
) -> None:
    server = await make_server(mechanisms=[mechanism], users={USER: PASSWORD})
    client = make_client(server.url, **sasl_options(mechanism))
    ids = await produce(client, b"first", b"second")

    client_first, client_final = server.sasl_tokens()
    assert client_first.startswith(f"n,,n={USER},r=".encode())
    assert client_final.startswith(b"c=biws,r=") and b",p=" in client_final
    assert PASSWORD.encode() not in client_first + client_final  # SCRAM never sends it
    assert server.names(0)[:4] == [
        "ApiVersions",
        "SaslHandshake",
        "SaslAuthenticate",
        "SaslAuthenticate",
    ]
    assert_authenticated_first(server)
    assert server.connections[0].principal == USER
    assert server.values(TOPIC) == [b"first", b"second"]
    assert ids == [KafkaMessageId(TOPIC, 0, 0), KafkaMessageId(TOPIC, 0, 1)]


async def test_every_new_connection_authenticates(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    # The broker advertises itself as "localhost": the producer opens a second connection
    # (to the partition leader), which must run the whole handshake again.
    server = await make_server(
        mechanisms=["SCRAM-SHA-512"], users={USER: PASSWORD}, advertised_host="localhost"
    )
    client = make_client(server.url, **sasl_options("SCRAM-SHA-512"))
    await produce(client, b"via the leader")

    assert len(server.connections) == 2
    assert server.names(0) == [
        "ApiVersions",
        "SaslHandshake",
        "SaslAuthenticate",
        "SaslAuthenticate",
        "Metadata",
    ]
    assert_authenticated_first(server, connection=1)
    assert server.names(1)[-2:] == ["InitProducerId", "Produce"]
    assert server.values(TOPIC) == [b"via the leader"]


async def test_a_server_offering_several_mechanisms_runs_the_one_asked_for(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(
        mechanisms=["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"], users={USER: PASSWORD}
    )
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256"))
    await produce(client, b"x")
    (handshake,) = server.requests(ApiKey.SaslHandshake)
    assert handshake.request.mechanism == "SCRAM-SHA-256"
    assert len(server.sasl_tokens()) == 2


async def test_concurrent_producers_share_one_authenticated_connection(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(
        mechanisms=["SCRAM-SHA-256"], users={USER: PASSWORD}, topics={"a": 1, "b": 2}
    )
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256"))
    async with asyncio.timeout(WAIT):
        first, second = await asyncio.gather(
            client.create_producer("a", batching_enabled=False),
            client.create_producer("b", batching_enabled=False),
        )
        await asyncio.gather(first.send(b"to a"), second.send(b"to b"))
    assert len(server.connections) == 1
    assert len(server.requests(ApiKey.SaslHandshake)) == 1
    assert_authenticated_first(server)
    assert all(r.client_id == "msgclient" for r in server.received)


async def test_an_older_broker_negotiates_api_versions_at_v0_then_authenticates(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(
        mechanisms=["PLAIN"],
        users={USER: PASSWORD},
        api_versions={**API_VERSIONS, ApiKey.ApiVersions: (0, 2), ApiKey.Metadata: (0, 9)},
    )
    client = make_client(server.url, **sasl_options("PLAIN"))
    await produce(client, b"old broker")
    assert [r.version for r in server.requests(ApiKey.ApiVersions)] == [3, 0]
    assert [r.version for r in server.requests(ApiKey.Metadata)] == [9]
    assert server.values(TOPIC) == [b"old broker"]


# -- SASL: failures ----------------------------------------------------------------------------


def assert_no_credentials(text: str) -> None:
    assert PASSWORD not in text and WRONG_PASSWORD not in text, text
    assert USER not in text, text


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
async def test_a_wrong_password_fails_at_once_with_authentication_error(
    make_server: MakeServer,
    make_client: MakeClient,
    mechanism: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = await make_server(mechanisms=[mechanism], users={USER: PASSWORD})
    # A long operation timeout: failing fast shows that nothing retries until it ends.
    client = make_client(
        server.url, operation_timeout_seconds=10.0, **sasl_options(mechanism, WRONG_PASSWORD)
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(AuthenticationError) as caught:
        async with asyncio.timeout(5):
            await client.create_producer(TOPIC)
    elapsed = loop.time() - started

    # The server's delay (100 ms, as Kafka's) and the PBKDF2 rounds: well under a second
    # (3 s: a loaded machine's margin), not the 10 s operation timeout of a retry loop.
    assert elapsed < 3.0, f"took {elapsed:.2f} s"
    text = str(caught.value)
    assert "SASL_AUTHENTICATION_FAILED" in text or "Authentication failed" in text, text
    assert mechanism in text and "127.0.0.1" in text
    assert_no_credentials(text)
    assert_no_credentials("".join(traceback.format_exception(caught.value)))
    # One connection, one attempt; nothing after the failed SaslAuthenticate.
    assert len(server.connections) == 1
    assert server.names(0)[-1] == "SaslAuthenticate"
    assert server.connections[0].principal is None
    assert not server.requests(ApiKey.Metadata)
    # No log record of the failure shows the credentials, even at DEBUG.
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    for record in caplog.records:
        assert_no_credentials(formatter.format(record))


async def test_a_reconnect_refused_after_a_password_change_fails_the_pending_sends(
    make_server: MakeServer, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker drops the connection and no longer accepts the password: the reconnect
    fails for good (no retry loop) and logs it, without the credentials."""
    caplog.set_level(logging.DEBUG)
    server = await make_server(mechanisms=["SCRAM-SHA-256"], users={USER: PASSWORD})
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256"))
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"before")
    server.set_users({USER: WRONG_PASSWORD})
    for connection in server.connections:
        connection.abort()
    pending = await producer.send_async(b"after")
    with pytest.raises(AuthenticationError) as caught:
        async with asyncio.timeout(WAIT):
            await pending
    assert_no_credentials(str(caught.value))
    assert server.values(TOPIC) == [b"before"]
    handshakes = server.requests(ApiKey.SaslHandshake)
    assert len(handshakes) == 2, "the reconnect should have tried once and given up"
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    logged = [formatter.format(r) for r in caplog.records if r.name.startswith("msgclient")]
    assert any("Authentication failed" in text for text in logged), logged
    for text in logged:
        assert_no_credentials(text)


async def test_a_scram_server_that_does_not_know_the_password_is_refused(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    """An impostor (or a man in the middle) accepts any proof and forges the server-final
    message: the client must not trust the connection, nor send anything over it."""
    server = await make_server(mechanisms=["SCRAM-SHA-512"], users={USER: PASSWORD})

    def impostor(conn: ServerConnection, received: Received) -> None:
        if (received.sasl_bytes or b"").startswith(b"n,,"):  # client-first: as the broker
            server.answer_sasl_authenticate(conn, received)
            return
        conn.state = SaslState.AUTHENTICATED
        forged = b"v=" + base64.b64encode(secrets.token_bytes(64))
        conn.answer(
            received,
            SaslAuthenticateResponse(
                error_code=0, error_message=None, auth_bytes=forged, session_lifetime_ms=0
            ),
        )

    server.handlers[ApiKey.SaslAuthenticate] = impostor
    client = make_client(server.url, **sasl_options("SCRAM-SHA-512"))
    with pytest.raises(AuthenticationError, match="server signature does not verify"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    handshake = ["ApiVersions", "SaslHandshake", "SaslAuthenticate", "SaslAuthenticate"]
    assert server.names(0) == handshake  # nothing after the forged answer
    assert len(server.connections) == 1


async def test_a_broker_without_sasl_authenticate_fails_cleanly(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    """A pre-1.0 broker (SaslHandshake v0, then raw tokens): a clear error, not a hang."""
    versions = {k: v for k, v in API_VERSIONS.items() if k != ApiKey.SaslAuthenticate}
    server = await make_server(
        mechanisms=["PLAIN"],
        users={USER: PASSWORD},
        api_versions={**versions, ApiKey.SaslHandshake: (0, 0)},
    )
    client = make_client(server.url, **sasl_options("PLAIN"))
    with pytest.raises(msgclient.MsgClientError, match="SaslAuthenticate"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert server.sasl_tokens() == []


async def test_an_unknown_user_fails_like_a_wrong_password(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(mechanisms=["SCRAM-SHA-256"], users={"bob": PASSWORD})
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256"))
    with pytest.raises(AuthenticationError, match="Invalid user credentials"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert len(server.sasl_tokens()) == 1  # refused at the client's first message


async def test_a_mechanism_the_server_does_not_offer_names_what_it_offers(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(mechanisms=["SCRAM-SHA-512", "PLAIN"], users={USER: PASSWORD})
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256"))
    with pytest.raises(AuthenticationError) as caught:
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    text = str(caught.value)
    assert "SCRAM-SHA-256" in text and "SCRAM-SHA-512, PLAIN" in text, text
    assert_no_credentials(text)
    assert server.names(0) == ["ApiVersions", "SaslHandshake"]
    assert server.sasl_tokens() == []


async def test_sasl_against_a_listener_without_sasl_fails_cleanly(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server()  # plaintext, no SASL: the handshake gets ILLEGAL_SASL_STATE
    client = make_client(server.url, **sasl_options("PLAIN"))
    with pytest.raises(AuthenticationError, match="none"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert server.sasl_tokens() == []


async def test_a_client_without_sasl_is_refused_by_a_sasl_listener(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(mechanisms=["PLAIN"], users={USER: PASSWORD})
    client = make_client(server.url)
    with pytest.raises((ConnectError, msgclient.ConnectionClosedError)):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    # The broker closed the connection at the first request out of SASL order.
    metadata = server.requests(ApiKey.Metadata)
    assert metadata and all(r.refused and r.state is SaslState.HANDSHAKE for r in metadata)
    assert server.logs == {}


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "scram-sha-256", ""])
def test_an_unknown_mechanism_is_a_configuration_error_at_client(mechanism: str) -> None:
    with pytest.raises(InvalidConfigurationError, match="mechanism") as caught:
        msgclient.Client("kafka://127.0.0.1:1", **sasl_options(mechanism))
    assert_no_credentials(str(caught.value))


def test_a_mechanism_without_credentials_is_a_configuration_error() -> None:
    with pytest.raises(InvalidConfigurationError, match="sasl_username and sasl_password"):
        msgclient.Client("kafka://127.0.0.1:1", sasl_mechanism="PLAIN", sasl_username=USER)


@pytest.mark.parametrize(
    ("mechanism", "username", "password"),
    [
        ("PLAIN", USER, ""),
        ("PLAIN", "", PASSWORD),
        ("SCRAM-SHA-256", "", PASSWORD),
        ("SCRAM-SHA-512", "al\0ice", PASSWORD),
    ],
    ids=["plain-empty-password", "plain-empty-username", "scram-empty-username", "nul"],
)
def test_unusable_credentials_are_a_configuration_error_at_client(
    mechanism: str, username: str, password: str
) -> None:
    with pytest.raises(InvalidConfigurationError) as caught:
        msgclient.Client(
            "kafka://127.0.0.1:1",
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
        )
    assert_no_credentials(str(caught.value))


async def test_scram_with_an_empty_password_authenticates(
    make_server: MakeServer, make_client: MakeClient
) -> None:
    server = await make_server(mechanisms=["SCRAM-SHA-256"], users={USER: ""})
    client = make_client(server.url, **sasl_options("SCRAM-SHA-256", password=""))
    await produce(client, b"empty password")
    assert server.values(TOPIC) == [b"empty password"]


@pytest.mark.parametrize("option", ["sasl_password", "sasl_username"])
def test_a_credential_of_the_wrong_type_is_not_echoed(option: str) -> None:
    options = {**sasl_options("PLAIN"), option: PASSWORD.encode()}  # bytes, not str
    with pytest.raises(InvalidConfigurationError, match=option) as caught:
        msgclient.Client("kafka://127.0.0.1:1", **options)
    assert PASSWORD not in str(caught.value)


async def test_credentials_are_not_in_the_reprs(make_client: MakeClient) -> None:
    client = make_client("kafka+ssl://127.0.0.1:1", **sasl_options("SCRAM-SHA-512"))
    for text in (repr(client), repr(client.options), str(client.options)):
        assert_no_credentials(text)
    assert "SCRAM-SHA-512" in repr(client.options)


# -- TLS ----------------------------------------------------------------------------------------


async def test_tls_with_the_trusted_ca_produces(
    make_server: MakeServer,
    make_client: MakeClient,
    server_tls: ssl.SSLContext,
    authority: Authority,
) -> None:
    server = await make_server(server_tls)
    assert server.url.startswith("kafka+ssl://")
    client = make_client(server.url, tls_trust_certs_file_path=str(authority.cert_path))
    await produce(client, b"over tls")
    assert server.values(TOPIC) == [b"over tls"]
    assert server.names(0) == ["ApiVersions", "Metadata", "InitProducerId", "Produce"]


async def test_tls_validates_the_hostname_when_asked(
    make_server: MakeServer,
    make_client: MakeClient,
    server_tls: ssl.SSLContext,
    authority: Authority,
) -> None:
    server = await make_server(server_tls)
    client = make_client(
        server.url,
        tls_trust_certs_file_path=str(authority.cert_path),
        tls_validate_hostname=True,
    )
    await produce(client, b"checked")
    assert server.values(TOPIC) == [b"checked"]


async def test_tls_hostname_mismatch_is_refused_only_when_validating(
    make_server: MakeServer, make_client: MakeClient, authority: Authority, tmp_path: Path
) -> None:
    context = make_server_context(tmp_path, authority, "broker.example.com")
    server = await make_server(context)
    trusted = str(authority.cert_path)
    client = make_client(server.url, tls_trust_certs_file_path=trusted, tls_validate_hostname=True)
    with pytest.raises(ConnectError, match="certificate"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert server.received == []
    # Without hostname validation (the default) the trusted CA suffices.
    await produce(make_client(server.url, tls_trust_certs_file_path=trusted), b"by CA only")
    assert server.values(TOPIC) == [b"by CA only"]


async def test_tls_without_the_ca_fails_to_connect(
    make_server: MakeServer, make_client: MakeClient, server_tls: ssl.SSLContext
) -> None:
    server = await make_server(server_tls)
    client = make_client(server.url)  # the system's CAs do not know the test CA
    with pytest.raises(ConnectError, match=r"(?i)certificate verify failed") as caught:
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert f"127.0.0.1:{server.port}" in str(caught.value)
    assert server.received == []  # nothing crossed an untrusted connection


async def test_tls_insecure_connection_needs_no_ca(
    make_server: MakeServer, make_client: MakeClient, server_tls: ssl.SSLContext
) -> None:
    server = await make_server(server_tls)
    client = make_client(server.url, tls_allow_insecure_connection=True)
    await produce(client, b"insecure")
    assert server.values(TOPIC) == [b"insecure"]


async def test_plaintext_client_against_a_tls_listener_fails_cleanly(
    make_server: MakeServer, make_client: MakeClient, server_tls: ssl.SSLContext
) -> None:
    server = await make_server(server_tls)
    client = make_client(server.url.replace("kafka+ssl://", "kafka://"))
    with pytest.raises((ConnectError, msgclient.ConnectionClosedError)):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert server.received == []


@pytest.mark.parametrize("mechanism", SCRAM)
async def test_tls_and_scram_together(
    make_server: MakeServer,
    make_client: MakeClient,
    server_tls: ssl.SSLContext,
    authority: Authority,
    mechanism: str,
) -> None:
    server = await make_server(
        server_tls, mechanisms=[mechanism], users={USER: PASSWORD}, topics={TOPIC: 3}
    )
    client = make_client(
        server.url, tls_trust_certs_file_path=str(authority.cert_path), **sasl_options(mechanism)
    )
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        ids = [await producer.send(b"m%d" % i, partition_key=f"k{i % 3}") for i in range(9)]
    assert_authenticated_first(server)
    assert len(server.sasl_tokens()) == 2
    # Per-partition offsets: each partition's messages are numbered from 0 in send order.
    stored = {p: server.values(TOPIC, p) for p in range(3)}
    assert sum(len(v) for v in stored.values()) == 9
    for i, message_id in enumerate(ids):
        assert isinstance(message_id, KafkaMessageId)
        assert stored[message_id.partition][message_id.offset] == b"m%d" % i


async def test_tls_and_scram_wrong_password(
    make_server: MakeServer,
    make_client: MakeClient,
    server_tls: ssl.SSLContext,
    authority: Authority,
) -> None:
    server = await make_server(server_tls, mechanisms=["SCRAM-SHA-512"], users={USER: PASSWORD})
    client = make_client(
        server.url,
        tls_trust_certs_file_path=str(authority.cert_path),
        **sasl_options("SCRAM-SHA-512", WRONG_PASSWORD),
    )
    with pytest.raises(AuthenticationError, match="invalid credentials"):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert not server.requests(ApiKey.Metadata)


# -- the scripted server itself ------------------------------------------------------------------


async def test_the_server_closes_a_connection_that_skips_authentication(
    make_server: MakeServer,
) -> None:
    """A raw client: Metadata before SaslHandshake is answered by a closed socket, as Kafka
    does; the recorded request says so."""
    from kafka.protocol.metadata import MetadataRequest

    server = await make_server(mechanisms=["PLAIN"], users={USER: PASSWORD})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        request.with_header(correlation_id=7, client_id="raw")
        writer.write(bytes(request.encode(version=12, header=True, framed=True)))
        async with asyncio.timeout(WAIT):
            assert await reader.read() == b""  # end of stream, no answer
    finally:
        writer.close()
    (refused,) = server.requests(ApiKey.Metadata)
    assert refused.refused and refused.version == 12 and refused.correlation_id == 7
    assert refused.client_id == "raw"


def test_pulsar_authentication_is_refused_on_kafka() -> None:
    with pytest.raises(InvalidConfigurationError, match="Kafka authenticates with SASL"):
        msgclient.Client("kafka://127.0.0.1:1", authentication=msgclient.AuthenticationToken("t"))
