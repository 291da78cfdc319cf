"""Service URL parsing: good URLs and the errors that name what is wrong with bad ones."""

from __future__ import annotations

from typing import Any

import pytest

from msgclient.errors import InvalidConfigurationError, InvalidServiceUrlError
from msgclient.url import ServiceUrl, parse_service_url


@pytest.mark.parametrize(
    ("url", "scheme", "hosts"),
    [
        ("pulsar://localhost:6650", "pulsar", (("localhost", 6650),)),
        ("pulsar://localhost", "pulsar", (("localhost", None),)),
        ("pulsar+ssl://broker.example.com:6651", "pulsar+ssl", (("broker.example.com", 6651),)),
        ("PULSAR://Host:1", "pulsar", (("Host", 1),)),  # the scheme is case-insensitive
        ("pulsar://a:1,b:2,c", "pulsar", (("a", 1), ("b", 2), ("c", None))),
        ("pulsar://127.0.0.1:6650/", "pulsar", (("127.0.0.1", 6650),)),
        ("pulsar://h:6650/some/path", "pulsar", (("h", 6650),)),
        ("pulsar://[::1]:6650", "pulsar", (("::1", 6650),)),
        ("pulsar://[fe80::1]", "pulsar", (("fe80::1", None),)),
        ("kafka://k1:9092,k2:9092", "kafka", (("k1", 9092), ("k2", 9092))),
        ("pulsar://h:65535", "pulsar", (("h", 65535),)),
    ],
)
def test_good_urls(url: str, scheme: str, hosts: tuple[tuple[str, int | None], ...]) -> None:
    parsed = parse_service_url(url)
    assert parsed == ServiceUrl(scheme=scheme, hosts=hosts, raw=url)


def test_empty_port_means_the_default_port() -> None:
    assert parse_service_url("pulsar://host:").with_default_port(6650) == (("host", 6650),)


def test_default_port_fills_only_the_missing_ports() -> None:
    parsed = parse_service_url("pulsar://a,b:7000,[::1]")
    assert parsed.with_default_port(6650) == (("a", 6650), ("b", 7000), ("::1", 6650))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("localhost:6650", "has no scheme"),
        ("://localhost:6650", "has no scheme"),
        ("", "has no scheme"),
        ("pulsar://", "names no host"),
        ("pulsar:///path", "names no host"),
        ("pulsar://:6650", "empty host"),
        ("pulsar://a:1,,b:2", "empty host"),
        ("pulsar://host:port", "port 'port' is not a number from 1 to 65535"),
        ("pulsar://host:0", "port '0' is not a number"),
        ("pulsar://host:65536", "port '65536' is not a number"),
        ("pulsar://host:-1", "port '-1' is not a number"),
        ("pulsar://[::1", "bad IPv6 host"),
        ("pulsar://[::1]6650", "bad IPv6 host"),
    ],
)
def test_bad_urls_name_the_problem(url: str, problem: str) -> None:
    with pytest.raises(InvalidServiceUrlError, match=problem) as caught:
        parse_service_url(url)
    assert repr(url) in str(caught.value)  # the whole URL is quoted back


@pytest.mark.parametrize("url", [None, 6650, b"pulsar://localhost"])
def test_non_string_url_is_rejected(url: Any) -> None:
    with pytest.raises(InvalidServiceUrlError, match="must be a string"):
        parse_service_url(url)


def test_url_errors_are_configuration_errors() -> None:
    with pytest.raises(InvalidConfigurationError):
        parse_service_url("nope")
    with pytest.raises(ValueError):
        parse_service_url("nope")
