"""Client: the entry point. Picks the protocol adapter from the service URL's scheme."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from msgclient.adapter import ProducerEvents, ProducerTransport, ProtocolBackend, load_backend
from msgclient.closing import AsyncClosing
from msgclient.core.backoff import Backoff
from msgclient.core.limits import Limit
from msgclient.core.partition_producer import PartitionProducer
from msgclient.core.routing import make_router
from msgclient.errors import AlreadyClosedError
from msgclient.options import ClientOptions, ProducerOptions, build
from msgclient.producer import Producer
from msgclient.url import parse_service_url


class Client(AsyncClosing):
    """A client for one cluster: ``Client("pulsar://localhost:6650", **options)``.

    Options are those of ``ClientOptions``; a bad URL, an unknown scheme or a bad option
    raises at once. Connections open on first use. Use ``async with`` or ``await close()``.
    """

    def __init__(self, service_url: str, **options: Any) -> None:
        self.service_url = parse_service_url(service_url)
        self.options = build(ClientOptions, "client", options)
        self._backend: ProtocolBackend = load_backend(self.service_url, self.options)
        self._memory = Limit(self.options.memory_limit)
        self._producers: set[Producer] = set()
        self._closed = False

    @property
    def memory_used(self) -> int:
        """Bytes of message payload held by this client's producers right now."""
        return self._memory.used

    async def create_producer(self, topic: str, **options: Any) -> Producer:
        """Create a producer on ``topic`` (options: ``ProducerOptions``).

        Returns once the producer is registered on every partition; raises if the broker
        cannot be reached or refuses it.
        """
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        producer_options = build(ProducerOptions, "producer", options)
        topic = self._backend.normalize_topic(topic)
        partitions = await self._backend.partition_count(topic)
        per_partition_limit = producer_options.max_pending_messages
        across = producer_options.max_pending_messages_across_partitions
        if partitions and per_partition_limit and across:
            per_partition_limit = max(1, min(per_partition_limit, across // partitions))
        names = (
            [(topic, -1)]
            if partitions == 0
            else [(self._backend.partition_name(topic, i), i) for i in range(partitions)]
        )
        members = [
            PartitionProducer(
                name,
                producer_options,
                self._memory,
                self._transport_factory(name, index, producer_options),
                Backoff(
                    self.options.initial_backoff_interval_ms / 1000,
                    self.options.max_backoff_interval_ms / 1000,
                ),
                per_partition_limit,
            )
            for name, index in names
        ]
        timeout = self.options.operation_timeout_seconds
        results = await asyncio.gather(*(m.start(timeout) for m in members), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(m.close(0) for m in members), return_exceptions=True)
            raise errors[0]
        send_timeout = producer_options.send_timeout_millis / 1000
        producer = Producer(
            topic,
            producer_options,
            members,
            make_router(producer_options, partitions) if partitions else None,
            self._memory,
            close_timeout=send_timeout or self.options.operation_timeout_seconds,
            on_closed=self._producers.discard,
        )
        self._producers.add(producer)
        return producer

    def _transport_factory(
        self, topic: str, partition: int, options: ProducerOptions
    ) -> Callable[[ProducerEvents], ProducerTransport]:
        def factory(events: ProducerEvents) -> ProducerTransport:
            return self._backend.producer_transport(topic, partition, options, events)

        return factory

    async def close(self) -> None:
        """Close every producer (flushing them), then every connection."""
        if self._closed:
            return
        self._closed = True
        producers = list(self._producers)
        await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)
        await self._backend.close()
