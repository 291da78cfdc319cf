"""The TLS context of a client, from its options (shared by every protocol adapter)."""

from __future__ import annotations

import ssl

from msgclient.errors import InvalidConfigurationError
from msgclient.options import ClientOptions


def client_ssl_context(
    options: ClientOptions, client_certificate: tuple[str, str] | None = None
) -> ssl.SSLContext:
    """``client_certificate``: (certificate file, private key file) for mutual TLS."""
    path = options.tls_trust_certs_file_path
    try:
        context = ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as error:  # missing, unreadable, or no certificate in it
        raise InvalidConfigurationError(
            f"option tls_trust_certs_file_path={path!r} is invalid: cannot load trusted "
            f"certificates from it ({error})"
        ) from error
    context.check_hostname = options.tls_validate_hostname
    if options.tls_allow_insecure_connection:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if client_certificate is not None:
        certificate, key = client_certificate
        try:
            # An empty password, not OpenSSL's prompt on the terminal, for an encrypted key.
            context.load_cert_chain(certificate, key, password=lambda: b"")
        except (OSError, ssl.SSLError) as error:  # missing, unreadable, or not a matching pair
            raise InvalidConfigurationError(
                f"option authentication=AuthenticationTLS({certificate!r}, {key!r}) is "
                f"invalid: cannot load the client certificate and key from them ({error})"
            ) from error
    return context
