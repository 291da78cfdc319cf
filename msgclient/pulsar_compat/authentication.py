"""The official client's authentication classes. Each holds msgclient's provider as
``auth`` (the official classes hold the C++ one there), which ``Client`` passes on."""

from __future__ import annotations

import json
from collections.abc import Callable

from msgclient import auth as core
from msgclient import errors
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.exceptions import pulsar_errors


class Authentication:
    """Base class of the providers. ``Authentication(plugin, params)`` names a provider as
    the official client does: the built-in plugin names (``token``, ``tls``, ``basic``,
    ``oauth2`` or their Java class names) with their parameter strings. Any other name is
    a C++ plugin library to load, which msgclient cannot do: connecting then fails with
    ``AuthenticationError`` saying so (the official client fails there when the library
    does not load)."""

    auth: core.Authentication

    def __init__(self, dynamicLibPath: str, authParamsString: str) -> None:
        check_type(str, dynamicLibPath, "dynamicLibPath")
        check_type(str, authParamsString, "authParamsString")
        plugin = _PLUGINS.get(dynamicLibPath.lower())
        if plugin is None:
            self.auth = _Unloadable(dynamicLibPath)
            return
        with pulsar_errors():
            self.auth = plugin(authParamsString)


class _Unloadable(core.Authentication):
    """A plugin library that cannot be loaded: every connection's CONNECT fails."""

    method_name = "none"

    def __init__(self, library: str) -> None:
        self._library = library

    async def auth_data(self) -> bytes:
        raise errors.AuthenticationError(
            f"authentication plugin {self._library!r} is a C++ library, which msgclient "
            "cannot load: use AuthenticationToken, AuthenticationTLS, AuthenticationOauth2 "
            "or AuthenticationBasic"
        )


def _tls(params: str) -> core.Authentication:
    """``tlsCertFile:PATH,tlsKeyFile:PATH``, the official TLS plugin's parameters."""
    fields = dict(part.split(":", 1) for part in params.split(",") if ":" in part)
    if "tlsCertFile" not in fields or "tlsKeyFile" not in fields:
        raise errors.InvalidConfigurationError(
            "the tls authentication plugin needs tlsCertFile:PATH,tlsKeyFile:PATH"
        )
    return core.AuthenticationTLS(fields["tlsCertFile"], fields["tlsKeyFile"])


def _basic(params: str) -> core.Authentication:
    return AuthenticationBasic(auth_params_string=params).auth


class AuthenticationToken(Authentication):
    """A token, or a function returning one (called for each new connection)."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise ValueError(
                "Argument token is expected to be of type 'str' or a function returning 'str'"
            )
        with pulsar_errors():
            self.auth = core.AuthenticationToken(token)


class AuthenticationTLS(Authentication):
    """A client certificate and its private key (mutual TLS)."""

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        check_type(str, certificate_path, "certificate_path")
        check_type(str, private_key_path, "private_key_path")
        with pulsar_errors():
            self.auth = core.AuthenticationTLS(certificate_path, private_key_path)


class AuthenticationOauth2(Authentication):
    """OAuth 2.0 client credentials, from the official JSON parameters."""

    def __init__(self, auth_params_string: str) -> None:
        check_type(str, auth_params_string, "auth_params_string")
        with pulsar_errors():
            self.auth = core.AuthenticationOauth2(auth_params_string)


class _Basic(core.Authentication):
    """HTTP-style basic credentials, sent as ``username:password`` under ``method``."""

    def __init__(self, username: str, password: str, method: str) -> None:
        self.method_name = method
        self._credentials = f"{username}:{password}".encode()

    async def auth_data(self) -> bytes:
        return self._credentials


class AuthenticationBasic(Authentication):
    """``AuthenticationBasic(username, password, method='basic')``, or the same as JSON in
    ``auth_params_string`` (which then wins)."""

    def __init__(
        self,
        username: str | None = None,
        password: str | None = None,
        method: str = "basic",
        auth_params_string: str | None = None,
    ) -> None:
        if auth_params_string is not None:
            check_type(str, auth_params_string, "auth_params_string")
            params = json.loads(auth_params_string)
            if not isinstance(params, dict) or "username" not in params or "password" not in params:
                raise ValueError("auth_params_string needs the username and password fields")
            username, password = params["username"], params["password"]
            method = params.get("method", "basic")
        check_type(str, username, "username")
        check_type(str, password, "password")
        check_type(str, method, "method")
        assert username is not None and password is not None  # checked above
        self.auth = _Basic(username, password, method)


_JAVA_AUTH = "org.apache.pulsar.client.impl.auth."
# The official client's built-in plugin names (C++ AuthFactory), lower-cased.
_PLUGINS: dict[str, Callable[[str], core.Authentication]] = {
    **dict.fromkeys(["token", f"{_JAVA_AUTH}authenticationtoken"], core.AuthenticationToken),
    **dict.fromkeys(["tls", f"{_JAVA_AUTH}authenticationtls"], _tls),
    **dict.fromkeys(["basic", f"{_JAVA_AUTH}authenticationbasic"], _basic),
    **dict.fromkeys(
        ["oauth2", f"{_JAVA_AUTH}oauth2.authenticationoauth2"], core.AuthenticationOauth2
    ),
}
