"""pulsar+ssl:// against the scripted server wrapped in TLS, with certificates made per run."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import attrs
import pytest

from msgclient import ConnectError, ConnectionClosedError, InvalidConfigurationError
from tests.pulsar.scripted.conftest import NO_RETRY, MakeClient, MakeServer
from tests.pulsar.scripted.server import WAIT, ScriptedPulsarServer, Type

pytest.importorskip("cryptography", reason="the TLS tests make their certificates with it")

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

TOPIC = "persistent://public/default/tls"


@attrs.frozen
class Authority:
    """A CA: its certificate file, and what it needs to sign."""

    cert_path: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_authority(directory: Path, name: str) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = _write_pem(directory / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM))
    return Authority(path, cert, key)


def make_server_context(directory: Path, authority: Authority, host: str) -> ssl.SSLContext:
    """A server TLS context with a certificate for ``host`` signed by ``authority``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt_name: x509.GeneralName
    try:
        alt_name = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt_name = x509.DNSName(host)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([alt_name]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
        .sign(authority.key, hashes.SHA256())
    )
    cert_path = _write_pem(
        directory / f"{host}-cert.pem", cert.public_bytes(serialization.Encoding.PEM)
    )
    key_path = _write_pem(
        directory / f"{host}-key.pem",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Authority]:
    directory = tmp_path_factory.mktemp("pki")
    return {
        "trusted": make_authority(directory, "trusted-ca"),
        "other": make_authority(directory, "other-ca"),
    }


@pytest.fixture
async def tls_server(
    make_server: MakeServer, pki: dict[str, Authority], tmp_path: Path
) -> ScriptedPulsarServer:
    context = make_server_context(tmp_path, pki["trusted"], "127.0.0.1")
    return await make_server(ssl_context=context)


async def produce_one(client_url: str, make_client: MakeClient, **options: object) -> None:
    client = make_client(client_url, **options)
    async with asyncio.timeout(WAIT):
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"over tls")


async def test_tls_connects_and_produces_with_the_trusted_ca(
    tls_server: ScriptedPulsarServer, make_client: MakeClient, pki: dict[str, Authority]
) -> None:
    assert tls_server.url.startswith("pulsar+ssl://")
    await produce_one(
        tls_server.url, make_client, tls_trust_certs_file_path=str(pki["trusted"].cert_path)
    )
    assert [r.payload for r in tls_server.commands(Type.SEND)] == [b"over tls"]


async def test_tls_validates_the_hostname_when_asked(
    tls_server: ScriptedPulsarServer, make_client: MakeClient, pki: dict[str, Authority]
) -> None:
    await produce_one(
        tls_server.url,
        make_client,
        tls_trust_certs_file_path=str(pki["trusted"].cert_path),
        tls_validate_hostname=True,
    )
    assert len(tls_server.commands(Type.SEND)) == 1


async def test_tls_hostname_mismatch_is_refused_when_validating(
    make_server: MakeServer, make_client: MakeClient, pki: dict[str, Authority], tmp_path: Path
) -> None:
    context = make_server_context(tmp_path, pki["trusted"], "broker.example.com")
    server = await make_server(ssl_context=context)
    trusted = str(pki["trusted"].cert_path)
    with pytest.raises(ConnectError, match="certificate"):
        await produce_one(
            server.url,
            make_client,
            tls_trust_certs_file_path=trusted,
            tls_validate_hostname=True,
            **NO_RETRY,
        )
    # Without hostname validation (the default, as the official client) the CA suffices.
    await produce_one(server.url, make_client, tls_trust_certs_file_path=trusted)


async def test_tls_with_the_wrong_ca_fails_to_connect(
    tls_server: ScriptedPulsarServer, make_client: MakeClient, pki: dict[str, Authority]
) -> None:
    with pytest.raises(ConnectError, match="certificate") as caught:
        await produce_one(
            tls_server.url,
            make_client,
            tls_trust_certs_file_path=str(pki["other"].cert_path),
            **NO_RETRY,
        )
    assert tls_server.host_port in str(caught.value)
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
    assert tls_server.commands(Type.CONNECT) == []


async def test_tls_insecure_connection_needs_no_ca(
    tls_server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    await produce_one(tls_server.url, make_client, tls_allow_insecure_connection=True)
    assert len(tls_server.commands(Type.SEND)) == 1


async def test_plain_client_against_a_tls_server_fails_cleanly(
    tls_server: ScriptedPulsarServer, make_client: MakeClient
) -> None:
    plain_url = tls_server.url.replace("pulsar+ssl://", "pulsar://")
    client = make_client(plain_url, **NO_RETRY)
    # The server drops the connection at the first (non-TLS) bytes: a typed error, not a hang.
    with pytest.raises((ConnectError, ConnectionClosedError)):
        async with asyncio.timeout(WAIT):
            await client.create_producer(TOPIC)


def test_missing_ca_file_is_a_configuration_error_naming_the_option(
    make_client: MakeClient, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(InvalidConfigurationError, match="tls_trust_certs_file_path"):
        make_client("pulsar+ssl://127.0.0.1:1", tls_trust_certs_file_path=str(missing))


def test_unreadable_ca_file_is_a_configuration_error_naming_the_option(
    make_client: MakeClient, tmp_path: Path
) -> None:
    junk = _write_pem(tmp_path / "junk.pem", b"not a certificate")
    with pytest.raises(InvalidConfigurationError, match="tls_trust_certs_file_path"):
        make_client("pulsar+ssl://127.0.0.1:1", tls_trust_certs_file_path=str(junk))
