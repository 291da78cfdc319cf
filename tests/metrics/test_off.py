"""Without the telemetry options a client imports no opentelemetry module and makes the
plain producer and consumer classes; bad options are refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.metrics import MeterProvider

import msgclient
from msgclient.embedded import PulsarBroker

WORKLOAD = textwrap.dedent(
    """
    import asyncio, sys
    import msgclient

    async def main(url: str) -> None:
        async with msgclient.Client(url) as client:
            consumer = await client.subscribe(sys.argv[2], "off")
            producer = await client.create_producer(sys.argv[2])
            await producer.send(b"plain")
            consumer.acknowledge(await consumer.receive(10_000))
            assert type(producer) is msgclient.Producer, type(producer)
            assert type(consumer) is msgclient.Consumer, type(consumer)
            print(producer.stats().messages_sent, consumer.stats().received)

    asyncio.run(asyncio.wait_for(main(sys.argv[1]), 10))
    print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
    """
)


def test_a_client_without_the_options_imports_no_opentelemetry(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WORKLOAD, pulsar_broker.service_url, topic],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["1 1", "[]"]


@pytest.mark.parametrize(
    "options",
    [{"meter_provider": "yes"}, {"tracer_provider": MeterProvider()}, {"meter_provider": 1}],
    ids=["a str", "a meter provider as tracer provider", "an int"],
)
def test_a_bad_provider_is_refused(options: dict[str, object]) -> None:
    with pytest.raises(msgclient.InvalidConfigurationError, match="OpenTelemetry provider"):
        msgclient.ClientOptions(**options)  # type: ignore[arg-type]


def test_true_means_the_global_providers() -> None:
    options = msgclient.ClientOptions(meter_provider=True, tracer_provider=True)
    assert (options.meter_provider, options.tracer_provider) == (True, True)
