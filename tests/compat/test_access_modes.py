"""Producer access modes on pulsar-lite, the same program on the official client and on
pulsar_compat. pulsar-lite ignores access modes (brokers.md): a second producer in any mode
is accepted and both publish. (What each client sends: test_wire_options.py; what a broker
that enforces them does: tests/pulsar/scripted/test_access_modes.py.)"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.compat.conftest import RECEIVE_MS

MODES = ["Shared", "Exclusive", "WaitForExclusive", "ExclusiveWithFencing"]


@pytest.mark.parametrize("mode", MODES)
def test_pulsar_lite_lets_a_second_producer_in(
    pulsar_module: ModuleType, client: Any, topic: str, mode: str
) -> None:
    pulsar = pulsar_module
    access_mode = getattr(pulsar.ProducerAccessMode, mode)
    # Shared: on an Exclusive subscription pulsar-lite sometimes dispatches a message twice
    # (brokers.md), which is not what this test is about.
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    first = client.create_producer(topic, access_mode=access_mode)
    second = client.create_producer(topic, access_mode=access_mode)
    first.send(b"first")
    second.send(b"second")
    received = [consumer.receive(RECEIVE_MS).data() for _ in range(2)]
    assert received == [b"first", b"second"]
    assert first.is_connected() and second.is_connected()


def test_a_mode_that_is_no_access_mode_is_refused(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    with pytest.raises(ValueError, match="access_mode"):
        client.create_producer(topic, access_mode=1)
