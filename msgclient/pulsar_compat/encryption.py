"""End-to-end encryption under the official names: ``CryptoKeyReader(public_key_path,
private_key_path)`` (msgclient's FileCryptoKeyReader), and the ``EncryptionContext`` with
its ``EncryptionKey``s that a message delivered undecrypted (crypto_failure_action CONSUME)
gives, so that the application can decrypt it itself. docs/encryption.md has the format.
"""

from __future__ import annotations

import attrs

from msgclient import crypto_key_reader as core
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.enums import CompressionType, from_msgclient
from protocols.pulsarwire import encryption as wire


class CryptoKeyReader(core.FileCryptoKeyReader):
    """One RSA key pair in PEM files, whatever the key name, as the official default
    reader. A producer reads only the public key, a consumer only the private one."""

    def __init__(self, public_key_path: str, private_key_path: str) -> None:
        check_type(str, public_key_path, "public_key_path")
        check_type(str, private_key_path, "private_key_path")
        # The official reader takes '' for the path a side does not need (a producer's
        # private key): it is "no such file" only if that key is ever asked for.
        super().__init__(public_key_path or None, private_key_path or None)


@attrs.frozen(repr=False)
class EncryptionKey:
    """One data key as a message carries it: the key name, the data key wrapped with that
    key's public key, and the metadata the producer's key reader gave."""

    key: str
    value: bytes
    metadata: dict[str, str]

    def __repr__(self) -> str:  # the official text
        return (
            f"EncryptionKey(key={self.key}, value_len={len(self.value)}, metadata={self.metadata})"
        )


class EncryptionContext:
    """How an undecrypted message was encrypted and compressed (the official methods)."""

    __slots__ = ("_context",)

    def __init__(self, context: wire.EncryptionContext) -> None:
        self._context = context

    def keys(self) -> list[EncryptionKey]:
        return [EncryptionKey(k.key, k.value, dict(k.metadata)) for k in self._context.keys]

    def param(self) -> bytes:
        """The IV (12 bytes)."""
        return self._context.param

    def algorithm(self) -> str:
        """'' as the official producers leave it (AES-256-GCM)."""
        return self._context.algorithm

    def compression_type(self) -> CompressionType:
        return from_msgclient(self._context.compression_type, CompressionType)

    def uncompressed_message_size(self) -> int:
        return self._context.uncompressed_message_size

    def batch_size(self) -> int:
        """The number of messages in the entry, -1 when it is not a batch."""
        return self._context.batch_size

    def is_decryption_failed(self) -> bool:
        return self._context.is_decryption_failed

    def __repr__(self) -> str:  # the official text
        return (
            f"EncryptionContext(algorithm={self.algorithm()}, "
            f"compression_type={self.compression_type().name}, "
            f"uncompressed_message_size={self.uncompressed_message_size()}, "
            f"is_decryption_failed={self.is_decryption_failed()}, "
            f"keys=[{', '.join(str(key) for key in self.keys())}])"
        )
