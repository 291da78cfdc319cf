"""The topic discovery of pattern subscriptions, sans broker: the diffing, the timer,
failures retried at the next period, close."""

from __future__ import annotations

import asyncio

from msgclient.core.receive.topic_discovery import TopicDiscovery, topic_changes
from msgclient.errors import MsgClientError


def test_topic_changes_are_what_turns_the_current_set_into_the_listed_one() -> None:
    assert topic_changes(["b", "a", "c"], ["d", "a", "c", "e"]) == (["d", "e"], ["b"])
    assert topic_changes([], ["x"]) == (["x"], [])
    assert topic_changes(["x"], []) == ([], ["x"])
    assert topic_changes(["x", "y"], ["y", "x"]) == ([], [])


async def test_each_period_applies_the_changes_and_a_failed_listing_is_retried() -> None:
    current = ["a"]
    answers: list[list[str] | MsgClientError] = [
        ["a", "b"],
        MsgClientError("lookup failed"),
        ["b"],
        ["b"],
    ]
    applied: list[tuple[list[str], list[str]]] = []
    done = asyncio.Event()

    async def list_topics() -> list[str]:
        answer = answers.pop(0)
        if not answers:
            done.set()
        if isinstance(answer, MsgClientError):
            raise answer
        return answer

    async def apply(added: list[str], removed: list[str]) -> None:
        applied.append((added, removed))
        current[:] = sorted({*current, *added} - set(removed))

    discovery = TopicDiscovery(list_topics, lambda: current, apply, 0.01, "test")
    discovery.start()
    async with asyncio.timeout(5):
        await done.wait()
        await discovery.close()
    assert applied == [(["b"], []), ([], ["a"])]  # the last listing changed nothing
    assert current == ["b"]


async def test_close_stops_the_timer_before_its_first_listing() -> None:
    listed = 0

    async def list_topics() -> list[str]:
        nonlocal listed
        listed += 1
        return []

    async def apply(added: list[str], removed: list[str]) -> None:
        raise AssertionError("nothing changed")

    discovery = TopicDiscovery(list_topics, list, apply, 60, "test")
    discovery.start()
    async with asyncio.timeout(5):
        await discovery.close()
    assert listed == 0
