"""SASL client mechanisms (protocols/kafkawire/sasl.py), driven by server messages.

A SCRAM exchange with an honest in-test server completes for any credentials; random and
mutated server-first and server-final messages (and anything after a failure) raise only
AuthenticationError, quickly and in bounded memory. The same for PLAIN's one answer.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import hmac
from typing import Literal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import AuthenticationError
from protocols.kafkawire.sasl import MIN_ITERATIONS, PlainMechanism, ScramMechanism
from tests.fuzz.strategies import KIB, bounded, examples, mutated, text

HASHES: st.SearchStrategy[Literal["SHA-256", "SHA-512"]] = st.sampled_from(["SHA-256", "SHA-512"])
# RFC 5802 nonces: printable ASCII except ','.
NONCES = st.text(st.sampled_from([chr(c) for c in range(0x21, 0x7F) if c != 0x2C]), min_size=1)
USERS = text(max_size=20).filter(lambda s: s and "\0" not in s)
PASSWORDS = text(max_size=20)


@functools.lru_cache(maxsize=256)
def _salted(hash_name: str, password: str, salt: bytes) -> bytes:
    # PBKDF2 is the costly part of an example: the server's side is computed once.
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, MIN_ITERATIONS)


class ScramServer:
    """RFC 5802's server side for one exchange (as Kafka's broker computes it)."""

    def __init__(self, password: str, hash_name: str, salt: bytes, server_nonce: str) -> None:
        self.hash = {"SHA-256": "sha256", "SHA-512": "sha512"}[hash_name]
        self.salt, self.server_nonce = salt, server_nonce
        self.salted = _salted(self.hash, password, salt)

    def mac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()

    def first(self, client_first: bytes) -> bytes:
        self.client_first_bare = client_first.decode()[3:]
        nonce = self.client_first_bare.rsplit(",r=", 1)[1] + self.server_nonce
        salt = base64.b64encode(self.salt).decode()
        self.server_first = f"r={nonce},s={salt},i={MIN_ITERATIONS}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        without_proof = client_final.decode().rsplit(",p=", 1)[0]
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        return b"v=" + base64.b64encode(self.mac(self.mac(self.salted, b"Server Key"), auth))


def respond_bounded(client: ScramMechanism | PlainMechanism, message: bytes) -> bytes | None:
    """The client's answer, or None after an AuthenticationError (nothing else may escape)."""
    outcome = bounded(
        lambda: client.respond(message), AuthenticationError, 64 * len(message) + 64 * KIB
    )
    return None if outcome.error is not None else outcome.result


@settings(max_examples=examples(0.05))
@given(USERS, PASSWORDS, HASHES, NONCES, NONCES, st.binary(min_size=1, max_size=32))
def test_an_honest_exchange_completes(
    user: str, password: str, hash_name: Literal["SHA-256", "SHA-512"], nonce: str,
    server_nonce: str, salt: bytes,
) -> None:  # fmt: skip
    client = ScramMechanism(user, password, hash_name, nonce=nonce)
    server = ScramServer(password, hash_name, salt, server_nonce)
    final = client.respond(server.first(client.initial_response()))
    assert final is not None and not client.complete
    assert client.respond(server.final(final)) is None
    assert client.complete


# A valid server-first message may ask for up to MAX_ITERATIONS PBKDF2 rounds (about 1 s
# by design): these examples get more time than the others, still far from a hang.
@settings(max_examples=examples(0.25), deadline=10_000)
@given(HASHES, st.binary(max_size=300))
@example("SHA-256", b"r=clientnonceX,s=c2FsdA==,i=99999999999")  # 11 digits
@example("SHA-256", b"r=clientnonceX,s=c2FsdA==,i=0")
@example("SHA-256", b"m=ext,r=clientnonceX,s=c2FsdA==,i=4096")
@example("SHA-512", b"r=clientnonce,s=c2FsdA==,i=4096")  # the server added no nonce
def test_random_server_first_messages_raise_only_authentication_errors(
    hash_name: Literal["SHA-256", "SHA-512"], message: bytes
) -> None:
    client = ScramMechanism("user", "pencil", hash_name, nonce="clientnonce")
    client.initial_response()
    if respond_bounded(client, message) is None:
        # Failed: whatever comes next is refused too.
        assert respond_bounded(client, b"v=") is None


@settings(max_examples=examples(0.25), deadline=10_000)
@given(HASHES, NONCES, st.binary(min_size=1, max_size=16), st.data())
def test_mutated_server_first_messages_raise_only_authentication_errors(
    hash_name: Literal["SHA-256", "SHA-512"], server_nonce: str, salt: bytes, data: st.DataObject
) -> None:
    client = ScramMechanism("user", "pencil", hash_name, nonce="clientnonce")
    server = ScramServer("pencil", hash_name, salt, server_nonce)
    first = server.first(client.initial_response())
    respond_bounded(client, data.draw(mutated(first)))


@functools.cache
def _awaiting_final(hash_name: Literal["SHA-256", "SHA-512"]) -> tuple[ScramMechanism, bytes]:
    """A client that sent its final message, and the honest server's answer to it."""
    client = ScramMechanism("user", "pencil", hash_name, nonce="clientnonce")
    server = ScramServer("pencil", hash_name, b"salt", "SERVER")
    final = client.respond(server.first(client.initial_response()))
    assert final is not None
    return client, server.final(final)


@settings(max_examples=examples(0.25))
@given(HASHES, st.data())
def test_mutated_or_random_server_final_messages_raise_only_authentication_errors(
    hash_name: Literal["SHA-256", "SHA-512"], data: st.DataObject
) -> None:
    # A copy of a client at that point: its PBKDF2 is done once, not per example.
    template, honest = _awaiting_final(hash_name)
    client = copy.copy(template)
    message = data.draw(mutated(honest) | st.binary(max_size=200))
    if respond_bounded(client, message) is not None:
        raise AssertionError("a server-final message is answered with None or refused")
    # Complete only if the server proved it knows the password.
    if client.complete:
        signature = message.decode().split(",")[0].removeprefix("v=")
        assert base64.b64decode(signature) == base64.b64decode(honest[2:])


@settings(max_examples=examples(0.2))
@given(st.binary(max_size=100))
def test_plain_refuses_any_answer_but_an_empty_one(message: bytes) -> None:
    plain = PlainMechanism("user", "pencil")
    plain.initial_response()
    respond_bounded(plain, message)
    assert plain.complete == (message == b"")
