"""LookupService: concurrent lookups of one topic share one fetch."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from msgclient.core.network.lookup import BrokerAddress, LookupService
from msgclient.errors import TopicLookupError

WAIT = 5.0  # a bound no wait here comes close to, even on a loaded machine


class ScriptedLookup(LookupService):
    """Counts fetches; each waits at ``gate`` so that callers can pile up."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches: Counter[tuple[str, str]] = Counter()
        self.gate = asyncio.Event()
        self.fail_with: Exception | None = None

    async def _fetch_partition_count(self, topic: str) -> int:
        self.fetches["partitions", topic] += 1
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return len(topic)

    async def _fetch_broker(self, topic: str) -> BrokerAddress:
        self.fetches["broker", topic] += 1
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return BrokerAddress(logical=f"pulsar://{topic}:6650", physical="pulsar://proxy:6650")


async def gather_released(lookup: ScriptedLookup, *calls: asyncio.Future[object]) -> list[object]:
    await asyncio.sleep(0)  # every call has started and is waiting on the fetch
    lookup.gate.set()
    async with asyncio.timeout(WAIT):
        return await asyncio.gather(*calls, return_exceptions=True)


async def test_concurrent_partition_counts_of_one_topic_share_one_fetch() -> None:
    lookup = ScriptedLookup()
    calls = [asyncio.ensure_future(lookup.get_partition_count("t1")) for _ in range(5)]
    assert await gather_released(lookup, *calls) == [2] * 5
    assert lookup.fetches == {("partitions", "t1"): 1}


async def test_concurrent_broker_lookups_of_one_topic_share_one_fetch() -> None:
    lookup = ScriptedLookup()
    calls = [asyncio.ensure_future(lookup.get_broker("t1")) for _ in range(5)]
    expected = BrokerAddress("pulsar://t1:6650", "pulsar://proxy:6650")
    assert await gather_released(lookup, *calls) == [expected] * 5
    assert lookup.fetches == {("broker", "t1"): 1}


async def test_different_topics_and_kinds_fetch_separately() -> None:
    lookup = ScriptedLookup()
    calls = [
        asyncio.ensure_future(lookup.get_partition_count("t1")),
        asyncio.ensure_future(lookup.get_partition_count("topic-2")),
        asyncio.ensure_future(lookup.get_broker("t1")),
        asyncio.ensure_future(lookup.get_partition_count("t1")),
    ]
    results = await gather_released(lookup, *calls)
    assert results[:2] == [2, 7] and results[3] == 2
    assert lookup.fetches == {
        ("partitions", "t1"): 1,
        ("partitions", "topic-2"): 1,
        ("broker", "t1"): 1,
    }


async def test_sequential_calls_fetch_again() -> None:
    lookup = ScriptedLookup()
    lookup.gate.set()
    async with asyncio.timeout(WAIT):
        await lookup.get_broker("t1")
        await asyncio.sleep(0)  # the finished fetch leaves the in-flight table
        await lookup.get_broker("t1")
    assert lookup.fetches == {("broker", "t1"): 2}  # no caching: brokers move


async def test_an_error_reaches_every_waiter_and_the_next_call_retries() -> None:
    lookup = ScriptedLookup()
    lookup.fail_with = TopicLookupError("no broker")
    calls = [asyncio.ensure_future(lookup.get_broker("t1")) for _ in range(3)]
    results = await gather_released(lookup, *calls)
    assert all(r is lookup.fail_with for r in results)
    assert lookup.fetches == {("broker", "t1"): 1}

    await asyncio.sleep(0)
    lookup.fail_with = None
    async with asyncio.timeout(WAIT):
        assert await lookup.get_broker("t1") == BrokerAddress(
            "pulsar://t1:6650", "pulsar://proxy:6650"
        )
    assert lookup.fetches == {("broker", "t1"): 2}


async def test_a_cancelled_waiter_does_not_cancel_the_shared_fetch() -> None:
    lookup = ScriptedLookup()
    impatient = asyncio.ensure_future(lookup.get_partition_count("t1"))
    patient = asyncio.ensure_future(lookup.get_partition_count("t1"))
    await asyncio.sleep(0)
    impatient.cancel()
    assert await gather_released(lookup, patient) == [2]
    assert impatient.cancelled()
    assert lookup.fetches == {("partitions", "t1"): 1}


def test_broker_address_is_a_value() -> None:
    a = BrokerAddress("pulsar://b:6650", "pulsar://b:6650")
    assert a == BrokerAddress("pulsar://b:6650", "pulsar://b:6650")
    assert len({a, BrokerAddress("pulsar://b:6650", "pulsar://b:6650")}) == 1
    with pytest.raises(AttributeError):
        a.logical = "x"  # type: ignore[misc]
