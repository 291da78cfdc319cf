"""Where end-to-end encryption keys come from: the CryptoKeyReader interface (the Java
client's) and FileCryptoKeyReader, the official Python client's CryptoKeyReader(public_key_path,
private_key_path) that reads PEM files; the key types and CryptoError. No dependency on the
``cryptography`` package (the ``crypto`` extra): that is message_crypto.py's.

A producer asks for the public key of each of its key names and wraps its data key with
it; a consumer asks for the private key named in a message (with the metadata the producer's
reader gave that key) and unwraps the data key with it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path

import attrs

from msgclient.errors import InvalidConfigurationError, MsgClientError


class CryptoError(MsgClientError):
    """A message could not be encrypted (its send fails with this) or decrypted (the
    consumer's crypto_failure_action decides), or a key could not be read."""


def _str_mapping(value: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidConfigurationError(
            f"EncryptionKeyInfo metadata={value!r} is invalid: expected a mapping of str to str"
        )
    return dict(value)


@attrs.frozen
class EncryptionKeyInfo:
    """A key as a CryptoKeyReader gives it: PEM bytes, and metadata that travels with the
    wrapped data key in every message (EncryptionKeys.metadata) and is handed back to the
    consumer's reader, e.g. a key version."""

    key: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))
    metadata: Mapping[str, str] = attrs.field(factory=dict, converter=_str_mapping)


@attrs.frozen
class EncryptionKey:
    """One wrapped data key as a message carries it (PulsarApi.proto's EncryptionKeys;
    the official client's EncryptionKey names): the key name, the data key encrypted with
    that key's public key, and the metadata the producer's reader gave."""

    key: str
    value: bytes
    metadata: Mapping[str, str] = attrs.field(factory=dict)


class CryptoKeyReader(ABC):
    """Gives the keys named in ``ProducerOptions.encryption_keys`` (public keys, to
    encrypt) and in received messages (private keys, to decrypt).

    Called on the event loop, once per key name per data key (a producer makes a new data
    key every 4 hours; a consumer remembers the data keys it unwrapped): keep it quick.
    An exception raised here fails the send, or is a decryption failure on the consumer.
    """

    @abstractmethod
    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The PEM public key (SubjectPublicKeyInfo or PKCS#1) for ``key_name``."""

    @abstractmethod
    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The PEM private key (PKCS#8 or PKCS#1, unencrypted) for ``key_name``;
        ``metadata`` is what the producer's reader gave with the public key."""


def _optional_path(name: str, value: str | os.PathLike[str] | None) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise InvalidConfigurationError(
            f"option {name}={value!r} is invalid: expected a file path (str or PathLike) or None"
        )
    return Path(value)


class FileCryptoKeyReader(CryptoKeyReader):
    """One key pair in PEM files, whatever the key name (the official client's default
    CryptoKeyReader). The files are read at each call, so a replaced key file is picked up
    at the next data key. A producer needs only the public key, a consumer the private one."""

    def __init__(
        self,
        public_key_path: str | os.PathLike[str] | None = None,
        private_key_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.public_key_path = _optional_path("public_key_path", public_key_path)
        self.private_key_path = _optional_path("private_key_path", private_key_path)

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(_read("public_key_path", self.public_key_path, key_name))

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(_read("private_key_path", self.private_key_path, key_name))

    def __repr__(self) -> str:
        return (
            f"FileCryptoKeyReader(public_key_path={self.public_key_path}, "
            f"private_key_path={self.private_key_path})"
        )


def _read(option: str, path: Path | None, key_name: str) -> bytes:
    if path is None:
        raise CryptoError(f"key {key_name!r}: the FileCryptoKeyReader has no {option}")
    try:
        return path.read_bytes()
    except OSError as error:
        raise CryptoError(f"key {key_name!r}: cannot read {option} {path}: {error}") from error
