"""What the metrics tests share: brokers by name, bounded waits, the SDK's in-memory
reader and exporter read into plain values."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.kafka.helpers import create_topic

TIMEOUT = 10.0
BROKERS = ["pulsar", "kafka"]
# Kafka: tansu holds a JoinGroup for about half the session timeout; short sessions.
KAFKA_GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "session_timeout_ms": 2000,
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 3000,
    "fetch_max_wait_ms": 50,
}
# Pulsar: Shared (pulsar-lite redelivers negative acks on unpartitioned Shared only).
PULSAR_SHARED: dict[str, Any] = {"consumer_type": msgclient.ConsumerType.Shared}


async def broker_url(
    request: pytest.FixtureRequest, broker: str, topic: str, partitions: int
) -> str:
    """The service URL of the session's ``broker``; on Kafka ``topic`` is created with
    ``partitions`` partitions (Pulsar topics here are not partitioned)."""
    if broker == "pulsar":
        pulsar: PulsarBroker = request.getfixturevalue("pulsar_broker")
        return pulsar.service_url
    kafka: KafkaBroker = request.getfixturevalue("kafka_broker")
    await create_topic(kafka.bootstrap_servers, topic, partitions)
    return kafka.service_url


def consumer_options(broker: str) -> dict[str, Any]:
    options = KAFKA_GROUP if broker == "kafka" else PULSAR_SHARED
    return {**options, "initial_position": msgclient.InitialPosition.Earliest}


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(0.005)


def meter_provider() -> tuple[MeterProvider, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def tracer_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


Points = dict[str, dict[frozenset[tuple[str, Any]], Any]]


def collect(reader: InMemoryMetricReader) -> Points:
    """Every metric's data points, by name, then by attribute set: a number (sums and
    gauges) or (count, sum) (histograms)."""
    points: Points = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                by_attributes = points.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    key = frozenset((point.attributes or {}).items())
                    if isinstance(point, HistogramDataPoint):
                        by_attributes[key] = (point.count, point.sum)
                    else:
                        by_attributes[key] = point.value  # type: ignore[union-attr]
    return points


def total(points: Points, name: str, wanted: dict[str, str] | None = None) -> Any:
    """The sum over ``name``'s points whose attributes include ``wanted``."""
    wanted = wanted or {}
    matching = [
        value for key, value in points.get(name, {}).items() if wanted.items() <= dict(key).items()
    ]
    assert matching, f"no {name} point with {wanted}: {points.get(name)}"
    if isinstance(matching[0], tuple):
        return tuple(map(sum, zip(*matching, strict=True)))
    return sum(matching)
