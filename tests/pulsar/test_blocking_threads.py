"""A closed or dropped blocking client leaves no thread behind (the official suite's
test_logger_thread_leaks): neither its loop's thread nor the default executor's, which
looks host names up."""

from __future__ import annotations

import gc
import threading
from types import ModuleType

import msgclient
import msgclient.blocking
from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker


def test_a_closed_blocking_client_leaves_no_thread(pulsar_broker: PulsarBroker, topic: str) -> None:
    url = f"pulsar://localhost:{pulsar_broker.port}"  # a host name: looked up in a thread
    before = threading.active_count()
    for _ in range(2):
        with msgclient.blocking.Client(url, operation_timeout_seconds=10) as client:
            client.create_producer(topic).send(b"x")
        assert threading.active_count() == before, threading.enumerate()


def test_a_dropped_blocking_client_leaves_no_thread(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """Dropped without close() (the official suite's case of close=False): once nothing
    references it, it closes and its threads end, as the official client's do."""
    url = f"pulsar://localhost:{pulsar_broker.port}"
    before = threading.active_count()

    def use_and_drop(module: ModuleType) -> None:
        client = module.Client(url, operation_timeout_seconds=10)
        client.get_topic_partitions(topic)

    for module in (msgclient.blocking, pulsar_compat):
        use_and_drop(module)
        assert threading.active_count() == before, threading.enumerate()


def test_a_producer_kept_keeps_its_dropped_client_running(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    """What the client made keeps it alive: its producer still sends after the client
    object itself is dropped, and dropping the producer too ends the threads."""
    before = threading.active_count()
    producer = msgclient.blocking.Client(pulsar_broker.service_url).create_producer(topic)
    gc.collect()
    producer.send(b"still running")
    del producer
    gc.collect()  # a producer may sit in a reference cycle: the collector ends it
    assert threading.active_count() == before, threading.enumerate()
    with msgclient.blocking.Client(pulsar_broker.service_url) as client:
        reader = client.create_reader(topic, msgclient.InitialPosition.Earliest)
        assert reader.read_next(10_000).data() == b"still running"
