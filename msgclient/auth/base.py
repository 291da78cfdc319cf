"""Authentication: what the Pulsar handshake sends to prove who the client is."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol


class TlsTrust(Protocol):
    """What a provider may read of its Client's options in ``start`` (``ClientOptions``
    has it): the trust settings of the Client's own TLS connections."""

    @property
    def tls_trust_certs_file_path(self) -> str | None: ...

    @property
    def tls_allow_insecure_connection(self) -> bool: ...


class Authentication(ABC):
    """A credentials provider, passed as ``Client(url, authentication=...)``.

    ``method_name`` goes in CONNECT as ``auth_method_name`` (the broker's provider name:
    ``"token"``, ``"tls"``, ...); ``auth_data()`` gives CONNECT's ``auth_data`` and the
    answer to the broker's AUTH_CHALLENGE. It is awaited for each new connection and each
    challenge, so a provider can fetch or refresh its credentials there.

    Subclasses must keep secrets out of ``repr()`` and out of exception messages: both end
    up in logs. Failures raise ``AuthenticationError``.
    """

    method_name: str

    @abstractmethod
    async def auth_data(self) -> bytes:
        """The current credentials, refreshed first if they are about to expire."""

    @property
    def client_certificate(self) -> tuple[str, str] | None:
        """(certificate file, private key file) for the TLS handshake, or None."""
        return None

    def start(self, options: TlsTrust) -> None:
        """Called by each Client that uses this provider, with its options (as Java's
        ``Authentication.start()``). Does nothing unless a provider needs them."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
