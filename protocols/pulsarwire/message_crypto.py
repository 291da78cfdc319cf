"""End-to-end encryption of message payloads, in the official clients' format.

A producer encrypts each entry's payload (after compression) with AES-256-GCM under a
random 32-byte data key and a random 12-byte IV; the 16-byte tag follows the ciphertext.
The data key goes along wrapped for each key name with that key's RSA public key
(RSA-OAEP with SHA-1 and MGF1-SHA-1: OpenSSL's RSA_PKCS1_OAEP_PADDING, the C++ client's,
and the Java client's OAEPWithSHA1AndMGF1Padding). A new data key is made every 4 hours,
as the Java and C++ producers do. A consumer unwraps the data key with the private key of
any key name it can, and remembers unwrapped data keys (4 hours) so that RSA runs once
per data key, not once per message.

Only RSA keys: the official Python client (on the C++ one) cannot use EC keys, and the
Java client's ECIES (BouncyCastle's) is not implemented here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from msgclient.crypto_key_reader import (
    CryptoError,
    CryptoKeyReader,
    EncryptionKey,
    EncryptionKeyInfo,
)

DATA_KEY_SIZE = 32  # AES-256
IV_SIZE = 12
TAG_SIZE = 16
DATA_KEY_LIFETIME_SECONDS = 4 * 60 * 60

_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)

Clock = Callable[[], float]


@attrs.frozen
class EncryptedPayload:
    """What a producer sends: the wrapped data keys, the IV and ciphertext + tag."""

    keys: tuple[EncryptionKey, ...]
    iv: bytes
    payload: bytes


def load_public_key(key_name: str, pem: bytes) -> rsa.RSAPublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as error:
        raise CryptoError(f"key {key_name!r}: not a PEM public key ({error})") from error
    if not isinstance(key, rsa.RSAPublicKey):
        raise _not_rsa(key_name, key)
    return key


def load_private_key(key_name: str, pem: bytes) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise CryptoError(
            f"key {key_name!r}: not an unencrypted PEM private key ({error})"
        ) from error
    if not isinstance(key, rsa.RSAPrivateKey):
        raise _not_rsa(key_name, key)
    return key


def _not_rsa(key_name: str, key: object) -> CryptoError:
    return CryptoError(
        f"key {key_name!r} is a {type(key).__name__}: only RSA keys are supported (the "
        "official Python client has RSA only)"
    )


def wrap_data_key(key_name: str, data_key: bytes, public_key: rsa.RSAPublicKey) -> bytes:
    try:
        return public_key.encrypt(data_key, _OAEP)
    except ValueError as error:  # a modulus too small for OAEP of 32 bytes
        raise CryptoError(f"key {key_name!r}: cannot wrap the data key ({error})") from error


def unwrap_data_key(key_name: str, wrapped: bytes, private_key: rsa.RSAPrivateKey) -> bytes:
    try:
        data_key = private_key.decrypt(wrapped, _OAEP)
    except ValueError as error:
        raise CryptoError(
            f"key {key_name!r}: the private key does not unwrap this message's data key"
        ) from error
    if len(data_key) != DATA_KEY_SIZE:
        raise CryptoError(f"key {key_name!r}: the data key has {len(data_key)} bytes, not 32")
    return data_key


def seal(data_key: bytes, iv: bytes, plaintext: bytes) -> bytes:
    """AES-256-GCM ciphertext followed by its 16-byte tag, no associated data."""
    return AESGCM(data_key).encrypt(iv, plaintext, None)


def unseal(data_key: bytes, iv: bytes, sealed: bytes) -> bytes:
    """The plaintext of ``seal``; InvalidTag if the key, IV or bytes are not the right ones."""
    if len(iv) != IV_SIZE:
        raise InvalidTag(f"an IV of {len(iv)} bytes, not {IV_SIZE}")
    return AESGCM(data_key).decrypt(iv, sealed, None)


def _read_key(
    reader: CryptoKeyReader, public: bool, key_name: str, metadata: Mapping[str, str]
) -> EncryptionKeyInfo:
    get = reader.get_public_key if public else reader.get_private_key
    try:
        info = get(key_name, metadata)
    except CryptoError:
        raise
    except Exception as error:  # the application's reader: any failure is a key failure
        raise CryptoError(f"key {key_name!r}: {type(reader).__name__} failed: {error!r}") from error
    if not isinstance(info, EncryptionKeyInfo):
        raise CryptoError(
            f"key {key_name!r}: {type(reader).__name__} returned {type(info).__name__}, "
            "not an EncryptionKeyInfo"
        )
    return info


@attrs.frozen
class DataKey:
    """One data key and its wrapped copies (one per key name): what encrypts entries, each
    with a fresh IV."""

    keys: tuple[EncryptionKey, ...]
    key: bytes = attrs.field(repr=False)

    def encrypt(self, payload: bytes) -> EncryptedPayload:
        iv = os.urandom(IV_SIZE)
        return EncryptedPayload(self.keys, iv, seal(self.key, iv, payload))


class MessageEncryptor:
    """A producer's data key, wrapped for each of its key names, renewed every 4 hours."""

    def __init__(
        self, key_names: Sequence[str], reader: CryptoKeyReader, clock: Clock = time.monotonic
    ) -> None:
        self._key_names = tuple(key_names)
        self._reader = reader
        self._clock = clock
        self._data_key = DataKey((), b"")
        self._expires = 0.0

    def encrypt(self, payload: bytes) -> EncryptedPayload:
        """Raises CryptoError when a key cannot be read or used."""
        return self.data_key().encrypt(payload)

    def data_key(self) -> DataKey:
        """The data key now, renewed first when due (CryptoError when a key cannot be read
        or used). The chunks of one message take one, so that a renewal cannot change
        their metadata's size between the chunks measured and the chunks sent."""
        if self._clock() >= self._expires:
            self.renew_data_key()
        return self._data_key

    def renew_data_key(self) -> None:
        """A new data key, wrapped with each key name's public key (read now)."""
        data_key = os.urandom(DATA_KEY_SIZE)
        keys = []
        for name in self._key_names:
            info = _read_key(self._reader, True, name, {})
            wrapped = wrap_data_key(name, data_key, load_public_key(name, info.key))
            keys.append(EncryptionKey(name, wrapped, info.metadata))
        self._data_key = DataKey(tuple(keys), data_key)
        self._expires = self._clock() + DATA_KEY_LIFETIME_SECONDS


class MessageDecryptor:
    """A consumer's side: the data keys it unwrapped, by wrapped value, kept 4 hours."""

    def __init__(self, reader: CryptoKeyReader, clock: Clock = time.monotonic) -> None:
        self._reader = reader
        self._clock = clock
        self._data_keys: dict[bytes, tuple[bytes, float]] = {}  # wrapped -> (key, expiry)

    def decrypt(self, keys: Sequence[EncryptionKey], iv: bytes, payload: bytes) -> bytes:
        """The plaintext; CryptoError naming why when no key name opens it."""
        if not keys:
            raise CryptoError("the message carries no encryption key")
        plaintext = self._with_known_keys(keys, iv, payload)
        if plaintext is not None:
            return plaintext
        errors = []
        for key in keys:
            try:
                self._unwrap(key)
            except CryptoError as error:
                errors.append(str(error))
                continue
            plaintext = self._with_known_keys([key], iv, payload)
            if plaintext is not None:
                return plaintext
            errors.append(f"key {key.key!r}: the payload does not decrypt with its data key")
        raise CryptoError("cannot decrypt: " + "; ".join(errors))

    def _with_known_keys(
        self, keys: Iterable[EncryptionKey], iv: bytes, payload: bytes
    ) -> bytes | None:
        for key in keys:
            known = self._data_keys.get(key.value)
            if known is not None:
                try:
                    return unseal(known[0], iv, payload)
                except InvalidTag:
                    continue
        return None

    def _unwrap(self, key: EncryptionKey) -> None:
        info = _read_key(self._reader, False, key.key, key.metadata)
        data_key = unwrap_data_key(key.key, key.value, load_private_key(key.key, info.key))
        now = self._clock()
        for wrapped in [w for w, (_, expiry) in self._data_keys.items() if expiry <= now]:
            del self._data_keys[wrapped]
        self._data_keys[key.value] = (data_key, now + DATA_KEY_LIFETIME_SECONDS)
