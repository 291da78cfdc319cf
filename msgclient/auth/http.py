"""A minimal HTTP/1.1 client on asyncio streams, for the OAuth2 issuer.

One request per connection (``Connection: close``), bodies of a few KiB: enough for an
OpenID discovery document and a token endpoint, without a new dependency.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import attrs

from msgclient._version import __version__

MAX_RESPONSE_BYTES = 1024 * 1024
USER_AGENT = f"msgclient/{__version__}"


class HttpError(Exception):
    """The request failed before a complete response arrived (the text says why)."""


@attrs.frozen
class HttpResponse:
    status: int
    body: bytes


async def request(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    ssl_context: Callable[[], ssl.SSLContext],
    timeout: float,
) -> HttpResponse:
    """Send one request and read the whole response within ``timeout`` seconds.

    ``ssl_context`` is called for an https:// URL only (so a bad CA file fails only there).
    """
    parts = urlsplit(url)
    try:
        explicit_port = parts.port
    except ValueError:  # not a number, or out of range
        explicit_port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or explicit_port == -1:
        raise HttpError(f"not an http(s) URL: {url}")
    secure = parts.scheme == "https"
    host = parts.hostname
    port = explicit_port or (443 if secure else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = f"[{host}]" if ":" in host else host
    if explicit_port is not None:
        host_header += f":{explicit_port}"
    lines = [
        f"{method} {target} HTTP/1.1",
        f"Host: {host_header}",
        f"User-Agent: {USER_AGENT}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in (headers or {}).items()),
    ]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=ssl_context() if secure else None
            )
            try:
                writer.write(head + (body or b""))
                raw = b""
                while len(raw) <= MAX_RESPONSE_BYTES and (chunk := await reader.read(65536)):
                    raw += chunk
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
    except TimeoutError:
        raise HttpError(f"no response within {timeout:g}s") from None
    except (OSError, ssl.SSLError) as error:  # refused, unreachable, TLS failure
        raise HttpError(f"{type(error).__name__}: {error}") from error
    if len(raw) > MAX_RESPONSE_BYTES:
        raise HttpError(f"response larger than {MAX_RESPONSE_BYTES} bytes")
    return _parse(raw)


def _parse(raw: bytes) -> HttpResponse:
    head, sep, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not sep or not version.startswith("HTTP/") or not code.isdigit():
        raise HttpError("malformed HTTP response")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    elif "content-length" in headers:
        length = int(headers["content-length"]) if headers["content-length"].isdigit() else -1
        if length < 0 or len(body) < length:
            raise HttpError("truncated HTTP response")
        body = body[:length]
    return HttpResponse(int(code), body)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise HttpError("malformed chunked HTTP response") from None
        if not sep or len(data) < size:
            raise HttpError("truncated chunked HTTP response")
        if size == 0:
            return bytes(out)
        out += data[:size]
        data = data[size + 2 :]
