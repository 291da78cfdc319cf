"""Authentication against the scripted server: tokens, mutual TLS, OAuth2 (with a local
HTTP issuer), the broker's AUTH_CHALLENGE, and secrets kept out of reprs and logs."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from msgclient import (
    AuthenticationError,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
    Client,
    ConnectError,
    InvalidConfigurationError,
)
from tests.pulsar.scripted.conftest import NO_RETRY, MakeClient, MakeServer
from tests.pulsar.scripted.server import WAIT, ScriptedPulsarServer, Type

pytest.importorskip("cryptography", reason="the mTLS tests make their certificates with it")

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.pulsar.scripted.test_tls import Authority, make_authority, make_server_context

TOPIC = "persistent://public/default/auth"
FAST = 1.0  # seconds: an authentication failure must surface well within this


async def produce(client: Client, payload: bytes = b"hello") -> None:
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(payload)


def connect_tokens(server: ScriptedPulsarServer) -> list[bytes]:
    return [r.command.connect.auth_data for r in server.commands(Type.CONNECT)]


async def reconnect(server: ScriptedPulsarServer) -> None:
    """Drop the client's connection; wait for its producer to connect again."""
    count = len(server.commands(Type.CONNECT))
    server.connections[-1].abort()
    await server.wait_for(Type.PRODUCER, count + 1)


# -- tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argument", ["tok-1", "token:tok-1"])
async def test_token_string_goes_in_connect(
    server: ScriptedPulsarServer, make_client: MakeClient, argument: str
) -> None:
    server.authenticate = lambda method, data: (method, data) == ("token", b"tok-1")
    await produce(make_client(server.url, authentication=AuthenticationToken(argument)))
    (connect,) = server.commands(Type.CONNECT)
    assert connect.command.connect.auth_method_name == "token"
    assert connect.command.connect.auth_data == b"tok-1"
    assert len(server.commands(Type.SEND)) == 1


@pytest.mark.parametrize("is_async", [False, True])
async def test_token_callable_is_called_for_each_connection(
    server: ScriptedPulsarServer, make_client: MakeClient, is_async: bool
) -> None:
    calls = 0

    def fresh() -> str:
        nonlocal calls
        calls += 1
        return f"tok-{calls}"

    async def fresh_async() -> str:
        return fresh()

    auth = AuthenticationToken(fresh_async if is_async else fresh)
    client = make_client(server.url, authentication=auth)
    await produce(client)
    await reconnect(server)
    assert connect_tokens(server) == [b"tok-1", b"tok-2"]


async def test_token_file_is_read_for_each_connection(
    server: ScriptedPulsarServer, make_client: MakeClient, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("tok-from-file\n")  # the trailing newline is not part of the token
    auth = AuthenticationToken(f"file://{path}")
    assert repr(auth) == f"AuthenticationToken(file={str(path)!r})"
    await produce(make_client(server.url, authentication=auth))
    path.write_text("tok-rotated")
    await reconnect(server)
    assert connect_tokens(server) == [b"tok-from-file", b"tok-rotated"]


async def test_missing_token_file_fails_naming_the_file(
    server: ScriptedPulsarServer, make_client: MakeClient, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    client = make_client(server.url, authentication=AuthenticationToken(f"file:{missing}"))
    with pytest.raises(AuthenticationError, match="token file") as caught:
        async with asyncio.timeout(FAST):
            await client.create_producer(TOPIC)
    assert str(missing) in str(caught.value)
    assert server.commands(Type.CONNECT) == []  # credentials come before the socket


async def test_wrong_token_fails_at_once_without_retrying(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.authenticate = lambda method, data: data == b"right"
    # Default backoff (no NO_RETRY): an authentication error must not be retried.
    client = make_client(server.url, authentication=AuthenticationToken("wrong"))
    with pytest.raises(AuthenticationError, match="Unable to authenticate"):
        async with asyncio.timeout(FAST):
            await client.create_producer(TOPIC)
    assert connect_tokens(server) == [b"wrong"]


async def test_failing_token_supplier_is_an_authentication_error(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    def broken() -> str:
        raise RuntimeError("vault unreachable")

    client = make_client(server.url, authentication=AuthenticationToken(broken))
    with pytest.raises(AuthenticationError, match="RuntimeError: vault unreachable") as caught:
        async with asyncio.timeout(FAST):
            await client.create_producer(TOPIC)
    assert isinstance(caught.value.__cause__, RuntimeError)  # chained, for debugging


# -- AUTH_CHALLENGE -------------------------------------------------------------------------


async def test_refresh_challenge_is_answered_with_fresh_credentials(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    tokens = iter(["tok-1", "tok-2"])
    server.authenticate = lambda method, data: method == "token"
    client = make_client(server.url, authentication=AuthenticationToken(lambda: next(tokens)))
    await produce(client)
    server.connections[-1].challenge(b"refresh")
    (answer,) = await server.wait_for(Type.AUTH_RESPONSE)
    response = answer.command.authResponse
    assert response.response.auth_method_name == "token"
    assert response.response.auth_data == b"tok-2"
    assert response.client_version.startswith("msgclient-")
    assert response.protocol_version == 21
    await produce(client, b"still connected")
    assert len(server.connections) == 1


async def test_challenge_before_connected_is_answered(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.authenticate = lambda method, data: data == b"tok"
    server.challenge_on_connect = True
    await produce(make_client(server.url, authentication=AuthenticationToken("tok")))
    (answer,) = server.commands(Type.AUTH_RESPONSE)
    assert answer.command.authResponse.response.auth_data == b"tok"


async def test_challenge_without_authentication_fails_the_handshake(
    server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    server.challenge_on_connect = True
    with pytest.raises(AuthenticationError, match="option authentication"):
        async with asyncio.timeout(FAST):
            await make_client(server.url).create_producer(TOPIC)


async def test_challenge_whose_answer_fails_is_logged_without_the_secret(
    server: ScriptedPulsarServer, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0
    failed = asyncio.Event()

    def first_only() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            return "tok-1"
        failed.set()
        raise LookupError("vault unreachable")

    client = make_client(server.url, authentication=AuthenticationToken(first_only))
    await produce(client)
    caplog.set_level(logging.WARNING, logger="protocols.pulsarwire.connection")
    server.connections[-1].challenge()
    async with asyncio.timeout(WAIT):
        await failed.wait()  # the warning is logged in the same loop step as the failure
    (record,) = caplog.records
    assert "cannot answer the authentication challenge" in record.getMessage()
    # The supplier's own words are kept (the official client keeps them too); no token.
    assert "the token supplier raised LookupError: vault unreachable" in record.getMessage()
    assert "tok-1" not in record.getMessage()
    assert server.commands(Type.AUTH_RESPONSE) == []


# -- mutual TLS -----------------------------------------------------------------------------


def make_client_cert(directory: Path, authority: Authority, name: str) -> tuple[str, str]:
    """A client certificate for ``name`` signed by ``authority``: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(authority.key, hashes.SHA256())
    )
    cert_path = directory / f"{name}-cert.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = directory / f"{name}-key.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("auth-pki"), "auth-ca")


@pytest.fixture
async def mtls_server(make_server: MakeServer, ca: Authority, tmp_path: Path) -> Any:
    context = make_server_context(tmp_path, ca, "127.0.0.1")
    context.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no connection
    context.load_verify_locations(ca.cert_path)
    return await make_server(ssl_context=context)


async def test_mtls_with_a_client_certificate_produces(
    mtls_server: ScriptedPulsarServer, make_client: MakeClient, ca: Authority, tmp_path: Path
) -> None:
    certificate, key = make_client_cert(tmp_path, ca, "app-1")
    auth = AuthenticationTLS(certificate, key)
    client = make_client(
        mtls_server.url, authentication=auth, tls_trust_certs_file_path=str(ca.cert_path)
    )
    await produce(client)
    (connect,) = mtls_server.commands(Type.CONNECT)
    assert connect.command.connect.auth_method_name == "tls"
    assert connect.command.connect.auth_data == b""
    peer = connect.connection.writer.get_extra_info("peercert")
    assert tuple(peer["subject"]) == ((("commonName", "app-1"),),)


async def test_mtls_without_a_client_certificate_fails_to_connect(
    mtls_server: ScriptedPulsarServer, make_client: MakeClient, ca: Authority
) -> None:
    client = make_client(mtls_server.url, tls_trust_certs_file_path=str(ca.cert_path), **NO_RETRY)
    with pytest.raises(ConnectError, match=mtls_server.host_port):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)
    assert mtls_server.commands(Type.CONNECT) == []


def test_tls_authentication_needs_a_tls_url(make_client: MakeClient) -> None:
    auth = AuthenticationTLS("/cert.pem", "/key.pem")
    with pytest.raises(InvalidConfigurationError, match=r"pulsar\+ssl://"):
        make_client("pulsar://127.0.0.1:1", authentication=auth)


def test_tls_authentication_with_a_missing_key_is_a_configuration_error(
    make_client: MakeClient, ca: Authority, tmp_path: Path
) -> None:
    certificate, _ = make_client_cert(tmp_path, ca, "app-2")
    auth = AuthenticationTLS(certificate, str(tmp_path / "missing-key.pem"))
    with pytest.raises(InvalidConfigurationError, match="AuthenticationTLS"):
        make_client("pulsar+ssl://127.0.0.1:1", authentication=auth)


# -- OAuth2 ---------------------------------------------------------------------------------

CLIENT_ID = "app-client"
CLIENT_SECRET = "client-secret-do-not-log"


class Issuer:
    """A local OAuth2 issuer: the discovery document and a client_credentials endpoint
    that checks the form and issues ``oauth-<n>`` tokens with ``expires_in``."""

    def __init__(self) -> None:
        self.expires_in: float = 3600
        self.token_status = 200  # another status: the endpoint fails (an OAuth2 error body)
        self.chunked = False  # answer the token with Transfer-Encoding: chunked
        self.discoveries = 0
        self.forms: list[dict[str, str]] = []
        self.issued: list[str] = []
        self._server: asyncio.Server | None = None
        self._scheme = "http"

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> Issuer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_context)
        self._scheme = "https" if ssl_context else "http"
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"{self._scheme}://127.0.0.1:{port}/tenant/"

    def params(self, **extra: str) -> str:
        return json.dumps({"issuer_url": self.url, **extra})

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        request_line, *lines = head.strip().split("\r\n")
        method, target, _ = request_line.split(" ")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        status, document = self._route(method, target, headers, body)
        payload = json.dumps(document).encode()
        if self.chunked and "access_token" in document:
            framing = "Transfer-Encoding: chunked"
            half = len(payload) // 2
            payload = b"".join(
                b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:half], payload[half:])
            )
            payload += b"0\r\n\r\n"
        else:
            framing = f"Content-Length: {len(payload)}"
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{framing}\r\n"
            "Connection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
        writer.close()

    def _route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        if (method, target) == ("GET", "/tenant/.well-known/openid-configuration"):
            self.discoveries += 1
            return 200, {"issuer": self.url, "token_endpoint": self.url + "oauth/token"}
        if (method, target) != ("POST", "/tenant/oauth/token"):
            return 404, {"error": "not_found"}
        assert headers["content-type"] == "application/x-www-form-urlencoded"
        form = {k: v[0] for k, v in parse_qs(body.decode(), strict_parsing=True).items()}
        self.forms.append(form)
        if self.token_status != 200:
            return self.token_status, {"error": "server_error", "error_description": "down"}
        if (form.get("client_id"), form.get("client_secret")) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {"error": "invalid_client"}
        self.issued.append(f"oauth-{len(self.issued) + 1}")
        return 200, {
            "access_token": self.issued[-1],
            "token_type": "Bearer",
            "expires_in": self.expires_in,
        }


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    issuer = await Issuer().start()
    yield issuer
    await issuer.stop()


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}))
    return str(path)


def accept_issued(issuer: Issuer) -> Callable[[str, bytes], bool]:
    return lambda method, data: method == "token" and data.decode() in issuer.issued


async def test_oauth2_token_goes_in_connect(
    server: ScriptedPulsarServer, make_client: MakeClient, issuer: Issuer, key_file: str
) -> None:
    server.authenticate = accept_issued(issuer)
    auth = AuthenticationOauth2(
        issuer.params(private_key=key_file, audience="urn:pulsar", scope="produce consume")
    )
    await produce(make_client(server.url, authentication=auth))
    assert connect_tokens(server) == [b"oauth-1"]
    assert issuer.forms == [
        {
            "grant_type": "client_credentials",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "audience": "urn:pulsar",
            "scope": "produce consume",
        }
    ]
    assert issuer.discoveries == 1


@pytest.mark.parametrize("form", ["file-url", "data-url", "java-names"])
async def test_oauth2_accepts_the_official_parameter_forms(
    server: ScriptedPulsarServer,
    make_client: MakeClient,
    issuer: Issuer,
    key_file: str,
    form: str,
) -> None:
    issuer.chunked = True  # and reads a chunked answer
    credentials = json.dumps({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})
    data_url = "data:application/json;base64," + base64.b64encode(credentials.encode()).decode()
    params = {
        "file-url": issuer.params(private_key=f"file://{key_file}"),
        "data-url": issuer.params(private_key=data_url),
        "java-names": json.dumps({"issuerUrl": issuer.url, "privateKey": key_file}),
    }[form]
    await produce(make_client(server.url, authentication=AuthenticationOauth2(params)))
    assert connect_tokens(server) == [b"oauth-1"]
    assert "audience" not in issuer.forms[0]  # only when given, as the Java client


async def test_oauth2_token_is_cached_then_refreshed_before_it_expires(
    server: ScriptedPulsarServer, make_client: MakeClient, issuer: Issuer, key_file: str
) -> None:
    issuer.expires_in = 60  # refreshed after 90% of it: at 54 s
    server.authenticate = accept_issued(issuer)
    auth = AuthenticationOauth2(issuer.params(private_key=key_file))
    now = [1000.0]
    auth._clock = lambda: now[0]  # the token's age on a clock the test moves
    client = make_client(server.url, authentication=auth)
    await produce(client)
    now[0] += 53.9
    server.connections[-1].challenge()  # still fresh: the cached token
    await server.wait_for(Type.AUTH_RESPONSE)
    assert issuer.issued == ["oauth-1"]

    now[0] += 0.2  # 54.1 s: 90% of its life is over, it is fetched again
    server.connections[-1].challenge()
    responses = await server.wait_for(Type.AUTH_RESPONSE, 2)
    assert [r.command.authResponse.response.auth_data for r in responses] == [
        b"oauth-1",
        b"oauth-2",
    ]
    now[0] += 60
    await reconnect(server)  # a new connection, after that one expired too
    assert connect_tokens(server) == [b"oauth-1", b"oauth-3"]
    assert issuer.discoveries == 1


async def test_oauth2_connections_opening_together_share_one_fetch(
    make_server: MakeServer, make_client: MakeClient, issuer: Issuer, key_file: str
) -> None:
    servers = [await make_server(name=f"broker-{i}") for i in range(3)]
    auth = AuthenticationOauth2(issuer.params(private_key=key_file))
    clients = [make_client(server.url, authentication=auth) for server in servers]
    await asyncio.gather(*(produce(client) for client in clients))
    assert issuer.issued == ["oauth-1"]
    assert [connect_tokens(server) for server in servers] == [[b"oauth-1"]] * 3


async def test_oauth2_https_issuer_is_checked_against_the_client_trust(
    server: ScriptedPulsarServer, make_client: MakeClient, ca: Authority, tmp_path: Path
) -> None:
    key_file = tmp_path / "credentials.json"
    key_file.write_text(json.dumps({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}))
    issuer = await Issuer().start(make_server_context(tmp_path, ca, "127.0.0.1"))
    try:
        assert issuer.url.startswith("https://")
        auth = AuthenticationOauth2(issuer.params(private_key=str(key_file)))
        trusting = make_client(
            server.url, authentication=auth, tls_trust_certs_file_path=str(ca.cert_path)
        )
        await produce(trusting)
        assert connect_tokens(server) == [b"oauth-1"]

        untrusting = AuthenticationOauth2(issuer.params(private_key=str(key_file)))
        with pytest.raises(AuthenticationError, match="certificate verify failed"):
            async with asyncio.timeout(FAST):
                await make_client(server.url, authentication=untrusting).create_producer(TOPIC)
    finally:
        await issuer.stop()


async def test_oauth2_failing_token_endpoint_names_the_issuer(
    server: ScriptedPulsarServer, make_client: MakeClient, issuer: Issuer, key_file: str
) -> None:
    issuer.token_status = 500
    auth = AuthenticationOauth2(issuer.params(private_key=key_file))
    with pytest.raises(AuthenticationError) as caught:
        async with asyncio.timeout(FAST):
            await make_client(server.url, authentication=auth).create_producer(TOPIC)
    message = str(caught.value)
    assert issuer.url in message
    assert "HTTP 500" in message and "server_error (down)" in message
    assert CLIENT_SECRET not in message
    assert server.commands(Type.CONNECT) == []


async def test_oauth2_wrong_secret_reports_invalid_client(
    server: ScriptedPulsarServer, make_client: MakeClient, issuer: Issuer, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"client_id": CLIENT_ID, "client_secret": "not-it"}))
    auth = AuthenticationOauth2(issuer.params(private_key=str(wrong)))
    with pytest.raises(AuthenticationError, match="HTTP 401: invalid_client") as caught:
        async with asyncio.timeout(FAST):
            await make_client(server.url, authentication=auth).create_producer(TOPIC)
    assert "not-it" not in str(caught.value)


async def test_oauth2_unreachable_issuer_names_the_issuer(
    server: ScriptedPulsarServer, make_client: MakeClient, issuer: Issuer, key_file: str
) -> None:
    url = issuer.url
    await issuer.stop()
    auth = AuthenticationOauth2(json.dumps({"issuer_url": url, "private_key": key_file}))
    with pytest.raises(AuthenticationError, match=f"OAuth2 issuer {url}"):
        async with asyncio.timeout(FAST):
            await make_client(server.url, authentication=auth).create_producer(TOPIC)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ("not json", "JSON object"),
        (json.dumps({"private_key": "/k.json"}), "issuer_url"),
        (json.dumps({"issuer_url": "ftp://x", "private_key": "/k.json"}), "issuer_url"),
        (json.dumps({"issuer_url": "https://u:secret-x@x", "private_key": "/k"}), "issuer_url"),
        (json.dumps({"issuer_url": "https://x"}), "private_key"),
        (
            json.dumps({"issuer_url": "https://x", "private_key": "data:text/plain,secret-x"}),
            "data: URL",
        ),
        (json.dumps({"issuer_url": "https://x", "private_key": 7}), "'private_key'"),
    ],
)
def test_oauth2_bad_parameters_are_configuration_errors(params: str, expected: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=expected) as caught:
        AuthenticationOauth2(params)
    assert "secret-x" not in str(caught.value)


# -- secrets stay out of reprs and logs -----------------------------------------------------


@pytest.mark.parametrize("value", [123, None, "", "token:", "env:", "file://remote/token"])
def test_token_argument_is_validated(value: Any) -> None:
    with pytest.raises(InvalidConfigurationError, match="AuthenticationToken"):
        AuthenticationToken(value)


def test_authentication_option_must_be_a_provider(make_client: MakeClient) -> None:
    with pytest.raises(InvalidConfigurationError, match="authentication") as caught:
        make_client("pulsar://127.0.0.1:1", authentication="raw-secret-token")
    assert "raw-secret-token" not in str(caught.value)


async def test_no_secret_in_reprs_or_debug_logs(
    server: ScriptedPulsarServer,
    make_client: MakeClient,
    issuer: Issuer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    credentials = json.dumps({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})
    data_url = "data:application/json;base64," + base64.b64encode(credentials.encode()).decode()
    oauth2 = AuthenticationOauth2(issuer.params(private_key=data_url))
    token = AuthenticationToken("tok-plain-secret")
    client = make_client(server.url, authentication=oauth2)
    await produce(client)
    server.connections[-1].challenge()
    await server.wait_for(Type.AUTH_RESPONSE)
    await produce(make_client(server.url, authentication=token))

    secrets = [CLIENT_SECRET, data_url, "oauth-1", "tok-plain-secret"]
    shown = [
        repr(oauth2),
        str(oauth2),
        repr(token),
        str(token),
        repr(AuthenticationToken(lambda: "x")),
        repr(client.options),
        str(client.options),
        *(record.getMessage() for record in caplog.records),
    ]
    assert any("OAuth2 token from" in m for m in shown)  # the debug logs were captured
    for secret in secrets:
        assert not [text for text in shown if secret in text], secret
    assert repr(oauth2) == (
        f"AuthenticationOauth2(issuer_url={issuer.url!r}, audience=None, scope=None)"
    )
