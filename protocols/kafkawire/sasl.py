"""Kafka SASL client mechanisms, sans-IO: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, 7677).

The adapter names ``mechanism.name`` in SaslHandshake, sends ``initial_response()`` in the
first SaslAuthenticate request, then passes each response's ``auth_bytes`` to ``respond()``
and sends what it returns, until it returns None: the exchange is then complete and, for
SCRAM, the broker has proved it knows the credentials. One object serves one exchange.

Every failure is an AuthenticationError (bad arguments: InvalidConfigurationError). Neither
messages nor ``repr()`` ever show the username, the password or values derived from them.
SCRAM's PBKDF2 is CPU work done in ``respond()``: about 5 ms for 4096 rounds of SHA-512.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from abc import ABC, abstractmethod
from typing import Literal

from msgclient.errors import AuthenticationError, InvalidConfigurationError

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Kafka's ScramMechanism.minIterations: its Java client refuses a server asking for fewer.
MIN_ITERATIONS = 4096
# Kafka brokers never ask for more than 16384 (ScramMechanism.maxIterations); this looser cap
# only keeps a hostile server from blocking the caller for minutes (1M rounds: about 1 s).
MAX_ITERATIONS = 1_000_000

_HASHES = {"SHA-256": "sha256", "SHA-512": "sha512"}
_CHANNEL_BINDING = base64.b64encode(b"n,,").decode("ascii")  # "biws": gs2 header, no binding

# RFC 5802 section 7 grammar, as Kafka's ScramMessages parses it; i= takes at most 10 digits
# (more is no sane count, and int() refuses very long digit strings).
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII except ','
_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
_EXTENSIONS = r"(?:,[A-Za-z]+=[^,\x00]+)*"
_SERVER_FIRST = re.compile(rf"r=({_PRINTABLE}),s=({_B64}),i=([0-9]{{1,10}}){_EXTENSIONS}")
_SERVER_FINAL = re.compile(rf"v=({_B64}){_EXTENSIONS}")
_NONCE = re.compile(_PRINTABLE)


def _utf8(what: str, value: str, *, empty_ok: bool = False, nul_ok: bool = False) -> bytes:
    # Messages name the argument, never its value: these are credentials.
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value and not empty_ok:
        raise InvalidConfigurationError(f"{what} must not be empty")
    if "\0" in value and not nul_ok:
        raise InvalidConfigurationError(f"{what} must not contain NUL characters")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        pass  # raised outside the handler: the UnicodeEncodeError (context) holds the value
    raise InvalidConfigurationError(f"{what} is not encodable as UTF-8")


class SaslMechanism(ABC):
    """One client side of a SASL exchange; subclasses supply the messages."""

    name: str

    def __init__(self) -> None:
        self._seen = -1  # server messages answered; -1 before initial_response()
        self._complete = False
        self._failed = False

    @property
    def complete(self) -> bool:
        """True once the exchange succeeded (for SCRAM: the server's signature verified)."""
        return self._complete

    def initial_response(self) -> bytes:
        """The first client message, for the first SaslAuthenticate request."""
        if self._seen != -1:
            raise AuthenticationError(f"{self.name}: the initial response was already sent")
        self._seen = 0
        return self._initial()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client message for a server message, or None once complete."""
        if self._seen < 0 or self._complete or self._failed:
            raise AuthenticationError(f"{self.name}: unexpected server message ({self._state()})")
        try:
            reply = self._respond(self._seen, challenge)
        except AuthenticationError:
            self._failed = True
            raise
        self._seen += 1
        self._complete = reply is None
        return reply

    def _state(self) -> str:
        if self._failed:
            return "failed"
        if self._complete:
            return "complete"
        return "not started" if self._seen < 0 else f"{self._seen} server messages"

    def __repr__(self) -> str:
        # Deliberately only the mechanism and the progress: no username, password or keys.
        return f"<{type(self).__name__} {self.name} {self._state()}>"

    @abstractmethod
    def _initial(self) -> bytes: ...

    @abstractmethod
    def _respond(self, index: int, challenge: bytes) -> bytes | None: ...


class PlainMechanism(SaslMechanism):
    """SASL/PLAIN: ``authzid NUL username NUL password`` in one message (RFC 4616)."""

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__()
        self._message = b"\0".join(
            (
                _utf8("authzid", authzid, empty_ok=True),
                _utf8("username", username),
                _utf8("password", password),
            )
        )

    def _initial(self) -> bytes:
        return self._message

    def _respond(self, index: int, challenge: bytes) -> bytes | None:
        # The broker's only answer to PLAIN is empty; anything else is not this mechanism.
        if challenge:
            raise AuthenticationError("PLAIN: unexpected non-empty server message")
        return None


class ScramMechanism(SaslMechanism):
    """SASL/SCRAM-SHA-256 or -512 without channel binding (RFC 5802, RFC 7677).

    Like Kafka's Java client (``ScramFormatter.normalize`` is plain UTF-8), the password is
    not SASLprep'ed nor NFKC-normalized: the broker's stored credentials were derived from the
    raw UTF-8 bytes by the same code, so normalizing would break non-ASCII passwords.
    """

    def __init__(
        self,
        username: str,
        password: str,
        hash_name: Literal["SHA-256", "SHA-512"],
        *,
        nonce: str | None = None,
    ) -> None:
        super().__init__()
        if hash_name not in _HASHES:
            raise InvalidConfigurationError(
                f"hash_name must be one of {', '.join(_HASHES)}, not {hash_name!r}"
            )
        self.name = f"SCRAM-{hash_name}"
        self._hash = _HASHES[hash_name]
        _utf8("username", username)  # validated; escaped below
        self._password = _utf8("password", password, empty_ok=True, nul_ok=True)
        if nonce is None:
            nonce = base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        elif not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
            raise InvalidConfigurationError("nonce must be printable ASCII without ','")
        self._nonce = nonce
        saslname = username.replace("=", "=3D").replace(",", "=2C")  # '=' first: RFC 5802
        self._client_first_bare = f"n={saslname},r={nonce}"
        self._server_signature = b""

    def _initial(self) -> bytes:
        return b"n,," + self._client_first_bare.encode("utf-8")

    def _respond(self, index: int, challenge: bytes) -> bytes | None:
        if index == 0:
            return self._client_final(self._decode(challenge, "server-first-message"))
        self._verify(self._decode(challenge, "server-final-message"))
        return None

    def _decode(self, challenge: bytes, what: str) -> str:
        try:
            return str(challenge, "utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError(f"{self.name}: {what} is not UTF-8") from None

    def _fail(self, why: str) -> AuthenticationError:
        return AuthenticationError(f"{self.name}: {why}")

    def _client_final(self, server_first: str) -> bytes:
        if server_first.startswith("m="):
            # RFC 5802 5.1: an unknown mandatory extension must fail authentication.
            raise self._fail("server-first-message requires an unsupported extension (m=)")
        match = _SERVER_FIRST.fullmatch(server_first)
        if match is None:
            raise self._fail("malformed server-first-message")
        nonce, salt_b64, iterations_text = match.groups()
        # The server must append its own nonce to ours, or the exchange could be a replay.
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._fail("server nonce does not extend the client nonce")
        iterations = int(iterations_text)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise self._fail(
                f"server asks for {iterations} iterations, outside "
                f"[{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
            )
        salt = base64.b64decode(salt_b64)
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        without_proof = f"c={_CHANNEL_BINDING},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode()

    def _verify(self, server_final: str) -> None:
        if server_final.startswith("e="):
            reason = server_final[2:].split(",", 1)[0] or "unspecified"
            raise self._fail(f"server error {reason!r}")
        match = _SERVER_FINAL.fullmatch(server_final)
        if match is None:
            raise self._fail("malformed server-final-message")
        signature = base64.b64decode(match.group(1))  # the pattern admits valid base64 only
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._fail("server signature does not verify (the server lacks the credentials)")

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()


def make_mechanism(mechanism: str, username: str, password: str) -> SaslMechanism:
    """The client side of ``mechanism``, as Kafka's ``sasl.mechanism`` names it."""
    if mechanism == "PLAIN":
        return PlainMechanism(username, password)
    if mechanism == "SCRAM-SHA-256":
        return ScramMechanism(username, password, "SHA-256")
    if mechanism == "SCRAM-SHA-512":
        return ScramMechanism(username, password, "SHA-512")
    raise InvalidConfigurationError(
        f"unsupported SASL mechanism {mechanism!r}; supported: {', '.join(SUPPORTED_MECHANISMS)}"
    )
