"""The TLS context of a client, from its options (shared by every protocol adapter)."""

from __future__ import annotations

import ssl

from msgclient.errors import InvalidConfigurationError
from msgclient.options import ClientOptions


def client_ssl_context(options: ClientOptions) -> ssl.SSLContext:
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
    return context
