"""The parameters of AuthenticationOauth2: its JSON string and the credentials file.

Every message names a key or a file, never a value: the parameters may hold a secret.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from urllib.parse import unquote, urlsplit

from msgclient.errors import InvalidConfigurationError

# Java's camelCase parameter names, accepted as aliases of the Python client's.
ALIASES = {"issuerUrl": "issuer_url", "privateKey": "private_key"}


def parse_params(auth_params_string: str) -> dict[str, str]:
    """The JSON parameters by the Python client's names, empty ones left out, checked."""
    if not isinstance(auth_params_string, str):
        raise InvalidConfigurationError(
            "AuthenticationOauth2 auth_params_string is invalid: expected a JSON str, "
            f"not {type(auth_params_string).__name__}"
        )
    try:
        raw = json.loads(auth_params_string)
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        raise InvalidConfigurationError(
            "AuthenticationOauth2 auth_params_string is invalid: expected a JSON object"
        )
    params: dict[str, str] = {}
    for key, value in raw.items():
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise InvalidConfigurationError(
                f"AuthenticationOauth2 parameter {key!r} is invalid: expected a str"
            )
        name = str(key)
        params[ALIASES.get(name, name)] = value
    if params.get("type", "client_credentials") != "client_credentials":
        raise InvalidConfigurationError(
            "AuthenticationOauth2 parameter 'type' is invalid: only 'client_credentials'"
        )
    issuer = params.get("issuer_url", "")
    parts = urlsplit(issuer)
    # No user:password@ either: the issuer URL is shown in reprs and error messages.
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise InvalidConfigurationError(
            "AuthenticationOauth2 parameter 'issuer_url' is invalid: expected an http(s) URL "
            "without credentials in it"
        )
    if "private_key" not in params and not ("client_id" in params and "client_secret" in params):
        raise InvalidConfigurationError(
            "AuthenticationOauth2 needs 'private_key' (a credentials file or data: URL)"
        )
    return params


def key_file_path(private_key: str) -> Path:
    if private_key.startswith("file:"):
        parts = urlsplit(private_key)
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise InvalidConfigurationError("the private_key file URL is invalid")
        return Path(unquote(parts.path))
    return Path(private_key)


def data_url_credentials(url: str) -> tuple[str, str]:
    header, _, encoded = url.removeprefix("data:").partition(",")
    if not header.endswith(";base64"):
        raise InvalidConfigurationError(
            "the private_key data: URL is invalid: expected data:application/json;base64,..."
        )
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidConfigurationError(
            "the private_key data: URL is invalid: its content is not base64 UTF-8"
        ) from None
    return credentials_from_json(text, "the private_key data: URL")


def credentials_from_json(text: str, source: str) -> tuple[str, str]:
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise InvalidConfigurationError(f"{source} is not a JSON object")
    client_id, secret = document.get("client_id"), document.get("client_secret")
    if not isinstance(client_id, str) or not isinstance(secret, str) or not client_id:
        raise InvalidConfigurationError(f"{source} needs client_id and client_secret strings")
    return client_id, secret
