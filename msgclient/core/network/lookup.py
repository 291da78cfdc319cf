"""LookupService: how many partitions a topic has and which broker serves each.

Concurrent lookups of the same topic share one request: when a broker restarts, every
producer and consumer of a topic reconnects at once, and the broker should see one lookup.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


@attrs.frozen
class BrokerAddress:
    """Where a topic lives: ``logical`` names the broker, ``physical`` is where to connect.

    They differ when the client must go through a proxy: the socket goes to the proxy
    and the handshake asks it for the logical broker.
    """

    logical: str
    physical: str


class LookupService(ABC):
    """Subclasses answer ``_fetch_*``; this class de-duplicates concurrent calls."""

    def __init__(self) -> None:
        self._in_flight: dict[tuple[str, str], asyncio.Future[Any]] = {}
        self._generation = 0  # counts service switches

    def forget_in_flight(self) -> None:
        """The service changed (a cluster switch): lookups in flight ask the old one, so
        their callers ask again, and new callers do not join them."""
        self._generation += 1
        self._in_flight.clear()

    async def get_partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 for a topic that is not partitioned."""
        return await self._once(("partitions", topic), lambda: self._fetch_partition_count(topic))

    async def get_broker(self, topic: str) -> BrokerAddress:
        """The broker serving ``topic`` (one partition's name for a partitioned topic)."""
        return await self._once(("broker", topic), lambda: self._fetch_broker(topic))

    @abstractmethod
    async def _fetch_partition_count(self, topic: str) -> int: ...

    @abstractmethod
    async def _fetch_broker(self, topic: str) -> BrokerAddress: ...

    async def _once(self, key: tuple[str, str], fetch: Callable[[], Awaitable[T]]) -> T:
        while True:
            generation = self._generation
            future: asyncio.Future[T] | None = self._in_flight.get(key)
            if future is None:
                future = asyncio.ensure_future(fetch())
                self._in_flight[key] = future
                future.add_done_callback(lambda done: self._forget(key, done))
                # Its callers may all have gone (cancelled, closed): its failure is theirs.
                future.add_done_callback(lambda f: f.cancelled() or f.exception())
            try:
                answer = await asyncio.shield(future)
            except Exception:
                if generation == self._generation:
                    raise
                continue  # the old cluster's failure: ask the new one
            if generation == self._generation:
                return answer
            # The answer names a broker of the cluster the client has left: ask again.

    def _forget(self, key: tuple[str, str], future: asyncio.Future[Any]) -> None:
        if self._in_flight.get(key) is future:  # not a newer lookup of the same key
            del self._in_flight[key]
