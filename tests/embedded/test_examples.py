"""The example scripts run as a user runs them, against both embedded brokers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from msgclient.embedded import KafkaBroker, PulsarBroker

EXAMPLES = Path(__file__).parents[2] / "examples"


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("broker_name", ["pulsar_broker", "kafka_broker"])
def test_produce_then_consume_scripts(
    broker_name: str, topic: str, request: pytest.FixtureRequest
) -> None:
    broker: PulsarBroker | KafkaBroker = request.getfixturevalue(broker_name)
    url = broker.service_url
    out = run("produce.py", url, topic, "--count", "500", "--key-space", "7")
    assert "sent 500 messages" in out
    out = run("consume.py", url, topic, "sub", "--quiet", "--idle-ms", "1500")
    assert "received 500 messages" in out
