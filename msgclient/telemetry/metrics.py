"""A client's OpenTelemetry metrics: observable instruments that read the stats snapshots
(msgclient/stats.py) when a reader collects, and two histograms recorded once per
confirmed batch (its send latency and its message count). Nothing runs per message.

Names follow the OpenTelemetry messaging conventions where one fits
(``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
``messaging.client.operation.duration``), ``msgclient.*`` otherwise; the list is in
docs/metrics.md. Imported only by a client with a ``meter_provider``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from msgclient._version import __version__
from msgclient.stats import (
    ClientStats,
    ConsumerStats,
    PartitionConsumerStats,
    PartitionProducerStats,
    ProducerStats,
)

Attributes = dict[str, str]
Reading = Callable[["ClientMetrics"], Iterator[tuple[Attributes, float]]]

# The conventions' advised buckets for messaging.client.operation.duration (seconds).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
# The attribute that names a consumer's subscription, by messaging.system.
SUBSCRIPTION_ATTRIBUTE = {"kafka": "messaging.consumer.group.name"}
SEND = {"messaging.operation.name": "send"}
RECEIVE = {"messaging.operation.name": "receive"}


class ClientMetrics:
    """One client's metrics. Its stats are read at collection through the callables it
    is given; ``close()`` (the client's) ends its series."""

    def __init__(
        self,
        provider: Any,
        system: str,
        producers: Callable[[], Iterable[ProducerStats]],
        consumers: Callable[[], Iterable[ConsumerStats]],
        client: Callable[[], ClientStats],
    ) -> None:
        self.system = system
        self._subscription_key = SUBSCRIPTION_ATTRIBUTE.get(
            system, "messaging.destination.subscription.name"
        )
        self._producers = producers
        self._consumers = consumers
        self._client = client
        self._instruments = _instruments_of(
            metrics.get_meter_provider() if provider is True else provider
        )
        self._instruments.sources.add(self)

    def close(self) -> None:
        self._instruments.sources.discard(self)

    def batch_recorder(self, topic: str, partition: int) -> Callable[[float, int], None]:
        """What a partition producer calls for each confirmed batch (its
        ``on_batch_sent``): one record of each histogram."""
        attributes = {**self._partition(topic, partition), **SEND}
        duration = self._instruments.duration.record
        batch_size = self._instruments.batch_size.record

        def record(latency: float, messages: int) -> None:
            duration(latency, attributes)
            batch_size(messages, attributes)

        return record

    # -- what the instruments read ------------------------------------------------------

    def producer_rows(self) -> Iterator[tuple[Attributes, PartitionProducerStats]]:
        for stats in self._producers():
            for partition in stats.partitions:
                yield self._partition(partition.topic, partition.partition), partition

    def consumer_rows(self) -> Iterator[tuple[Attributes, PartitionConsumerStats]]:
        for stats in self._consumers():
            subscription = {self._subscription_key: stats.subscription}
            for partition in stats.partitions:
                attributes = self._partition(partition.topic, partition.partition)
                yield {**attributes, **subscription}, partition

    def subscription_rows(self) -> Iterator[tuple[Attributes, ConsumerStats]]:
        for stats in self._consumers():
            yield (
                {"messaging.system": self.system, self._subscription_key: stats.subscription},
                stats,
            )

    def client_rows(self) -> Iterator[tuple[Attributes, ClientStats]]:
        yield {"messaging.system": self.system}, self._client()

    def _partition(self, topic: str, partition: int) -> Attributes:
        attributes = {"messaging.system": self.system, "messaging.destination.name": topic}
        if partition >= 0:
            attributes["messaging.destination.partition.id"] = str(partition)
        return attributes


def _sent_messages(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
    """Confirmed messages, and failed ones with ``error.type`` (the conventions count
    every message a producer tried to send)."""
    for attributes, stats in source.producer_rows():
        yield {**attributes, **SEND}, stats.messages_sent
        if stats.send_errors:
            yield {**attributes, **SEND, "error.type": "_OTHER"}, stats.send_errors


def _consumed_messages(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
    for attributes, stats in source.consumer_rows():
        yield {**attributes, **RECEIVE}, stats.received


def _producer(field: str) -> Reading:
    def read(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
        for attributes, stats in source.producer_rows():
            yield attributes, getattr(stats, field)

    return read


def _consumer(field: str) -> Reading:
    def read(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
        for attributes, stats in source.consumer_rows():
            yield attributes, getattr(stats, field)

    return read


def _subscription(field: str) -> Reading:
    def read(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
        for attributes, stats in source.subscription_rows():
            yield attributes, getattr(stats, field)

    return read


def _client(field: str) -> Reading:
    def read(source: ClientMetrics) -> Iterator[tuple[Attributes, float]]:
        for attributes, stats in source.client_rows():
            yield attributes, getattr(stats, field)

    return read


COUNTER, UP_DOWN = "counter", "up_down"
# (name, kind, unit, description, reading)
OBSERVED: tuple[tuple[str, str, str, str, Reading], ...] = (
    ("messaging.client.sent.messages", COUNTER, "{message}",
     "Messages the broker confirmed (error.type: failed)", _sent_messages),
    ("msgclient.producer.sent.bytes", COUNTER, "By",
     "Payload bytes the broker confirmed", _producer("bytes_sent")),
    ("msgclient.producer.batches", COUNTER, "{batch}",
     "Batches the broker confirmed", _producer("batches_sent")),
    ("msgclient.producer.pending.messages", UP_DOWN, "{message}",
     "Messages accepted and not yet confirmed or failed", _producer("pending_messages")),
    ("msgclient.producer.pending.bytes", UP_DOWN, "By",
     "Payload bytes of the pending messages", _producer("pending_bytes")),
    ("msgclient.producer.reconnects", COUNTER, "{reconnect}",
     "Producer re-registrations after a lost connection", _producer("reconnects")),
    ("messaging.client.consumed.messages", COUNTER, "{message}",
     "Messages that arrived from the broker", _consumed_messages),
    ("msgclient.consumer.received.bytes", COUNTER, "By",
     "Payload bytes of the messages that arrived", _consumer("bytes_received")),
    ("msgclient.consumer.acks", COUNTER, "{message}",
     "Messages acknowledged", _consumer("acknowledged")),
    ("msgclient.consumer.nacks", COUNTER, "{message}",
     "Messages negatively acknowledged", _consumer("negatively_acknowledged")),
    ("msgclient.consumer.redeliveries", COUNTER, "{message}",
     "Messages whose redelivery was requested", _consumer("redeliveries_requested")),
    ("msgclient.consumer.dead_letters", COUNTER, "{message}",
     "Messages sent to the dead-letter topic", _consumer("dead_lettered")),
    ("msgclient.consumer.reconnects", COUNTER, "{reconnect}",
     "Resubscriptions after a lost connection", _consumer("reconnects")),
    ("msgclient.consumer.queue.messages", UP_DOWN, "{message}",
     "Messages waiting for receive()", _subscription("queue_depth")),
    ("msgclient.consumer.rebalances", COUNTER, "{rebalance}",
     "Consumer group joins completed (Kafka)", _subscription("rebalances")),
    ("msgclient.client.connections", UP_DOWN, "{connection}",
     "Broker connections open", _client("connections_open")),
    ("msgclient.client.connections.opened", COUNTER, "{connection}",
     "Broker connections opened", _client("connections_opened")),
    ("msgclient.client.memory.used", UP_DOWN, "By",
     "Payload bytes held by the producers (memory_limit)", _client("memory_used")),
    ("msgclient.client.producers", UP_DOWN, "{producer}",
     "Open producers", _client("producers")),
    ("msgclient.client.consumers", UP_DOWN, "{consumer}",
     "Open consumers and readers", _client("consumers")),
)  # fmt: skip


class _Instruments:
    """The instruments of one meter provider, shared by every client that uses it (a
    meter keeps the first instrument of a name, and its callbacks only)."""

    def __init__(self, meter: Meter) -> None:
        self.sources: weakref.WeakSet[ClientMetrics] = weakref.WeakSet()
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Seconds from a batch's close to the broker's confirmation",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.batch_size = meter.create_histogram(
            "msgclient.producer.batch.size",
            unit="{message}",
            description="Messages per confirmed batch",
        )
        for name, kind, unit, description, reading in OBSERVED:
            create = (
                meter.create_observable_counter
                if kind == COUNTER
                else meter.create_observable_up_down_counter
            )
            create(name, callbacks=[self._callback(reading)], unit=unit, description=description)

    def _callback(self, reading: Reading) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            # Equal attributes (two producers of one topic) add up: an observable
            # instrument keeps one value per attribute set.
            totals: dict[tuple[tuple[str, str], ...], float] = {}
            for source in list(self.sources):
                for attributes, value in reading(source):
                    key = tuple(sorted(attributes.items()))
                    totals[key] = totals.get(key, 0) + value
            return [Observation(value, dict(key)) for key, value in totals.items()]

        return observe


_BY_PROVIDER: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()


def _instruments_of(provider: Any) -> _Instruments:
    instruments = _BY_PROVIDER.get(provider)
    if instruments is None:
        instruments = _BY_PROVIDER[provider] = _Instruments(
            provider.get_meter("msgclient", __version__)
        )
    return instruments
