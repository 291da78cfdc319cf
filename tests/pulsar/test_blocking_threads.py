"""A closed blocking client leaves no thread behind (the official suite's
test_logger_thread_leaks): neither its loop's thread nor the default executor's, which
looks host names up."""

from __future__ import annotations

import threading

import msgclient
import msgclient.blocking
from msgclient.embedded import PulsarBroker


def test_a_closed_blocking_client_leaves_no_thread(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = f"pulsar://localhost:{pulsar_broker.port}"  # a host name: looked up in a thread
    before = threading.active_count()
    for _ in range(2):
        with msgclient.blocking.Client(url, operation_timeout_seconds=10) as client:
            client.create_producer(topic).send(b"x")
        assert threading.active_count() == before, threading.enumerate()
