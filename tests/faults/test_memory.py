"""Producer memory while the broker stops reading: bounded by memory_limit, typed errors.

The proxy stops reading from the client, so its socket buffers fill and nothing is
confirmed. The client's ``memory_limit`` (8 MiB here) bounds the message payload it holds:
``block_if_queue_full=True`` makes ``send_async`` wait for room, without it ``send_async``
raises MemoryBufferIsFullError, and the send timeout fails what is pending (and frees it).

Memory is measured two ways over the time messages are pending: the peak of what Python
allocated (tracemalloc, exact and unaffected by what the allocator kept from earlier tests:
the bound is asserted on it) and the growth of this process's resident set (VmRSS, sampled
every 10 ms, reported). The bound is the limit plus 20 %: room for frame headers and a
socket's worth of bytes in flight, not for more copies of the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

import msgclient
from msgclient.embedded import PulsarBroker
from tests.faults.conftest import (
    TIMEOUT,
    Figures,
    LoopLag,
    ProxiedKafka,
    Target,
    assert_no_leaked_tasks,
    client_tasks,
    pulsar_url,
)
from tests.faults.proxy import FaultProxy, ProxiedConnection

MIB = 1024 * 1024
LIMIT = 8 * MIB
SIZE = 256 * 1024  # per message: 32 fill the limit
SEND_TIMEOUT_S = 2.0
ALLOWED_GROWTH = int(LIMIT * 1.2)

# A keepalive longer than the test: the broker that stops reading still answers nothing,
# and the client must not drop the connection (that would resend and free the buffers).
SLOW_KEEPALIVE: dict[str, Any] = {
    "keep_alive_interval_seconds": 60.0,
    "operation_timeout_seconds": 3.0,
    "initial_backoff_interval_ms": 50,
    "max_backoff_interval_ms": 500,
    "memory_limit": LIMIT,
}


def rss() -> int:
    """This process's resident set size in bytes (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class MemoryPeak:
    """Peak growth while running: of Python's allocations (tracemalloc) and of VmRSS
    (sampled every 10 ms), each over its value at the start."""

    def __init__(self) -> None:
        self.rss_baseline = self.rss_peak = 0
        self.traced_baseline = self.traced_peak = 0
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.rss_peak = max(self.rss_peak, rss())
            await asyncio.sleep(0.01)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[MemoryPeak]:
        gc.collect()
        _trim()  # freed memory kept by malloc from earlier tests would hide the RSS growth
        tracemalloc.start()
        self.traced_baseline, _ = tracemalloc.get_traced_memory()
        self.rss_baseline = self.rss_peak = rss()
        self._task = asyncio.ensure_future(self._sample())
        try:
            yield self
        finally:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self.rss_peak = max(self.rss_peak, rss())
            _, self.traced_peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()

    @property
    def traced_growth(self) -> int:
        return self.traced_peak - self.traced_baseline

    @property
    def rss_growth(self) -> int:
        return self.rss_peak - self.rss_baseline


def _trim() -> None:
    """Give the C heap's free memory back to the OS (glibc), so RSS starts from what is used."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def payload(i: int) -> bytes:
    """A fresh object per message, as an application's would be."""
    return bytes((i % 251,)) * SIZE


async def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@asynccontextmanager
async def stuck_pulsar_producer(
    proxy: FaultProxy, topic: str, block: bool
) -> AsyncIterator[tuple[msgclient.Client, msgclient.Producer, ProxiedConnection]]:
    async with msgclient.Client(pulsar_url(proxy), **SLOW_KEEPALIVE) as client:
        producer = await client.create_producer(
            topic,
            batching_enabled=False,
            block_if_queue_full=block,
            send_timeout_millis=int(SEND_TIMEOUT_S * 1000),
        )
        await asyncio.wait_for(producer.send(b"warm"), TIMEOUT)
        connection = proxy.live[-1]
        connection.stop_reading_from_client()
        yield client, producer, connection


async def fill_while_blocked(
    client: msgclient.Client, producer: msgclient.Producer, count: int
) -> tuple[list[asyncio.Future[msgclient.MessageId]], list[float], float, float]:
    """Send ``count`` messages with block_if_queue_full from a task; return the futures,
    when each ``send_async`` returned, when the memory filled and when the first pending
    message failed (the send timeout runs from the first message sent)."""
    futures: list[asyncio.Future[msgclient.MessageId]] = []
    returned_at: list[float] = []
    first_failure: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def on_done(future: asyncio.Future[msgclient.MessageId]) -> None:
        if not first_failure.done() and future.exception() is not None:
            first_failure.set_result(time.monotonic())

    async def sender() -> None:
        for i in range(count):
            future = await producer.send_async(payload(i))
            returned_at.append(time.monotonic())
            future.add_done_callback(on_done)
            futures.append(future)

    task = asyncio.ensure_future(sender())
    await wait_until(lambda: client.memory_used + SIZE > LIMIT, TIMEOUT, "the limit")
    full_at = time.monotonic()
    failed_at = await asyncio.wait_for(first_failure, SEND_TIMEOUT_S + TIMEOUT)
    await asyncio.wait_for(task, TIMEOUT)
    return futures, returned_at, full_at, failed_at


async def test_pulsar_send_async_blocks_while_memory_is_full(
    pulsar_broker: PulsarBroker,
    pulsar_proxy: FaultProxy,
    topic: str,
    figures: type[Figures],
    loop_lag: LoopLag,
) -> None:
    """block_if_queue_full: send_async waits while the limit is reached, the send timeout
    fails what is pending and frees it, and those that waited go out next."""
    count = 40  # 10 MiB: 32 fill the limit, the rest wait
    tasks_before = client_tasks()
    async with stuck_pulsar_producer(pulsar_proxy, topic, block=True) as (client, producer, stuck):
        started = time.monotonic()
        futures, returned_at, full_at, failed_at = await fill_while_blocked(client, producer, count)
        assert client.memory_used <= LIMIT
        # None returned from when the limit was reached until the send timeout failed the
        # pending messages (the waiters resume in the same loop turn as that failure).
        blocked = [t for t in returned_at if full_at < t < failed_at - 0.05]
        assert not blocked, f"{len(blocked)} send_async returned while memory was full"
        assert len(returned_at) == count
        first = futures[: LIMIT // SIZE]
        results = await asyncio.wait_for(asyncio.gather(*first, return_exceptions=True), TIMEOUT)
        assert all(isinstance(r, msgclient.SendTimeoutError) for r in results), results[:3]
        latest = SEND_TIMEOUT_S + loop_lag.allowance()  # the send timeout's timer, late
        assert SEND_TIMEOUT_S - 0.05 <= failed_at - started <= latest, loop_lag.worst
        # Those that waited went out after the timeout, on the same stuck connection: drop
        # it, and the producer resends them on a new one.
        stuck.cut()
        rest = await asyncio.wait_for(asyncio.gather(*futures[len(first) :]), TIMEOUT)
        assert len(rest) == count - len(first)
        assert client.memory_used == 0
    await assert_no_leaked_tasks(tasks_before)
    figures.add("pulsar memory, block_if_queue_full", blocked_for_s=failed_at - full_at)


async def test_pulsar_send_async_fails_when_memory_is_full_and_the_send_timeout_frees_it(
    pulsar_broker: PulsarBroker,
    pulsar_proxy: FaultProxy,
    topic: str,
    figures: type[Figures],
    loop_lag: LoopLag,
) -> None:
    tasks_before = client_tasks()
    async with stuck_pulsar_producer(pulsar_proxy, topic, block=False) as (client, producer, stuck):
        futures = []
        started = time.monotonic()
        with pytest.raises(msgclient.MemoryBufferIsFullError):
            for i in range(LIMIT // SIZE + 1):
                futures.append(await producer.send_async(payload(i)))
        assert len(futures) == LIMIT // SIZE  # exactly the limit was accepted
        assert client.memory_used == LIMIT
        results = await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), SEND_TIMEOUT_S + TIMEOUT
        )
        failed_after = time.monotonic() - started
        assert all(isinstance(r, msgclient.SendTimeoutError) for r in results), results[:3]
        latest = SEND_TIMEOUT_S + loop_lag.allowance()  # the send timeout's timer, late
        assert SEND_TIMEOUT_S - 0.05 <= failed_after <= latest, loop_lag.worst
        assert client.memory_used == 0
        stuck.cut()
        await asyncio.wait_for(producer.send(b"after"), TIMEOUT)  # the producer carries on
    await assert_no_leaked_tasks(tasks_before)
    figures.add("pulsar memory, fail fast", send_timeout_after_s=failed_after)


async def test_kafka_send_async_blocks_while_memory_is_full(
    proxied_kafka: ProxiedKafka, topic: str, figures: type[Figures], loop_lag: LoopLag
) -> None:
    count = 40
    tasks_before = client_tasks()
    async with msgclient.Client(proxied_kafka.url, **SLOW_KEEPALIVE) as client:
        producer = await client.create_producer(
            topic,
            block_if_queue_full=True,
            send_timeout_millis=int(SEND_TIMEOUT_S * 1000),
            max_request_size=2 * MIB,
        )
        await asyncio.wait_for(producer.send(b"warm"), TIMEOUT)
        proxied_kafka.proxy.live[-1].stop_reading_from_client()
        started = time.monotonic()
        futures, returned_at, full_at, failed_at = await fill_while_blocked(client, producer, count)
        assert client.memory_used <= LIMIT
        blocked = [t for t in returned_at if full_at < t < failed_at - 0.05]
        assert not blocked, f"{len(blocked)} send_async returned while memory was full"
        latest = SEND_TIMEOUT_S + loop_lag.allowance()  # the send timeout's timer, late
        assert SEND_TIMEOUT_S - 0.05 <= failed_at - started <= latest, loop_lag.worst
        proxied_kafka.proxy.cut()
        results = await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), SEND_TIMEOUT_S * 3 + TIMEOUT
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        assert failures and all(isinstance(f, msgclient.SendTimeoutError) for f in failures)
        assert client.memory_used == 0
    await assert_no_leaked_tasks(tasks_before)
    figures.add("kafka memory, block_if_queue_full", blocked_for_s=failed_at - full_at)


async def test_memory_growth_stays_within_the_limit_plus_20_percent(
    target: Target, topic: str, figures: type[Figures]
) -> None:
    """The limit's worth of pending payload while the broker reads nothing: what the
    client allocates meanwhile stays within the limit plus 20 %."""
    async with msgclient.Client(target.url, **SLOW_KEEPALIVE) as client:
        producer = await client.create_producer(
            topic, send_timeout_millis=int(SEND_TIMEOUT_S * 1000), **target.producer_options
        )
        await asyncio.wait_for(producer.send(b"warm"), TIMEOUT)
        stuck = target.proxy.live[-1]
        stuck.stop_reading_from_client()
        peak = MemoryPeak()
        async with peak.running():
            futures = [await producer.send_async(payload(i)) for i in range(LIMIT // SIZE)]
            assert client.memory_used == LIMIT
            results = await asyncio.wait_for(
                asyncio.gather(*futures, return_exceptions=True), SEND_TIMEOUT_S + TIMEOUT
            )
        assert all(isinstance(r, msgclient.SendTimeoutError) for r in results)
        stuck.cut()
    figures.add(
        f"{target.protocol} memory while the broker reads nothing (limit 8 MiB)",
        allocated_peak_mib=peak.traced_growth / MIB,
        rss_growth_mib=peak.rss_growth / MIB,
        allowed_mib=ALLOWED_GROWTH / MIB,
    )
    assert peak.traced_growth <= ALLOWED_GROWTH, f"{peak.traced_growth / MIB:.1f} MiB allocated"
    assert peak.rss_growth <= ALLOWED_GROWTH, f"RSS grew {peak.rss_growth / MIB:.1f} MiB"
