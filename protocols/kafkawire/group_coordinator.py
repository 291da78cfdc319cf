"""CoordinatorLink: one group member's connection to its group coordinator.

The coordinator is found with FindCoordinator at any broker; the link then opens a pooled
connection of the member's own (its own pool key): a coordinator holds a JoinGroup for up
to the rebalance timeout and Kafka answers a connection's requests in order, so on a
connection shared with other members their heartbeats and commits would wait behind it.
A lost or silent connection, or NOT_COORDINATOR, drops the link's connection and the next
request finds the coordinator again. Callers supply the retries.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from msgclient.core.network.backoff import Backoff
from msgclient.core.network.registration import is_retriable
from msgclient.errors import (
    AlreadyClosedError,
    ConnectError,
    ConnectionClosedError,
    MsgClientError,
    OperationTimeoutError,
)
from protocols.kafkawire import errors
from protocols.kafkawire import group_requests as requests
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.context import KafkaContext

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# Java's retry.backoff.ms and retry.backoff.max.ms
RETRY_BACKOFF = 0.1
MAX_RETRY_BACKOFF = 1.0
TRANSPORT_ERRORS = (ConnectionClosedError, OperationTimeoutError, ConnectError)
_link_numbers = itertools.count()


def new_backoff() -> Backoff:
    return Backoff(RETRY_BACKOFF, MAX_RETRY_BACKOFF)


async def retry_later(error: MsgClientError, backoff: Backoff, deadline: float) -> None:
    """Sleep before the next attempt, or raise ``error`` if that would pass ``deadline``."""
    delay = backoff.next()
    if asyncio.get_running_loop().time() + delay > deadline:
        raise error
    log.info("%s: retrying", error)
    await asyncio.sleep(delay)


class CoordinatorLink:
    """The link to the coordinator of a group (``group_id``), or of a transactional id
    (``key_type`` TRANSACTION_KEY_TYPE, the id as ``group_id``)."""

    def __init__(
        self, context: KafkaContext, group_id: str, key_type: int = requests.GROUP_KEY_TYPE
    ) -> None:
        self._context = context
        self.group_id = group_id
        self._key_type = key_type
        kind = "group" if key_type == requests.GROUP_KEY_TYPE else "transactional id"
        self._what = f"{kind} {group_id!r}"
        self._tag = f"{kind} {group_id} link {next(_link_numbers)}"  # our pool key
        self._connection: KafkaConnection | None = None
        self._lock = asyncio.Lock()  # one FindCoordinator at a time
        self.closed = False

    async def ensure(self) -> KafkaConnection:
        """The connection to the coordinator, found first if need be."""
        async with self._lock:
            if self.closed:
                raise AlreadyClosedError(f"the coordinator link of {self._what} is closed")
            connection = self._connection
            if connection is not None and connection.is_open:
                return connection
            broker = await self._context.lookup.any_broker()
            response = await broker.request(
                requests.find_coordinator(self.group_id, self._key_type)
            )
            address = requests.coordinator_address(response, self._what)
            connection = await self._context.pool.get_connection(
                f"{address} ({self._tag})", address
            )
            if self.closed:  # closed while we waited: do not keep it open in the pool
                connection.close()
                raise AlreadyClosedError(f"the coordinator link of {self._what} is closed")
            self._connection = connection
            return connection

    def unknown(self, connection: KafkaConnection, code: int | None = None) -> None:
        """Find the coordinator again before the next request (not while it loads)."""
        if code == errors.COORDINATOR_LOAD_IN_PROGRESS:
            return
        if self._connection is connection:
            self._connection = None
        connection.close()  # our own connection: nobody else uses it

    async def request(
        self, request: Any, *, bound: float | None = None, timed: bool = True
    ) -> tuple[KafkaConnection, Any]:
        """Send to the coordinator. ``bound`` limits the wait (with ``timed=False`` for
        requests the broker may hold longer than the operation timeout)."""
        connection = await self.ensure()
        try:
            if bound is None:
                return connection, await connection.request(request, timed=timed)
            async with asyncio.timeout(bound):
                return connection, await connection.request(request, timed=timed)
        except TRANSPORT_ERRORS:
            self.unknown(connection)
            raise
        except TimeoutError:
            self.unknown(connection)
            raise OperationTimeoutError(
                f"no {type(request).__name__} answer from {connection.address} in {bound:g}s"
            ) from None
        except asyncio.CancelledError:
            if not timed:  # the broker may still hold it, blocking the connection
                self.unknown(connection)
            raise

    async def committed(
        self, partitions: list[TopicPartition], timeout: float
    ) -> dict[TopicPartition, int]:
        """OffsetFetch, retrying transient failures for ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        backoff = new_backoff()
        while True:
            try:
                connection, response = await self.request(
                    requests.offset_fetch(self.group_id, partitions)
                )
            except MsgClientError as error:
                if not is_retriable(error):
                    raise
                retry = error
            else:
                code, offsets = requests.fetched_offsets(response)
                if code == errors.NONE:
                    return {tp: offsets.get(tp, -1) for tp in partitions}
                retry = errors.kafka_error(code, f"OffsetFetch of group {self.group_id!r}")
                if code in errors.COORDINATOR_ERRORS:
                    self.unknown(connection, code)
                elif not is_retriable(retry):
                    raise retry
            await retry_later(retry, backoff, deadline)

    async def leave(self, member_id: str, instance_id: str | None, bound: float) -> None:
        """LeaveGroup; a failure is logged only (the session timeout removes us anyway)."""
        request = requests.leave_group(self.group_id, member_id, instance_id)
        try:
            async with asyncio.timeout(bound):
                _, response = await self.request(request)
        except (MsgClientError, TimeoutError) as error:
            log.info("group %r: LeaveGroup failed: %s", self.group_id, error)
            return
        code = requests.leave_error(response)
        if code:
            log.info("%s", errors.kafka_error(code, f"LeaveGroup of group {self.group_id!r}"))

    def close(self) -> None:
        self.closed = True
        if self._connection is not None:
            self.unknown(self._connection)
