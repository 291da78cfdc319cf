"""AuthenticationToken: a token (a JWT, usually) sent as the credentials."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from msgclient.auth.base import Authentication
from msgclient.errors import AuthenticationError, InvalidConfigurationError

TokenSupplier = Callable[[], str | Awaitable[str]]


class AuthenticationToken(Authentication):
    """``AuthenticationToken(token)``: ``token`` is the token string, or a callable that
    returns a fresh one (a plain function or a coroutine function), as the official client.

    A string may also use the Java client's parameter prefixes: ``"token:<token>"``,
    ``"file:///path"`` (read at each connection, so a rotated file is picked up) and
    ``"env:NAME"`` (an environment variable, read at each connection).
    """

    method_name = "token"

    def __init__(self, token: str | TokenSupplier) -> None:
        self._supplier: TokenSupplier | None = None
        self._token: str | None = None
        self._path: Path | None = None
        self._env: str | None = None
        if callable(token):
            self._supplier = token
        elif not isinstance(token, str) or not token:
            # Names the type only: a misplaced value may well be a secret.
            raise InvalidConfigurationError(
                "AuthenticationToken token is invalid: expected a non-empty str or a callable "
                f"returning str, not {type(token).__name__}"
            )
        elif token.startswith("file:"):
            self._path = _file_path(token)
        elif token.startswith("env:"):
            self._env = _non_empty_param(token.removeprefix("env:"), "env:")
        else:
            self._token = _non_empty_param(token.removeprefix("token:"), "token:")

    async def auth_data(self) -> bytes:
        return (await self._current()).encode()

    async def _current(self) -> str:
        if self._token is not None:
            return self._token
        if self._path is not None:
            return _non_empty(self._read_file(self._path), f"the token file {str(self._path)!r}")
        if self._env is not None:
            return _non_empty(os.environ.get(self._env, "").strip(), f"${self._env}")
        assert self._supplier is not None
        return _non_empty(await self._call_supplier(self._supplier), "the token supplier")

    @staticmethod
    def _read_file(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise AuthenticationError(
                f"cannot read the token file {str(path)!r}: {type(error).__name__}"
            ) from error

    @staticmethod
    async def _call_supplier(supplier: TokenSupplier) -> str:
        try:
            token = supplier()
            if inspect.isawaitable(token):
                token = await token
        except Exception as error:
            # Its text is the application's own words (the token is never in them): kept,
            # as the official client keeps it.
            raise AuthenticationError(
                f"the token supplier raised {type(error).__name__}: {error}"
            ) from error
        if not isinstance(token, str):
            raise AuthenticationError(
                f"the token supplier returned {type(token).__name__}, expected str"
            )
        return token

    def __repr__(self) -> str:
        if self._path is not None:
            return f"AuthenticationToken(file={str(self._path)!r})"
        if self._env is not None:
            return f"AuthenticationToken(env={self._env!r})"
        if self._supplier is not None:
            return "AuthenticationToken(<token supplier>)"
        return "AuthenticationToken(<token hidden>)"


def _file_path(url: str) -> Path:
    """``file:///path`` or ``file:/path`` (Java's URI forms) as a local path."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.netloc not in ("", "localhost") or not path:
        raise InvalidConfigurationError(
            f"AuthenticationToken file URL {url!r} is invalid: expected file:///absolute/path"
        )
    return Path(path)


def _non_empty(token: str, source: str) -> str:
    if not token:
        raise AuthenticationError(f"{source} gave an empty token")
    return token


def _non_empty_param(value: str, prefix: str) -> str:
    if not value:
        raise InvalidConfigurationError(f"AuthenticationToken {prefix!r} is followed by nothing")
    return value
