"""Kafka SASL client mechanisms, driven by bytes only (RFC 7677 vector + an in-test server)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from functools import partial

import pytest

from msgclient.errors import AuthenticationError, InvalidConfigurationError
from protocols.kafkawire.sasl import (
    MAX_ITERATIONS,
    SUPPORTED_MECHANISMS,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
    make_mechanism,
)

NONCE = "clientNONCEclientNONCE"
USER = "alice-Us3r-XYZ"
PASSWORD = "s3cr3t-Pa55-QWE"


class ScramServer:
    """RFC 5802 server side: keeps only StoredKey and ServerKey, as a broker does.

    ``check_proof=False`` plays an impostor that does not know the password and answers
    anyway: only the client's verification of ``v=`` can catch it.
    """

    def __init__(
        self,
        password: str,
        hash_name: str = "sha512",
        *,
        iterations: int = 4096,
        server_nonce: str = "SERVERnonce%$)",
        check_proof: bool = True,
    ) -> None:
        self.hash = hash_name
        self.salt = b"some salt bytes"
        self.iterations = iterations
        self.server_nonce = server_nonce
        self.check_proof = check_proof
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), self.salt, iterations)
        self.stored_key = hashlib.new(hash_name, self.mac(salted, b"Client Key")).digest()
        self.server_key = self.mac(salted, b"Server Key")
        self.username = ""

    def mac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()

    def first(self, client_first: bytes) -> bytes:
        message = client_first.decode()
        assert message.startswith("n,,")
        self.client_first_bare = message[3:]
        name, nonce = self.client_first_bare.split(",")
        assert name.startswith("n=") and nonce.startswith("r=")
        self.username = name[2:].replace("=2C", ",").replace("=3D", "=")
        self.nonce = nonce[2:] + self.server_nonce
        salt = base64.b64encode(self.salt).decode()
        self.server_first = f"r={self.nonce},s={salt},i={self.iterations}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        without_proof, proof = client_final.decode().rsplit(",p=", 1)
        assert without_proof == f"c=biws,r={self.nonce}"
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = self.mac(self.stored_key, auth)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
        if self.check_proof and hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(self.mac(self.server_key, auth))


def exchange(client: SaslMechanism, server: ScramServer) -> None:
    client_final = client.respond(server.first(client.initial_response()))
    assert client_final is not None and not client.complete
    assert client.respond(server.final(client_final)) is None


def started(client: ScramMechanism) -> ScramMechanism:
    client.initial_response()
    return client


# -- PLAIN ---------------------------------------------------------------------------------


def test_plain_message_and_completion() -> None:
    plain = PlainMechanism("alice", "pä ss")
    assert plain.name == "PLAIN"
    assert plain.initial_response() == b"\0alice\0p\xc3\xa4 ss"
    assert not plain.complete
    assert plain.respond(b"") is None
    assert plain.complete
    assert PlainMechanism("u", "p", authzid="admin").initial_response() == b"admin\0u\0p"


def test_plain_rejects_a_non_empty_answer_and_bad_arguments() -> None:
    plain = PlainMechanism("alice", "pw")
    plain.initial_response()
    with pytest.raises(AuthenticationError):
        plain.respond(b"more?")
    with pytest.raises(AuthenticationError, match="failed"):
        plain.respond(b"")
    for username, password in (("", "pw"), ("alice", ""), ("al\0ice", "pw"), ("a", "p\0w")):
        with pytest.raises(InvalidConfigurationError):
            PlainMechanism(username, password)


# -- SCRAM-SHA-256: RFC 7677 section 3 ----------------------------------------------------


def test_scram_sha256_rfc7677_vector() -> None:
    client = ScramMechanism("user", "pencil", "SHA-256", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.name == "SCRAM-SHA-256"
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    client_final = client.respond(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert not client.complete
    assert client.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


# -- SCRAM-SHA-512 against the in-test server ---------------------------------------------


@pytest.mark.parametrize("hash_name", ["SHA-256", "SHA-512"])
def test_scram_full_exchange(hash_name: str) -> None:
    client = make_mechanism(f"SCRAM-{hash_name}", USER, PASSWORD)
    server = ScramServer(PASSWORD, hash_name.replace("-", "").lower())
    exchange(client, server)
    assert client.complete and server.username == USER


def test_default_nonce_is_random_base64_of_24_bytes() -> None:
    firsts = {ScramMechanism(USER, PASSWORD, "SHA-512").initial_response() for _ in range(3)}
    assert len(firsts) == 3
    for first in firsts:
        nonce = first.split(b",r=")[1]
        assert len(base64.b64decode(nonce, validate=True)) == 24


@pytest.mark.parametrize(
    ("username", "saslname"),
    [("a=b,c", b"a=3Db=2Cc"), ("=2C", b"=3D2C"), (",,==", b"=2C=2C=3D=3D")],
)
def test_username_escaping(username: str, saslname: bytes) -> None:
    client = ScramMechanism(username, PASSWORD, "SHA-512", nonce=NONCE)
    client_first = client.initial_response()
    assert client_first == b"n,,n=" + saslname + b",r=" + NONCE.encode()
    server = ScramServer(PASSWORD)
    client_final = client.respond(server.first(client_first))
    assert client_final is not None
    assert client.respond(server.final(client_final)) is None
    assert server.username == username


def test_password_is_raw_utf8_like_kafka_java() -> None:
    # Java's ScramFormatter.normalize() is only UTF-8 encoding: no NFKC ("\ufb01" != "fi").
    exchange(ScramMechanism(USER, "\ufb01", "SHA-512"), ScramServer("\ufb01"))
    with pytest.raises(AuthenticationError, match="invalid-proof"):
        exchange(ScramMechanism(USER, "\ufb01", "SHA-512"), ScramServer("fi"))


def test_wrong_password_is_refused_by_an_honest_server() -> None:
    client = ScramMechanism(USER, "wrong", "SHA-512")
    with pytest.raises(AuthenticationError, match="server error 'invalid-proof'"):
        exchange(client, ScramServer(PASSWORD))
    assert not client.complete


def test_server_without_the_password_fails_at_server_final() -> None:
    client = ScramMechanism(USER, PASSWORD, "SHA-512")
    server = ScramServer("another password", check_proof=False)
    client_final = client.respond(server.first(client.initial_response()))
    assert client_final is not None
    with pytest.raises(AuthenticationError, match="signature does not verify"):
        client.respond(server.final(client_final))
    assert not client.complete
    with pytest.raises(AuthenticationError, match="failed"):
        client.respond(b"v=AAAA")


@pytest.mark.parametrize("server_nonce", ["other", "x" + NONCE, NONCE[:-1], NONCE])
def test_server_nonce_must_extend_ours(server_nonce: str) -> None:
    # NONCE itself: a server that adds nothing of its own could be replaying an exchange.
    client = started(ScramMechanism(USER, PASSWORD, "SHA-512", nonce=NONCE))
    with pytest.raises(AuthenticationError, match="nonce does not extend"):
        client.respond(f"r={server_nonce},s=c2FsdA==,i=4096".encode())


def test_server_error_message_carries_its_reason() -> None:
    client = ScramMechanism(USER, PASSWORD, "SHA-512", nonce=NONCE)
    client.initial_response()
    assert client.respond(f"r={NONCE}srv,s=c2FsdA==,i=4096".encode()) is not None
    with pytest.raises(AuthenticationError, match="server error 'unknown-user'"):
        client.respond(b"e=unknown-user")


@pytest.mark.parametrize(
    "server_first",
    [
        b"",
        b"\xff\xfe",
        b"garbage",
        f"s=c2FsdA==,r={NONCE}s,i=4096".encode(),
        f"r={NONCE}s,i=4096".encode(),
        f"r={NONCE}s,s=c2FsdA==,i=".encode(),
        f"r={NONCE}s,s=c2FsdA==,i=4096x".encode(),
        f"r={NONCE}s,s=c2FsdA==,i=-4096".encode(),
        f"r={NONCE}s,s=c2FsdA==,i={'9' * 5000}".encode(),
        f"r={NONCE}s,s=not base64!,i=4096".encode(),
        f"r={NONCE}s,s=c2FsdA=,i=4096".encode(),
        f"r={NONCE}s,s=c2FsdA==,i=4096,,".encode(),
        f"r={NONCE} s,s=c2FsdA==,i=4096".encode(),
        f"m=ext,r={NONCE}s,s=c2FsdA==,i=4096".encode(),
        f"r={NONCE}s,s=c2FsdA==,i=4095".encode(),
        f"r={NONCE}s,s=c2FsdA==,i={MAX_ITERATIONS + 1}".encode(),
    ],
)
def test_malformed_server_first_message(server_first: bytes) -> None:
    client = started(ScramMechanism(USER, PASSWORD, "SHA-512", nonce=NONCE))
    with pytest.raises(AuthenticationError):
        client.respond(server_first)


@pytest.mark.parametrize(
    "server_final", [b"", b"\xff", b"v=", b"v=!!!!", b"v=abc", b"x=abc", b"v=AAAA,,"]
)
def test_malformed_server_final_message(server_final: bytes) -> None:
    client = started(ScramMechanism(USER, PASSWORD, "SHA-512", nonce=NONCE))
    client.respond(f"r={NONCE}s,s=c2FsdA==,i=4096,x=ext".encode())  # extensions are ignored
    with pytest.raises(AuthenticationError):
        client.respond(server_final)


def test_out_of_order_calls() -> None:
    client = ScramMechanism(USER, PASSWORD, "SHA-512")
    with pytest.raises(AuthenticationError, match="not started"):
        client.respond(b"r=x,s=c2FsdA==,i=4096")
    client.initial_response()
    with pytest.raises(AuthenticationError, match="already sent"):
        client.initial_response()
    plain = PlainMechanism("u", "p")
    plain.initial_response()
    plain.respond(b"")
    with pytest.raises(AuthenticationError, match="complete"):
        plain.respond(b"")


# -- configuration and secrecy -------------------------------------------------------------


def test_make_mechanism() -> None:
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    for name in SUPPORTED_MECHANISMS:
        assert make_mechanism(name, USER, PASSWORD).name == name
    with pytest.raises(InvalidConfigurationError, match="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        make_mechanism("GSSAPI", USER, PASSWORD)
    with pytest.raises(InvalidConfigurationError):
        make_mechanism("plain", USER, PASSWORD)


def test_bad_scram_arguments() -> None:
    with pytest.raises(InvalidConfigurationError, match="hash_name"):
        ScramMechanism(USER, PASSWORD, "SHA-1")  # type: ignore[arg-type]
    for nonce in ("", "a,b", "caf\xe9", "a b"):
        with pytest.raises(InvalidConfigurationError, match="nonce"):
            ScramMechanism(USER, PASSWORD, "SHA-512", nonce=nonce)
    for username in ("", "a\0b"):
        with pytest.raises(InvalidConfigurationError, match="username"):
            ScramMechanism(username, PASSWORD, "SHA-512")
    with pytest.raises(TypeError):
        ScramMechanism(USER, b"bytes", "SHA-512")  # type: ignore[arg-type]


def _texts(error: BaseException | None) -> list[str]:
    """str, repr and args of an exception and of everything chained to it."""
    texts: list[str] = []
    while error is not None:
        texts += [str(error), repr(error), *map(repr, error.args)]
        error = error.__cause__ or error.__context__
    return texts


def test_credentials_never_leak() -> None:
    errors: list[BaseException] = []
    objects: list[object] = []

    def capture(step: Callable[[], object]) -> None:
        with pytest.raises((AuthenticationError, InvalidConfigurationError)) as info:
            step()
        errors.append(info.value)

    for mechanism in SUPPORTED_MECHANISMS:
        objects.append(make_mechanism(mechanism, USER, PASSWORD))
    for password in (PASSWORD + "\0", PASSWORD + "\ud800"):
        capture(partial(PlainMechanism, USER, password))
    capture(lambda: ScramMechanism(USER + "\ud800", PASSWORD, "SHA-512"))
    capture(lambda: make_mechanism("NOPE", USER, PASSWORD))

    plain = PlainMechanism(USER, PASSWORD)
    plain.initial_response()
    capture(lambda: plain.respond(b"?"))
    objects.append(plain)
    for server, client_password in (
        (ScramServer(PASSWORD), "wrong" + PASSWORD),
        (ScramServer("x", check_proof=False), PASSWORD),
    ):
        client = ScramMechanism(USER, client_password, "SHA-512")
        objects.append(client)
        capture(partial(exchange, client, server))
    client = ScramMechanism(USER, PASSWORD, "SHA-512")
    exchange(client, ScramServer(PASSWORD))
    objects.append(client)
    capture(lambda: client.respond(b""))

    texts = [text for error in errors for text in _texts(error)]
    texts += [text for obj in objects for text in (repr(obj), str(obj))]
    assert texts
    for text in texts:
        for secret in (USER, PASSWORD):
            assert secret not in text
