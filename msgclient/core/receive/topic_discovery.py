"""Topic auto-discovery of a pattern subscription (the Java client's
PatternMultiTopicsConsumerImpl timer).

Every ``period`` seconds the matching topics are listed again; the difference with the
topics the consumer has is handed to ``apply`` (topics added, topics removed). A listing
that fails is logged and retried at the next period: the consumer keeps what it has. The
changes are applied one check at a time (the next listing waits for ``apply``), so a
topic is never being joined and dropped at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from msgclient.errors import MsgClientError

log = logging.getLogger(__name__)

ListTopics = Callable[[], Awaitable[list[str]]]
CurrentTopics = Callable[[], Iterable[str]]
ApplyChanges = Callable[[list[str], list[str]], Awaitable[None]]


def topic_changes(current: Iterable[str], listed: Iterable[str]) -> tuple[list[str], list[str]]:
    """(topics to add, topics to remove), each sorted: what turns ``current`` into
    ``listed``."""
    have, want = set(current), set(listed)
    return sorted(want - have), sorted(have - want)


class TopicDiscovery:
    """Runs from ``start`` until ``close``; ``what`` names it in the logs."""

    def __init__(
        self,
        list_topics: ListTopics,
        current: CurrentTopics,
        apply: ApplyChanges,
        period: float,
        what: str,
    ) -> None:
        self._list_topics = list_topics
        self._current = current  # the consumer's topics: what apply achieved, even halfway
        self._apply = apply
        self._period = period
        self._what = what
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"topic discovery of {self._what}")

    async def check(self) -> None:
        """List the topics now and apply the changes."""
        added, removed = topic_changes(self._current(), await self._list_topics())
        if added or removed:
            log.info("%s: topics added %s, removed %s", self._what, added, removed)
            await self._apply(added, removed)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                async with asyncio.timeout(self._period):
                    await self._stop.wait()
                return
            except TimeoutError:
                pass
            try:
                await self.check()
            except MsgClientError as error:  # the next period tries again
                log.warning("%s: topic discovery failed: %s", self._what, error)

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
