"""The adapter registry: a URL scheme picks the protocol backend through entry points."""

from __future__ import annotations

from typing import Any

import pytest

from msgclient import Client
from msgclient import contract as contract_module
from msgclient.contract import ENTRY_POINT_GROUP, load_backend
from msgclient.errors import InvalidServiceUrlError, UnknownProtocolError
from msgclient.options import ClientOptions
from msgclient.url import parse_service_url
from protocols.pulsarwire.adapter import PulsarBackend


@pytest.mark.parametrize(
    ("url", "port"), [("pulsar://localhost", 6650), ("pulsar+ssl://localhost", 6651)]
)
def test_pulsar_schemes_resolve_to_the_pulsar_backend(url: str, port: int) -> None:
    backend = load_backend(parse_service_url(url), ClientOptions())
    assert isinstance(backend, PulsarBackend)
    assert backend.default_port == port


def test_unknown_scheme_lists_the_known_schemes() -> None:
    with pytest.raises(UnknownProtocolError) as caught:
        load_backend(parse_service_url("nats://localhost:4222"), ClientOptions())
    message = str(caught.value)
    assert "no protocol adapter for scheme 'nats'" in message
    assert "'nats://localhost:4222'" in message
    known = message.split("known schemes: ", 1)[1]
    assert "pulsar://" in known and "pulsar+ssl://" in known


def test_client_with_an_unknown_scheme_raises_at_once() -> None:
    with pytest.raises(UnknownProtocolError, match=r"known schemes: .*pulsar://"):
        Client("http://localhost:8080")
    # It is a URL error too, for those who catch the broader class.
    with pytest.raises(InvalidServiceUrlError):
        Client("http://localhost:8080")


class FakeEntryPoint:
    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self._target = target

    def load(self) -> Any:
        return self._target


def test_a_third_party_adapter_plugs_in_by_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Any, Any]] = []

    def toy_backend(url: Any, options: Any) -> Any:
        made.append((url, options))
        return "toy backend"

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return [FakeEntryPoint("toy", toy_backend)]

    monkeypatch.setattr(contract_module, "entry_points", entry_points)
    url = parse_service_url("toy://somewhere:1")
    options = ClientOptions()
    assert load_backend(url, options) == "toy backend"
    assert made == [(url, options)]
    with pytest.raises(UnknownProtocolError, match=r"known schemes: toy://$"):
        load_backend(parse_service_url("pulsar://localhost"), options)


def test_no_adapter_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contract_module, "entry_points", lambda *, group: [])
    with pytest.raises(UnknownProtocolError, match="known schemes: none installed"):
        load_backend(parse_service_url("pulsar://localhost"), ClientOptions())


def test_pulsar_backend_refuses_other_schemes() -> None:
    with pytest.raises(InvalidServiceUrlError, match="serves pulsar:// and pulsar\\+ssl://"):
        PulsarBackend(parse_service_url("kafka://localhost"), ClientOptions())
