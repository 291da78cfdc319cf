"""A partition producer's counters on a fake clock: what each receipt adds, the send
latency from the batch's close, the per-batch hook that feeds the histograms."""

from __future__ import annotations

import pytest

from msgclient.errors import BrokerError
from tests.unit.fakes import FakeScheduler
from tests.unit.test_core_partition_producer import Harness, settled


async def test_each_receipt_adds_its_batch_once() -> None:
    clock = FakeScheduler()
    h = Harness(clock=clock, batching_enabled=False)
    await h.start()
    batches: list[tuple[float, int]] = []
    h.producer.counters.on_batch_sent = lambda latency, count: batches.append((latency, count))
    futures = [h.send(b"x" * size) for size in (10, 20, 30)]
    before = h.producer.stats()
    assert (before.pending_messages, before.pending_bytes, before.messages_sent) == (3, 60, 0)

    clock.advance(0.25)
    h.transport.receipt(0)
    clock.advance(0.5)
    h.transport.receipt(1)
    h.transport.events.on_send_error(2, BrokerError("NotAllowedError", "refused"))
    await settled(*futures)

    stats = h.producer.stats()
    assert (stats.messages_sent, stats.bytes_sent, stats.batches_sent) == (2, 30, 2)
    assert (stats.send_errors, stats.pending_messages, stats.pending_bytes) == (1, 0, 0)
    assert stats.send_latency_sum == pytest.approx(1.0)  # 0.25 + 0.75, each from its close
    assert stats.send_latency_max == pytest.approx(0.75)
    assert (stats.topic, stats.partition, stats.reconnects) == (h.producer.topic, -1, 0)
    assert batches == [(pytest.approx(0.25), 1), (pytest.approx(0.75), 1)]
    await h.producer.close(0)


async def test_a_batch_counts_its_messages_and_bytes_at_its_receipt() -> None:
    clock = FakeScheduler()
    h = Harness(clock=clock, batching_max_messages=4, batching_max_publish_delay_ms=10_000)
    await h.start()
    futures = [h.send(b"abcd") for _ in range(4)]  # the fourth closes the batch
    clock.advance(0.1)
    h.transport.receipt(0, 3)
    await settled(*futures)
    stats = h.producer.stats()
    assert (stats.messages_sent, stats.bytes_sent, stats.batches_sent) == (4, 16, 1)
    assert stats.send_latency_max == pytest.approx(0.1)
    await h.producer.close(0)
