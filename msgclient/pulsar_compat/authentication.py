"""The official client's authentication classes. Each holds msgclient's provider as
``auth`` (the official classes hold the C++ one there), which ``Client`` passes on."""

from __future__ import annotations

import json
from collections.abc import Callable

from msgclient import auth as core
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.exceptions import OperationNotSupported, pulsar_errors


class Authentication:
    """Base class of the providers. Constructing it directly loads a C++ plugin library
    in the official client; that is not offered here (there is no C++ underneath)."""

    auth: core.Authentication

    def __init__(self, dynamicLibPath: str, authParamsString: str) -> None:
        check_type(str, dynamicLibPath, "dynamicLibPath")
        check_type(str, authParamsString, "authParamsString")
        raise OperationNotSupported(
            f"Authentication({dynamicLibPath!r}, ...) loads a C++ plugin library, which "
            "msgclient cannot do: use AuthenticationToken, AuthenticationTLS, "
            "AuthenticationOauth2 or AuthenticationBasic"
        )


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
