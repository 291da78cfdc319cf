"""Snapshots of the counters that producers, consumers and the client keep.

Every counter is a plain integer attribute of the core's partition producer or consumer,
incremented where the event happens, once per batch or dispatch where it can be (a
receipt adds its batch's message count and bytes at once). ``stats()`` reads them into
these frozen objects; the OpenTelemetry instruments (``msgclient.telemetry``) read the
same snapshots when a reader collects, so counting costs nothing more with metrics on.
Counters start at 0 when the producer or consumer is created (docs/metrics.md).
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class PartitionProducerStats:
    """The counters of one partition's producer (the topic's own if not partitioned)."""

    topic: str  # the topic, not the partition's name
    partition: int  # -1: the topic is not partitioned
    messages_sent: int  # confirmed by the broker
    bytes_sent: int  # payload bytes confirmed (message values, before compression)
    send_errors: int  # messages failed (timeout, refusal, closed)
    batches_sent: int  # confirmed batches (an unbatched message is a batch of one)
    pending_messages: int  # accepted, not yet confirmed or failed
    pending_bytes: int  # their payload bytes
    send_latency_sum: float  # seconds from each batch's close to its receipt, added up
    send_latency_max: float  # the longest of them
    reconnects: int  # re-registrations after a lost connection


@attrs.frozen(kw_only=True)
class ProducerStats:
    """A snapshot of a producer: the sums over its partitions, and each partition's."""

    topic: str
    messages_sent: int
    bytes_sent: int
    send_errors: int
    batches_sent: int
    pending_messages: int
    pending_bytes: int
    send_latency_sum: float
    send_latency_max: float
    reconnects: int
    partitions: tuple[PartitionProducerStats, ...]

    @property
    def mean_batch_size(self) -> float:
        """Messages per confirmed batch (0.0 before the first)."""
        return self.messages_sent / self.batches_sent if self.batches_sent else 0.0

    @property
    def mean_send_latency(self) -> float:
        """Seconds from a batch's close to its receipt, on average (0.0 before the first)."""
        return self.send_latency_sum / self.batches_sent if self.batches_sent else 0.0

    @classmethod
    def of(cls, topic: str, partitions: list[PartitionProducerStats]) -> ProducerStats:
        return cls(
            topic=topic,
            messages_sent=sum(p.messages_sent for p in partitions),
            bytes_sent=sum(p.bytes_sent for p in partitions),
            send_errors=sum(p.send_errors for p in partitions),
            batches_sent=sum(p.batches_sent for p in partitions),
            pending_messages=sum(p.pending_messages for p in partitions),
            pending_bytes=sum(p.pending_bytes for p in partitions),
            send_latency_sum=sum(p.send_latency_sum for p in partitions),
            send_latency_max=max((p.send_latency_max for p in partitions), default=0.0),
            reconnects=sum(p.reconnects for p in partitions),
            partitions=tuple(partitions),
        )


@attrs.frozen(kw_only=True)
class PartitionConsumerStats:
    """The counters of one partition's subscription (the topic's own if not partitioned)."""

    topic: str  # the topic, not the partition's name
    partition: int  # -1: the topic is not partitioned
    received: int  # messages that arrived from the broker (duplicates included)
    bytes_received: int  # their payload bytes (message values, decompressed)
    acknowledged: int  # messages acknowledged (a cumulative ack counts one)
    negatively_acknowledged: int
    redeliveries_requested: int  # messages asked for again (nacks, ack timeouts come due)
    dead_lettered: int  # messages sent to the dead-letter topic (and acknowledged)
    reconnects: int  # resubscriptions after a lost connection
    permits_granted: int  # on the current connection


@attrs.frozen(kw_only=True)
class ConsumerStats:
    """A snapshot of a consumer: the sums over its partitions, and each partition's."""

    received: int
    acknowledged: int
    negatively_acknowledged: int
    permits_granted: int  # on the current connections
    queue_depth: int  # messages waiting for receive()
    bytes_received: int
    redeliveries_requested: int
    dead_lettered: int
    reconnects: int
    rebalances: int  # Kafka: group joins completed (the first one included); 0 on Pulsar
    subscription: str
    partitions: tuple[PartitionConsumerStats, ...]

    @classmethod
    def of(
        cls,
        subscription: str,
        partitions: list[PartitionConsumerStats],
        queue_depth: int,
        rebalances: int,
    ) -> ConsumerStats:
        return cls(
            received=sum(p.received for p in partitions),
            acknowledged=sum(p.acknowledged for p in partitions),
            negatively_acknowledged=sum(p.negatively_acknowledged for p in partitions),
            permits_granted=sum(p.permits_granted for p in partitions),
            queue_depth=queue_depth,
            bytes_received=sum(p.bytes_received for p in partitions),
            redeliveries_requested=sum(p.redeliveries_requested for p in partitions),
            dead_lettered=sum(p.dead_lettered for p in partitions),
            reconnects=sum(p.reconnects for p in partitions),
            rebalances=rebalances,
            subscription=subscription,
            partitions=tuple(partitions),
        )


@attrs.frozen(kw_only=True)
class ClientStats:
    """A snapshot of a client."""

    connections_open: int  # broker connections open now
    connections_opened: int  # opened since the client was created (reconnections too)
    producers: int  # open producers (dead-letter producers included)
    consumers: int  # open consumers and readers
    memory_used: int  # payload bytes its producers hold (memory_limit counts these)
    reconnects: int  # re-registrations of its open producers and consumers
