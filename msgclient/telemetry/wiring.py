"""What a client's telemetry options turn on. This module imports no opentelemetry
module: ``metrics`` and ``tracing`` are imported here only for a client that asked for
them (``meter_provider``, ``tracer_provider``), so a client without either pays nothing,
per message or at start."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from msgclient.consumer import Consumer
from msgclient.core.send.partition_producer import PartitionProducer
from msgclient.options import ClientOptions
from msgclient.producer import Producer
from msgclient.stats import ClientStats, ConsumerStats, ProducerStats

if TYPE_CHECKING:
    from msgclient.telemetry.metrics import ClientMetrics
    from msgclient.telemetry.tracing import Tracing


class Telemetry:
    """A client's metrics and tracing, either or both possibly off.

    ``system`` is the messaging.system attribute (the URL scheme without ``+ssl``); the
    callables give the stats snapshots that the metrics read when collected."""

    def __init__(
        self,
        options: ClientOptions,
        system: str,
        producers: Callable[[], Iterable[ProducerStats]],
        consumers: Callable[[], Iterable[ConsumerStats]],
        client: Callable[[], ClientStats],
    ) -> None:
        self._metrics: ClientMetrics | None = None
        self._tracing: Tracing | None = None
        if options.meter_provider is not None:
            from msgclient.telemetry.metrics import ClientMetrics

            self._metrics = ClientMetrics(
                options.meter_provider, system, producers, consumers, client
            )
        if options.tracer_provider is not None:
            from msgclient.telemetry.tracing import Tracing

            self._tracing = Tracing(options.tracer_provider, system)

    def producer_members(self, members: list[PartitionProducer]) -> None:
        """New partition producers: with metrics, each records its confirmed batches."""
        if self._metrics is not None:
            for member in members:
                member.counters.on_batch_sent = self._metrics.batch_recorder(
                    member.destination, member.partition_index
                )

    def producer_type(self) -> Callable[..., Producer]:
        """The producer class to make (with its tracing, if on)."""
        if self._tracing is None:
            return Producer
        from msgclient.telemetry.traced import TracedProducer

        return functools.partial(TracedProducer, tracing=self._tracing)

    def consumer_type(self) -> Callable[..., Consumer]:
        if self._tracing is None:
            return Consumer
        from msgclient.telemetry.traced import TracedConsumer

        return functools.partial(TracedConsumer, tracing=self._tracing)

    def close(self) -> None:
        """The client closed: its metric series end."""
        if self._metrics is not None:
            self._metrics.close()
