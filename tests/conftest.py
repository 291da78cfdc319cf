"""Fixtures shared by every test: real brokers on loopback and a fresh topic name per test."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from uuid import uuid4

import pytest

from msgclient.embedded import KafkaBroker, PulsarBroker


@pytest.fixture(scope="session")
def pulsar_broker() -> Iterator[PulsarBroker]:
    """One pulsar-lite broker for the whole session; use the `topic` fixture to stay isolated."""
    with PulsarBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One tansu broker for the whole session; use the `topic` fixture to stay isolated."""
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def make_pulsar_broker() -> Iterator[Callable[..., PulsarBroker]]:
    """Start a broker of the test's own (takes PulsarBroker's arguments); stopped at teardown."""
    started: list[PulsarBroker] = []

    def make(**kwargs: Any) -> PulsarBroker:
        broker = PulsarBroker(**kwargs)
        started.append(broker)
        broker.start()
        return broker

    yield make
    for broker in started:
        broker.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses, valid for Pulsar and Kafka."""
    test_name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")[:80]
    return f"{test_name}-{uuid4().hex[:8]}"
