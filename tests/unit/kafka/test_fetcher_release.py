"""Fetcher: what a fetch decoded beyond the permits waits, and goes out as permits come
back (`Fetcher._release`, reached through `wake` as the consumer's `flow` reaches it). No
broker: the runs are put where a fetch puts them, and the lookup never answers, so
nothing is fetched."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import cast

import pytest

from msgclient.message import Message
from msgclient.options import ConsumerOptions
from protocols.kafkawire.fetcher import DELIVER_AT_HEADER, Fetcher, FetchState
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.metadata import KafkaLookupService
from protocols.kafkawire.records.run import RecordRun

TOPIC = "orders"


class SilentLookup:
    """A lookup that never finds a leader: the fetcher never fetches."""

    async def leader(self, topic: str, partition: int) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def invalidate(self, topic: str) -> None:
        pass


class Deliveries:
    def __init__(self) -> None:
        self.runs: list[Sequence[Message]] = []
        self.consumed_to: list[int] = []

    def __call__(self, runs: list[Sequence[Message]], consumed_to: int) -> None:
        self.runs += runs
        self.consumed_to.append(consumed_to)

    def offsets(self) -> list[int]:
        return [offset(m) for run in self.runs for m in run]


def offset(message: Message) -> int:
    message_id = message.message_id()
    assert isinstance(message_id, KafkaMessageId)
    return message_id.offset


def single(at: int, headers: dict[str, str] | None = None) -> Message:
    return Message(b"v", KafkaMessageId(TOPIC, 0, at), f"{TOPIC}-0", properties=headers)


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    lookup = cast(KafkaLookupService, SilentLookup())
    made = Fetcher(lookup, lambda address: None, ConsumerOptions(), 1 << 20)
    yield made
    await made.close()
    for task in asyncio.all_tasks():  # the lookups that never answer
        if task is not asyncio.current_task():
            task.cancel()


def buffered_state(
    fetcher: Fetcher, runs: list[Sequence[Message]], position: int
) -> tuple[FetchState, Deliveries]:
    deliveries = Deliveries()
    state = FetchState(TOPIC, 0, deliveries, lambda error: None)
    state.position = position
    state.buffered.extend(runs)  # as a fetch leaves them
    fetcher.add(state)
    return state, deliveries


async def give(fetcher: Fetcher, state: FetchState, permits: int) -> None:
    state.permits += permits
    fetcher.wake(state)
    await asyncio.sleep(0)  # wake() releases on the next loop turn


async def test_permits_one_at_a_time_take_a_run_without_copying_what_is_left(
    fetcher: Fetcher,
) -> None:
    run = RecordRun(TOPIC, 0, 100, [b"%d" % i for i in range(3000)], list(range(3000)), -1)
    state, deliveries = buffered_state(fetcher, [run, [single(3100)]], position=3101)
    for taken in range(3000):
        assert state.buffered[0] is run  # the same run: what is left is not copied
        assert state.consumed_to() == 100 + taken
        await give(fetcher, state, 1)
    assert state.consumed_to() == 3100
    await give(fetcher, state, 5)
    assert deliveries.offsets() == [*range(100, 3100), 3100]
    assert deliveries.consumed_to[-3:] == [3099, 3100, 3101]
    assert not state.buffered and state.permits == 4
    assert [m.value() for m in deliveries.runs[1]] == [b"1"]


async def test_a_delayed_record_holds_what_follows_it(fetcher: Fetcher) -> None:
    headers = {DELIVER_AT_HEADER: str(int(time.time() * 1000) + 60_000)}
    held = single(12, headers)
    state, deliveries = buffered_state(
        fetcher, [[single(10), single(11), held, single(13)]], position=14
    )
    await give(fetcher, state, 10)
    assert deliveries.offsets() == [10, 11]
    assert deliveries.consumed_to == [12]
    assert state.held_until and state.permits == 8
    assert state.consumed_to() == 12  # the held record is next, where the commit stays
    headers[DELIVER_AT_HEADER] = str(int(time.time() * 1000) - 1)  # as when it comes due
    state.held_until = 0.0
    await give(fetcher, state, 0)
    assert deliveries.offsets() == [10, 11, 12, 13]
    assert not state.buffered
