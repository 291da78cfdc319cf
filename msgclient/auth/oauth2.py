"""AuthenticationOauth2: an access token from an OAuth2 issuer (client credentials flow).

As the official clients' ClientCredentialsFlow: the token endpoint comes from the issuer's
OpenID discovery document, the token from a ``client_credentials`` grant; CONNECT sends
it with the method name ``"token"``. The token is cached and fetched again once 90% of its
``expires_in`` has passed (Java's default early refresh), so that a new connection or the
broker's refresh challenge gets one that is still valid.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from msgclient.auth import http
from msgclient.auth.base import Authentication, TlsTrust
from msgclient.auth.oauth2_params import (
    credentials_from_json,
    data_url_credentials,
    key_file_path,
    parse_params,
)
from msgclient.errors import AuthenticationError, InvalidConfigurationError

log = logging.getLogger(__name__)

EARLY_REFRESH = 0.9  # fraction of expires_in after which the token is fetched again
HTTP_TIMEOUT = 30.0  # seconds for one request to the issuer (Java's read timeout)
DISCOVERY_PATH = "/.well-known/openid-configuration"


class AuthenticationOauth2(Authentication):
    """``AuthenticationOauth2(auth_params_string)``, as the official client: a JSON object
    with ``issuer_url`` (required), ``private_key`` (a credentials file: ``/path``,
    ``file:///path``, ``file:/path`` or ``data:application/json;base64,...``, holding JSON
    with ``client_id`` and ``client_secret``), and optional ``audience`` and ``scope``.

    An https:// issuer is checked against the client's ``tls_trust_certs_file_path`` (the
    system store by default) with hostname validation, unless
    ``tls_allow_insecure_connection``.
    """

    method_name = "token"

    def __init__(self, auth_params_string: str) -> None:
        params = parse_params(auth_params_string)
        self.issuer_url: str = params["issuer_url"]
        self.audience: str | None = params.get("audience")
        self.scope: str | None = params.get("scope")
        self._private_key: str | None = params.get("private_key")
        self._inline_credentials: tuple[str, str] | None = None
        if self._private_key is None:  # the C++ client's alternative: inline credentials
            self._inline_credentials = (params["client_id"], params["client_secret"])
        elif self._private_key.startswith("data:"):
            data_url_credentials(self._private_key)  # fail now, not at the first connect
        self._trust_certs_file: str | None = None
        self._allow_insecure = False
        self._token_endpoint: str | None = None
        self._token: str | None = None
        self._clock: Callable[[], float] = time.monotonic  # a test sets a clock it moves
        self._refresh_at = 0.0  # the clock's time after which the token is fetched again
        self._fetching: tuple[asyncio.AbstractEventLoop, asyncio.Task[str]] | None = None

    def start(self, options: TlsTrust) -> None:
        self._trust_certs_file = options.tls_trust_certs_file_path
        self._allow_insecure = options.tls_allow_insecure_connection

    async def auth_data(self) -> bytes:
        if self._token is not None and self._clock() < self._refresh_at:
            return self._token.encode()
        # One fetch at a time: connections opening together share it.
        loop = asyncio.get_running_loop()
        if self._fetching is None or self._fetching[0] is not loop or self._fetching[1].done():
            task = loop.create_task(self._fetch_token())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved
            self._fetching = (loop, task)
        token = await asyncio.shield(self._fetching[1])
        return token.encode()

    def __repr__(self) -> str:
        # Never the private key (a data: URL is the secret itself) nor the token.
        return (
            f"AuthenticationOauth2(issuer_url={self.issuer_url!r}, audience={self.audience!r}, "
            f"scope={self.scope!r})"
        )

    # -- the flow -------------------------------------------------------------------------

    async def _fetch_token(self) -> str:
        client_id, client_secret = self._credentials()
        endpoint = self._token_endpoint or await self._discover()
        form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
        }
        if self.audience:
            form["audience"] = self.audience
        if self.scope:
            form["scope"] = self.scope
        started = self._clock()
        log.debug("fetching an OAuth2 token from %s", endpoint)
        response = await self._request(
            "POST",
            endpoint,
            body=urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if response.status != 200:
            raise self._error(
                f"the token endpoint {endpoint} answered HTTP {response.status}"
                f"{_oauth_error(response.body)}"
            )
        document = self._json(response, f"the token endpoint {endpoint}")
        token = document.get("access_token")
        if not isinstance(token, str) or not token:
            raise self._error(f"the token endpoint {endpoint} gave no access_token")
        expires_in = _seconds(document.get("expires_in"))
        # No lifetime given: fetched again at the next use, as the Java client does.
        self._refresh_at = started + (expires_in or 0.0) * EARLY_REFRESH
        self._token = token
        log.debug("OAuth2 token from %s, expires_in %s", endpoint, expires_in)
        return token

    async def _discover(self) -> str:
        url = self.issuer_url.rstrip("/") + DISCOVERY_PATH
        response = await self._request("GET", url)
        if response.status != 200:
            raise self._error(f"the discovery document {url} answered HTTP {response.status}")
        endpoint = self._json(response, f"the discovery document {url}").get("token_endpoint")
        if not isinstance(endpoint, str) or urlsplit(endpoint).scheme not in ("http", "https"):
            raise self._error(f"the discovery document {url} has no http(s) token_endpoint")
        self._token_endpoint = endpoint
        return endpoint

    def _credentials(self) -> tuple[str, str]:
        """client_id and client_secret, read again each time (the file may be rotated)."""
        if self._inline_credentials is not None:
            return self._inline_credentials
        assert self._private_key is not None
        try:
            if self._private_key.startswith("data:"):
                return data_url_credentials(self._private_key)
            path = key_file_path(self._private_key)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise InvalidConfigurationError(
                    f"cannot read the private_key file {str(path)!r}: {type(error).__name__}"
                ) from error
            return credentials_from_json(text, f"the private_key file {str(path)!r}")
        except InvalidConfigurationError as error:
            raise self._error(str(error)) from error

    async def _request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> http.HttpResponse:
        try:
            return await http.request(
                method,
                url,
                body=body,
                headers={"Accept": "application/json", **(headers or {})},
                ssl_context=self._ssl_context,
                timeout=HTTP_TIMEOUT,
            )
        except http.HttpError as error:
            raise self._error(f"{method} {url} failed: {error}") from error

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self._trust_certs_file)
        if self._allow_insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _json(self, response: http.HttpResponse, source: str) -> dict[str, Any]:
        try:
            document = json.loads(response.body)
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise self._error(f"{source} did not answer a JSON object")
        return document

    def _error(self, what: str) -> AuthenticationError:
        return AuthenticationError(f"OAuth2 issuer {self.issuer_url}: {what}")


def _seconds(value: object) -> float | None:
    """``expires_in``: a number, or a numeric string (some issuers send one)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 < seconds < float("inf") else None


def _oauth_error(body: bytes) -> str:
    """RFC 6749's error code and description, when the body has them (no secrets)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return ""
    description = document.get("error_description")
    text = document["error"] + (f" ({description})" if isinstance(description, str) else "")
    return f": {text[:200]}"
