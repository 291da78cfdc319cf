"""``Authentication(plugin, params)``: the official client's built-in plugin names work,
and an unknown plugin (a C++ library to load) fails the first connection with
AuthenticationError, on both modules. (pulsar-lite accepts any token: brokers.md.)"""

from __future__ import annotations

from types import ModuleType

import pytest

from msgclient.embedded import PulsarBroker
from tests.compat.conftest import QUIET, RECEIVE_MS


@pytest.mark.parametrize(
    "plugin", ["token", "org.apache.pulsar.client.impl.auth.AuthenticationToken"]
)
def test_a_built_in_plugin_name_authenticates(
    pulsar_module: ModuleType, pulsar_broker: PulsarBroker, topic: str, plugin: str
) -> None:
    pulsar = pulsar_module
    client = pulsar.Client(
        pulsar_broker.service_url,
        authentication=pulsar.Authentication(plugin, "token:any-token"),
        operation_timeout_seconds=10,
        logger=QUIET,
    )
    try:
        consumer = client.subscribe(topic, "sub")
        client.create_producer(topic).send(b"hello")
        assert consumer.receive(RECEIVE_MS).data() == b"hello"
    finally:
        client.close()


def test_a_plugin_library_that_cannot_load_fails_with_authentication_error(
    pulsar_module: ModuleType, pulsar_broker: PulsarBroker, topic: str
) -> None:
    pulsar = pulsar_module
    client = pulsar.Client(
        pulsar_broker.service_url,
        authentication=pulsar.Authentication("someoldjunk.so", "blah"),
        operation_timeout_seconds=5,
        logger=QUIET,
    )
    try:
        with pytest.raises(pulsar.AuthenticationError):
            client.subscribe(topic, "sub")
    finally:
        client.close()


async def test_the_plugin_parameters_become_the_providers() -> None:
    from msgclient import auth, pulsar_compat

    token = pulsar_compat.Authentication("token", "token:abc").auth
    assert isinstance(token, auth.AuthenticationToken) and await token.auth_data() == b"abc"
    tls = pulsar_compat.Authentication("tls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem").auth
    assert tls.client_certificate == ("/c.pem", "/k.pem")
    basic = pulsar_compat.Authentication("basic", '{"username": "u", "password": "p"}').auth
    assert await basic.auth_data() == b"u:p"
    with pytest.raises(pulsar_compat.InvalidConfiguration, match="tlsCertFile"):
        pulsar_compat.Authentication("tls", "nothing")
