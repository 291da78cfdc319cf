"""AuthenticationTLS: the client proves its identity with a certificate (mutual TLS)."""

from __future__ import annotations

from msgclient.auth.base import Authentication
from msgclient.errors import InvalidConfigurationError


class AuthenticationTLS(Authentication):
    """``AuthenticationTLS(certificate_path, private_key_path)``, as the official client.

    The certificate and key (PEM files) go into the TLS handshake, so the service URL
    must be ``pulsar+ssl://``. CONNECT names the method ``"tls"`` and carries no data: the
    broker takes the identity from the certificate.
    """

    method_name = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        for name, value in (
            ("certificate_path", certificate_path),
            ("private_key_path", private_key_path),
        ):
            if not isinstance(value, str) or not value:
                raise InvalidConfigurationError(
                    f"AuthenticationTLS {name} is invalid: expected a non-empty str (a path), "
                    f"not {type(value).__name__}"
                )
        self.certificate_path = certificate_path
        self.private_key_path = private_key_path

    async def auth_data(self) -> bytes:
        return b""

    @property
    def client_certificate(self) -> tuple[str, str]:
        return self.certificate_path, self.private_key_path

    def __repr__(self) -> str:
        # Paths only: the key itself is never read into this object.
        return (
            f"AuthenticationTLS(certificate_path={self.certificate_path!r}, "
            f"private_key_path={self.private_key_path!r})"
        )
