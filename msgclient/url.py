"""Service URL parsing: ``scheme://host[:port][,host[:port]...][/path]``."""

from __future__ import annotations

import attrs

from msgclient.errors import InvalidServiceUrlError


@attrs.frozen
class ServiceUrl:
    """A parsed service URL. ``port`` is None where the URL gave none (the adapter's default)."""

    scheme: str
    hosts: tuple[tuple[str, int | None], ...]
    raw: str

    def with_default_port(self, port: int) -> tuple[tuple[str, int], ...]:
        return tuple((host, p if p is not None else port) for host, p in self.hosts)


def parse_service_url(url: str) -> ServiceUrl:
    """Parse ``url``; a bad URL raises InvalidServiceUrlError naming what is wrong."""
    if not isinstance(url, str):
        raise InvalidServiceUrlError(f"service URL must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise InvalidServiceUrlError(
            f"service URL {url!r} has no scheme: expected e.g. 'pulsar://host:6650'"
        )
    authority = rest.split("/", 1)[0]
    if not authority:
        raise InvalidServiceUrlError(f"service URL {url!r} names no host")
    hosts = tuple(_parse_host(url, item) for item in authority.split(","))
    return ServiceUrl(scheme=scheme.lower(), hosts=hosts, raw=url)


def _parse_host(url: str, item: str) -> tuple[str, int | None]:
    if item.startswith("["):  # IPv6 literal: [::1]:6650
        host, bracket, tail = item[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise InvalidServiceUrlError(f"service URL {url!r}: bad IPv6 host {item!r}")
        port_text = tail[1:] if tail else ""
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise InvalidServiceUrlError(f"service URL {url!r}: empty host in {item!r}")
    if not port_text:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidServiceUrlError(
            f"service URL {url!r}: port {port_text!r} is not a number from 1 to 65535"
        )
    return host, int(port_text)
