"""GroupMembership against the real tansu broker: joins, rebalances, commits, close.

tansu holds every JoinGroup for about session_timeout / 2, so the sessions here are short
(3-4 s) and each member has a client (KafkaBackend) of its own, as separate processes would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from msgclient.embedded import KafkaBroker
from msgclient.errors import ConnectError
from msgclient.options import ClientOptions, ConsumerOptions
from msgclient.url import parse_service_url
from protocols.kafkawire.adapter import KafkaBackend
from protocols.kafkawire.group import GroupMembership, RebalanceInProgressError

TopicPartition = tuple[str, int]
JOIN_TIMEOUT = 15.0
FAST = {"session_timeout_ms": 4000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 6000}


class Events(list[tuple[str, str, list[TopicPartition], int]]):
    """(member, event, partitions, generation at the call) of every listener call, in
    order; ``changed`` is set by each (a member's assignment changes just before)."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()
        self.recorders: dict[str, Recorder] = {}


def revoke_offset(partition: int) -> int:
    """What the listeners commit for a partition they give up."""
    return 100 + partition


class Recorder:
    """The owner's part: it commits revoked partitions (``revoke_offset``) before
    returning, and records whether that commit worked in ``commits``."""

    def __init__(self, name: str, events: Events):
        self.name = name
        self.events = events
        self.member: GroupMembership | None = None
        self.commits: list[str] = []
        events.recorders[name] = self

    def _record(self, event: str, partitions: list[TopicPartition]) -> None:
        generation = self.member.generation_id if self.member else -1
        self.events.append((self.name, event, list(partitions), generation))
        self.events.changed.set()

    async def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        assert self.member is not None
        try:
            await self.member.commit({tp: revoke_offset(tp[1]) for tp in partitions})
            self.commits.append("ok")
        except Exception as error:
            self.commits.append(repr(error))
        self._record("revoked", partitions)

    async def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._record("assigned", partitions)

    async def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._record("lost", partitions)


@pytest.fixture
async def make_backend(kafka_broker: KafkaBroker) -> AsyncIterator[Callable[[], KafkaBackend]]:
    made: list[KafkaBackend] = []

    def make() -> KafkaBackend:
        backend = KafkaBackend(parse_service_url(kafka_broker.service_url), ClientOptions())
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


def member(
    backend: KafkaBackend,
    group: str,
    topic: str,
    name: str,
    events: Events,
    **options: Any,
) -> GroupMembership:
    recorder = Recorder(name, events)
    membership = GroupMembership(
        backend.context, group, [topic], ConsumerOptions(**{**FAST, **options}), recorder
    )
    recorder.member = membership
    return membership


async def eventually(
    events: Events, check: Callable[[], bool], what: str, timeout: float = 15.0
) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not check():
                events.changed.clear()
                await events.changed.wait()
    except TimeoutError:
        pytest.fail(f"{what}: not within {timeout:g}s")


def commits(events: Events, name: str) -> list[str]:
    """How each of the member's commits in on_partitions_revoked went."""
    return events.recorders[name].commits


async def read_committed(
    backend: KafkaBackend, group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    reader = member(backend, group, partitions[0][0], "R", Events())
    try:
        return await asyncio.wait_for(reader.committed(partitions), 10)
    finally:
        await asyncio.wait_for(reader.close(), 10)


def of(events: Events, name: str, kind: str | None = None) -> list[list[TopicPartition]]:
    return [e[2] for e in events if e[0] == name and (kind is None or e[1] == kind)]


async def partitions_of(backend: KafkaBackend, topic: str) -> list[TopicPartition]:
    count = await backend.lookup.get_partition_count(topic)  # tansu creates it: 4 partitions
    assert count > 1
    return [(topic, p) for p in range(count)]


def leftover(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - before


async def test_one_member_gets_every_partition(
    make_backend: Callable[[], KafkaBackend], topic: str
) -> None:
    before = asyncio.all_tasks()
    backend = make_backend()
    every = await partitions_of(backend, topic)
    events = Events()
    a = member(backend, f"g-{topic}", topic, "A", events)
    await a.start(JOIN_TIMEOUT)
    assert a.assignment == frozenset(every)
    assert a.member_id
    assert events == [("A", "assigned", every, a.generation_id)]
    await asyncio.wait_for(asyncio.gather(a.close(), a.close()), 10)  # idempotent
    await asyncio.wait_for(a.close(), 10)
    assert events[1:] == [("A", "revoked", every, events[0][3])]
    assert a.assignment == frozenset()
    assert commits(events, "A") == ["ok"]  # the owner can commit while the member closes
    assert await read_committed(backend, f"g-{topic}", every) == {
        tp: revoke_offset(tp[1]) for tp in every
    }
    assert not leftover(before)


async def test_range_split_and_handover(
    make_backend: Callable[[], KafkaBackend], topic: str
) -> None:
    before = asyncio.all_tasks()
    backend_a, backend_b = make_backend(), make_backend()
    every = await partitions_of(backend_a, topic)
    events = Events()
    a = member(backend_a, f"g-{topic}", topic, "A", events, partition_assignment_strategy="range")
    b = member(backend_b, f"g-{topic}", topic, "B", events, partition_assignment_strategy="range")
    await a.start(JOIN_TIMEOUT)
    first_generation = a.generation_id
    await b.start(JOIN_TIMEOUT)
    await eventually(events, lambda: bool(a.assignment) and bool(b.assignment), "the split")
    assert a.assignment | b.assignment == frozenset(every)
    assert not a.assignment & b.assignment
    # range: consecutive halves, the lower one to the member id first in order
    low, high = sorted((a, b), key=lambda m: m.member_id)
    half = len(every) // 2
    assert sorted(low.assignment) == every[:half]
    assert sorted(high.assignment) == every[half:]
    # eager: A gave up everything in its old generation, before rejoining
    a_events = [(e[1], e[2], e[3]) for e in events if e[0] == "A"]
    assert a_events == [
        ("assigned", every, first_generation),
        ("revoked", every, first_generation),
        ("assigned", sorted(a.assignment), a.generation_id),
    ]
    assert a.generation_id > first_generation
    assert events.index(("A", "revoked", every, first_generation)) < min(
        i for i, e in enumerate(events) if e[0] == "B"
    )
    # B leaves: A takes everything
    b_owned = sorted(b.assignment)
    a_owned = sorted(a.assignment)
    await asyncio.wait_for(b.close(), 10)
    assert of(events, "B") == [b_owned, b_owned]  # assigned, then revoked on close
    await eventually(events, lambda: a.assignment == frozenset(every), "the handover")
    assert of(events, "A")[-2:] == [a_owned, every]  # revoked its half, assigned all
    await asyncio.wait_for(a.close(), 10)
    # every revoke committed: in the old generation before rejoining, and when closing
    assert commits(events, "A") == ["ok"] * 3
    assert commits(events, "B") == ["ok"]
    assert not leftover(before)


async def test_cooperative_sticky_moves_only_what_it_must(
    make_backend: Callable[[], KafkaBackend], topic: str
) -> None:
    before = asyncio.all_tasks()
    backend_a, backend_b = make_backend(), make_backend()
    every = await partitions_of(backend_a, topic)
    events = Events()
    options: dict[str, Any] = {
        "partition_assignment_strategy": "cooperative-sticky",
        "session_timeout_ms": 3000,
    }
    a = member(backend_a, f"g-{topic}", topic, "A", events, **options)
    b = member(backend_b, f"g-{topic}", topic, "B", events, **options)
    await a.start(JOIN_TIMEOUT)
    assert a.assignment == frozenset(every)
    # B's first assignment is empty: A still owns what B is to get (the first phase).
    # (tansu holds B's first SyncGroup until A's second join, so B's start may take a
    # couple of joins longer than on Kafka.)
    await b.start(JOIN_TIMEOUT)
    await eventually(events, lambda: len(a.assignment) == len(b.assignment) > 0, "the split")
    assert a.assignment | b.assignment == frozenset(every)
    assert not a.assignment & b.assignment
    # A revoked exactly what moved to B, once, and kept the rest throughout
    assert of(events, "A", "revoked") == [sorted(b.assignment)]
    assert of(events, "A", "lost") == []
    a_assigned = [p for ps in of(events, "A", "assigned") for p in ps]
    assert sorted(a_assigned) == every  # nothing was given to A twice
    revoked_at = next(i for i, e in enumerate(events) if e[:2] == ("A", "revoked"))
    b_got_at = next(i for i, e in enumerate(events) if e[:2] == ("B", "assigned") and e[2])
    assert revoked_at < b_got_at
    # B leaves: A gets B's partitions added, and gives up none of its own
    a_owned = sorted(a.assignment)
    b_owned = sorted(b.assignment)
    await asyncio.wait_for(b.close(), 10)
    await eventually(events, lambda: a.assignment == frozenset(every), "the handover")
    assert of(events, "A", "revoked") == [b_owned]
    assert of(events, "A", "assigned")[-1] == b_owned
    assert a_owned == sorted(frozenset(every) - frozenset(b_owned))
    await asyncio.wait_for(a.close(), 10)
    # A's commit of what moved was made in the new generation, after its SyncGroup
    assert commits(events, "A") == ["ok"] * 2
    assert commits(events, "B") == ["ok"]
    assert await read_committed(make_backend(), f"g-{topic}", every) == {
        tp: revoke_offset(tp[1]) for tp in every
    }
    assert not leftover(before)


async def test_commit_then_committed(make_backend: Callable[[], KafkaBackend], topic: str) -> None:
    before = asyncio.all_tasks()
    backend = make_backend()
    every = await partitions_of(backend, topic)
    events = Events()
    a = member(backend, f"g-{topic}", topic, "A", events)
    await a.start(JOIN_TIMEOUT)
    await asyncio.wait_for(a.commit({every[0]: 5, every[1]: 7}), 10)
    answer = await asyncio.wait_for(a.committed([every[0], every[1], every[2]]), 10)
    assert answer == {every[0]: 5, every[1]: 7, every[2]: -1}
    await asyncio.wait_for(a.commit({every[0]: 9}), 10)  # a later commit replaces it
    # another client, not a member, reads the same offsets
    reader = member(make_backend(), f"g-{topic}", topic, "R", events)
    assert await asyncio.wait_for(reader.committed([every[0], every[1]]), 10) == {
        every[0]: 9,
        every[1]: 7,
    }
    await asyncio.wait_for(reader.close(), 10)
    await asyncio.wait_for(a.close(), 10)
    assert not leftover(before)


async def test_committed_of_unknown_group_is_minus_one(
    make_backend: Callable[[], KafkaBackend], topic: str
) -> None:
    before = asyncio.all_tasks()
    backend = make_backend()
    every = await partitions_of(backend, topic)
    reader = member(backend, f"no-such-group-{topic}", topic, "R", Events())
    assert await asyncio.wait_for(reader.committed(every), 10) == dict.fromkeys(every, -1)
    await asyncio.wait_for(reader.close(), 10)
    assert not leftover(before)


async def test_commit_outside_a_generation_is_a_retriable_error(
    make_backend: Callable[[], KafkaBackend], topic: str
) -> None:
    reader = member(make_backend(), f"g-{topic}", topic, "R", Events())
    with pytest.raises(RebalanceInProgressError) as raised:
        await asyncio.wait_for(reader.commit({(topic, 0): 1}), 10)
    assert raised.value.retriable
    await asyncio.wait_for(reader.close(), 10)


async def test_static_member_joins(make_backend: Callable[[], KafkaBackend], topic: str) -> None:
    before = asyncio.all_tasks()
    backend = make_backend()
    every = await partitions_of(backend, topic)
    events = Events()
    # (tansu quirk: it holds a static member's JoinGroup and SyncGroup about 3 s each,
    # whatever the timeouts, so this join takes about 6 s)
    a = member(backend, f"g-{topic}", topic, "A", events, group_instance_id=f"i-{topic}")
    await a.start(JOIN_TIMEOUT)
    assert a.assignment == frozenset(every)
    await asyncio.wait_for(a.close(), 10)  # no LeaveGroup: static members keep their place
    assert of(events, "A") == [every, every]
    assert commits(events, "A") == ["ok"]
    assert not leftover(before)


async def test_start_gives_up_with_the_last_error(topic: str) -> None:
    before = asyncio.all_tasks()
    backend = KafkaBackend(parse_service_url("kafka://127.0.0.1:1"), ClientOptions())
    a = member(backend, f"g-{topic}", topic, "A", Events())
    with pytest.raises(ConnectError):
        await asyncio.wait_for(a.start(1.0), 10)
    assert not leftover(before)
    await backend.close()
