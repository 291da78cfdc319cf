"""GroupMembership: one member of a classic-protocol Kafka consumer group.

It finds the group's coordinator, joins (JoinGroup, then SyncGroup, the leader running the
chosen assignor), keeps the membership alive with heartbeats and rejoins when the
coordinator asks, as the Java client's ``AbstractCoordinator`` and ``ConsumerCoordinator``
do. Two tasks run per member: the membership loop, which joins and calls the listener
(so listener calls never overlap), and the heartbeat loop, which only flags what the loop
must do. Neither lets an exception escape.

Eager assignors (range, roundrobin) give everything up before each rejoin; when every
configured assignor is cooperative, a member keeps its partitions across the rebalance,
gives up only those assigned elsewhere, and then joins again so that they reach their new
owner (the two-phase cooperative rebalance, KIP-429). Requests go through a
``CoordinatorLink`` (``group_coordinator.py``); their shapes are in ``group_requests.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from kafka.protocol.consumer import JoinGroupRequest

from msgclient.core.network.registration import is_retriable
from msgclient.errors import (
    AlreadyClosedError,
    BrokerError,
    InvalidConfigurationError,
    MsgClientError,
    NotSupportedError,
    OperationTimeoutError,
)
from msgclient.options import ConsumerOptions
from protocols.kafkawire import errors
from protocols.kafkawire import group_requests as requests
from protocols.kafkawire.assignors import ASSIGNORS, Assignment, Assignor, decode_assignment
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.group_coordinator import CoordinatorLink, new_backoff, retry_later
from protocols.kafkawire.group_requests import (
    CommitFailedError,
    JoinAnswer,
    RebalanceInProgressError,
)

__all__ = [
    "AssignmentListener",
    "CommitFailedError",
    "GroupMembership",
    "RebalanceInProgressError",
]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# Java waits this much beyond the rebalance timeout for a JoinGroup answer.
JOIN_GRACE = 5.0
DEFAULT_TIMEOUT = 30.0
# The membership is gone: what this member owned may be another's already.
_LOST_MEMBERSHIP = frozenset(
    {errors.UNKNOWN_MEMBER_ID, errors.ILLEGAL_GENERATION, errors.FENCED_INSTANCE_ID}
)


class AssignmentListener(Protocol):
    async def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """The owner commits what was acknowledged and stops fetching them first."""

    async def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        """The membership ended (session expired, fenced): no commit is possible."""


class _Rejoin(Exception):
    """Join again at once, without backoff (the coordinator asked for it)."""


class _Stop(Exception):
    """The member is closing: the membership loop ends after the listener call."""


class GroupMembership:
    def __init__(
        self,
        context: KafkaContext,
        group_id: str,
        topics: list[str],
        options: ConsumerOptions,
        listener: AssignmentListener,
    ) -> None:
        names = options.partition_assignment_strategy
        unknown = [name for name in names if name not in ASSIGNORS]
        if not names or unknown:
            raise InvalidConfigurationError(
                f"option partition_assignment_strategy={names!r} is invalid: expected one or "
                f"more of {', '.join(ASSIGNORS)}"
            )
        self._assignors: list[Assignor] = [ASSIGNORS[name]() for name in names]
        # Java: the protocol is cooperative only when every assignor supports it.
        self._cooperative = all(a.supports_cooperative for a in self._assignors)
        self._context = context
        self.group_id = group_id
        self._topics = tuple(sorted(set(topics)))
        self._options = options
        self._listener = listener
        self._instance_id = options.group_instance_id
        self._session_timeout = options.session_timeout_ms / 1000
        self._join_timeout = options.rebalance_timeout_ms / 1000 + JOIN_GRACE
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.generation_id = requests.NO_GENERATION
        self.member_id = ""
        self._link = CoordinatorLink(context, group_id)
        self._rejoin = asyncio.Event()
        self._stable = asyncio.Event()  # set while the generation is usable for commits
        self._epoch = 0  # bumped when the generation stops being stable
        self._lost = False  # the generation was reset: what we own is lost, not revoked
        self._fatal: MsgClientError | None = None
        self._last_error: MsgClientError | None = None
        self._started: asyncio.Future[None] | None = None
        self._main: asyncio.Task[None] | None = None
        self._heartbeats: asyncio.Task[None] | None = None
        self._in_listener = False
        self._closed = False
        self._closing: asyncio.Future[None] | None = None

    # -- public -----------------------------------------------------------------------------

    @property
    def link(self) -> CoordinatorLink:
        """The connection to the group's coordinator (transactions commit offsets there)."""
        return self._link

    @property
    def instance_id(self) -> str | None:
        return self._instance_id

    @property
    def error(self) -> MsgClientError | None:
        """Why the membership ended for good (fenced, not authorized...); None till then."""
        return self._fatal

    async def start(self, timeout: float) -> None:
        """Join the group; returns once the first assignment was given to the listener.
        Transient failures are retried for ``timeout`` seconds, then the last one raised."""
        if self._closed:
            raise AlreadyClosedError(f"the membership of group {self.group_id!r} is closed")
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._rejoin.set()
            self._main = asyncio.create_task(self._run(), name=f"group {self.group_id}")
            self._heartbeats = asyncio.create_task(
                self._heartbeat_loop(), name=f"group {self.group_id} heartbeats"
            )
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._started)
        except TimeoutError:
            error = self._last_error
            await self.close()
            if error is not None:
                raise error from None
            raise OperationTimeoutError(
                f"joining group {self.group_id!r} took longer than {timeout:g}s"
            ) from None
        except asyncio.CancelledError:
            await asyncio.shield(self.close())
            raise
        if self._fatal is not None:
            await self.close()
            raise self._fatal
        if self._closed:
            raise AlreadyClosedError(f"the membership of group {self.group_id!r} was closed")

    def set_topics(self, topics: list[str]) -> None:
        """Subscribe to ``topics`` instead (a pattern subscription's topics changed): a
        member already joined rejoins with them, as Kafka's consumer does."""
        wanted = tuple(sorted(set(topics)))
        if wanted == self._topics:
            return
        self._topics = wanted
        if self._started is not None and not self._closed:
            self._rejoin.set()

    async def commit(
        self, offsets: Mapping[TopicPartition, int], *, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Commit the next offset to read of each partition, in the current generation.
        Coordinator moves are retried for ``timeout`` seconds; a rebalance in progress
        raises RebalanceInProgressError (retriable), a lost membership CommitFailedError."""
        if not offsets:
            return
        deadline = asyncio.get_running_loop().time() + timeout
        backoff = new_backoff()
        while True:
            self._check_usable()
            if not self._stable.is_set():
                raise RebalanceInProgressError(
                    f"group {self.group_id!r} is rebalancing: commit again once it has rejoined"
                )
            generation, member = self.generation_id, self.member_id
            request = requests.offset_commit(
                self.group_id, generation, member, self._instance_id, offsets
            )
            try:
                connection, response = await self._link.request(request)
            except MsgClientError as error:
                if not is_retriable(error):
                    raise
                retry: MsgClientError = error
            else:
                code = requests.commit_error(response)
                if code == errors.NONE:
                    return
                retry = self._commit_failure(code, connection, generation, member)
            await retry_later(retry, backoff, deadline)

    async def committed(
        self, partitions: Iterable[TopicPartition], *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (the next offset to read); -1 where it has none."""
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        self._check_usable()
        return await self._link.committed(wanted, timeout)

    async def close(self) -> None:
        """Give everything up (listener), leave the group, stop both tasks. Idempotent."""
        if self._closing is None:
            # Called from a listener call, the membership loop cannot be waited for: it
            # ends by itself once that call returns.
            inside = self._main is not None and asyncio.current_task() is self._main
            self._closing = asyncio.ensure_future(self._close(stop_main=not inside))
        # shielded: a caller cancelled halfway must not leave the member half closed
        await asyncio.shield(self._closing)

    # -- the membership loop ----------------------------------------------------------------

    async def _run(self) -> None:
        backoff = new_backoff()
        try:
            while True:
                await self._rejoin.wait()
                if self._closed or self._fatal is not None:
                    break
                try:
                    await self._rebalance()
                except _Rejoin as reason:
                    log.info("group %r: joining again: %s", self.group_id, reason)
                    self._rejoin.set()
                    continue
                except MsgClientError as error:
                    if not is_retriable(error):
                        self._fatal = error
                        break
                    self._last_error = error
                    self._rejoin.set()
                    log.info("joining group %r failed (%s): retrying", self.group_id, error)
                    await asyncio.sleep(backoff.next())
                    continue
                backoff.reset()
            if self._fatal is not None:
                await self._give_up(self._fatal)
        except _Stop:
            pass
        except Exception as error:  # a bug here must not die silently in the event loop
            log.exception("group %r: the membership loop failed", self.group_id)
            self._fatal = MsgClientError(f"group {self.group_id!r} membership failed: {error!r}")
            self._wake_start()

    async def _rebalance(self) -> None:
        await self._prepare()
        connection = await self._link.ensure()
        self._leave_stable()
        self._rejoin.clear()
        join = await self._join(connection)
        assignment = await self._sync(connection, join)
        self._stable.set()
        await self._complete(assignment)
        self._wake_start()

    async def _prepare(self) -> None:
        """Before a join: lost partitions are reported lost; eager members revoke all."""
        owned = sorted(self.assignment)
        if self._lost:
            self._lost = False
            if owned:
                await self._call("on_partitions_lost", owned)
                self.assignment = frozenset()
        elif owned and not self._cooperative:
            await self._call("on_partitions_revoked", owned)
            self.assignment = frozenset()

    async def _complete(self, assignment: Assignment) -> None:
        new = frozenset(assignment.partitions)
        old = self.assignment
        if not self._cooperative:
            self.assignment = new
            await self._call("on_partitions_assigned", sorted(new))
            return
        revoked = old - new
        if revoked:
            await self._call("on_partitions_revoked", sorted(revoked))
            # the second phase: rejoin so that the partitions given up get their new owner
            self._rejoin.set()
        self.assignment = new
        await self._call("on_partitions_assigned", sorted(new - old))

    async def _join(self, connection: KafkaConnection) -> JoinAnswer:
        versions = connection.session.versions
        assert versions is not None, "a pooled connection has negotiated its versions"
        if self._instance_id is not None and versions.version(JoinGroupRequest) < 5:
            raise NotSupportedError(
                f"group_instance_id (static membership) needs JoinGroup v5+ (Kafka 2.3); "
                f"the broker at {connection.address} speaks v"
                f"{versions.version(JoinGroupRequest)}"
            )
        request = requests.join_group(
            self.group_id,
            self.member_id,
            self._instance_id,
            self._options.session_timeout_ms,
            self._options.rebalance_timeout_ms,
            requests.join_protocols(
                self._assignors, self._topics, tuple(sorted(self.assignment)), self.generation_id
            ),
        )
        _, response = await self._link.request(request, bound=self._join_timeout, timed=False)
        code = response.error_code
        if code == errors.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id given
            self.member_id = response.member_id
            raise _Rejoin("JoinGroup: MEMBER_ID_REQUIRED")
        self._check_group_error(code, "JoinGroup", connection)
        join = requests.join_answer(response)
        self.member_id, self.generation_id = join.member_id, join.generation_id
        leader = " (leader)" if join.leader == join.member_id else ""
        log.info("joined group %r: generation %d%s", self.group_id, join.generation_id, leader)
        return join

    async def _sync(self, connection: KafkaConnection, join: JoinAnswer) -> Assignment:
        assignments: dict[str, bytes] = {}
        if join.leader == self.member_id and not join.skip_assignment:
            assignments = await self._assign(join)
        request = requests.sync_group(
            self.group_id,
            join.generation_id,
            join.member_id,
            self._instance_id,
            join.protocol_name,
            assignments,
        )
        _, response = await self._link.request(request, bound=self._join_timeout, timed=False)
        self._check_group_error(response.error_code, "SyncGroup", connection)
        data = bytes(response.assignment or b"")
        return decode_assignment(data) if data else Assignment(())

    async def _assign(self, join: JoinAnswer) -> dict[str, bytes]:
        """The leader's work: the chosen assignor over every member's subscription."""
        assignor = next((a for a in self._assignors if a.name == join.protocol_name), None)
        if assignor is None:
            raise errors.kafka_error(
                errors.INCONSISTENT_GROUP_PROTOCOL,
                f"group {self.group_id!r} chose assignor {join.protocol_name!r}, "
                "which this member did not offer",
            )
        return await requests.leader_assignments(assignor, join.members, self._context.lookup)

    def _check_group_error(self, code: int, api: str, connection: KafkaConnection) -> None:
        """Act on a JoinGroup or SyncGroup error: rejoin at once, or raise it."""
        if code == errors.NONE:
            return
        error = errors.kafka_error(code, f"{api} of group {self.group_id!r}")
        if code == errors.REBALANCE_IN_PROGRESS:
            raise _Rejoin(str(error))
        if code in _LOST_MEMBERSHIP and not self._is_fatal_fence(code):
            self._reset_generation(code)
            raise _Rejoin(str(error))
        if code in errors.COORDINATOR_ERRORS:
            self._link.unknown(connection, code)
        raise error

    async def _give_up(self, error: MsgClientError) -> None:
        log.error("group %r: membership ended for good: %s", self.group_id, error)
        self._leave_stable()
        if self.assignment:
            owned, self.assignment = sorted(self.assignment), frozenset()
            await self._call("on_partitions_lost", owned)
        self._wake_start()

    # -- heartbeats -------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self._options.heartbeat_interval_ms / 1000
        while True:
            await self._stable.wait()
            await asyncio.sleep(interval)
            if not self._stable.is_set():
                continue
            epoch = self._epoch
            request = requests.heartbeat(
                self.group_id, self.generation_id, self.member_id, self._instance_id
            )
            try:
                connection, response = await self._link.request(
                    request, bound=self._session_timeout
                )
            except MsgClientError as error:  # the link dropped a bad connection
                log.info("group %r: heartbeat failed: %s", self.group_id, error)
                continue
            except Exception:  # never let the task die: the membership would expire
                log.exception("group %r: heartbeat failed", self.group_id)
                continue
            if epoch == self._epoch:  # else the answer is about a generation left behind
                self._on_heartbeat(response.error_code, connection)

    def _on_heartbeat(self, code: int, connection: KafkaConnection) -> None:
        if code == errors.NONE:
            return
        error = errors.kafka_error(code, f"Heartbeat of group {self.group_id!r}")
        if code == errors.REBALANCE_IN_PROGRESS:
            log.info("group %r is rebalancing: rejoining", self.group_id)
        elif code in _LOST_MEMBERSHIP and not self._is_fatal_fence(code):
            log.info("group %r: membership lost (%s): rejoining", self.group_id, error)
            self._reset_generation(code)
        elif code in errors.COORDINATOR_ERRORS:
            self._link.unknown(connection, code)
            return
        elif is_retriable(error):
            log.info("group %r: %s", self.group_id, error)
            return
        else:
            self._fatal = error
            self._leave_stable()
        self._rejoin.set()

    # -- state --------------------------------------------------------------------------

    def _is_fatal_fence(self, code: int) -> bool:
        # Another process started with our group_instance_id: two consumers must not both
        # think they own its partitions, so this one stops (Java raises FencedInstanceId).
        return code == errors.FENCED_INSTANCE_ID and self._instance_id is not None

    def _leave_stable(self) -> None:
        self._stable.clear()
        self._epoch += 1

    def _reset_generation(self, code: int) -> None:
        """The coordinator no longer counts us in our generation. Java keeps the member id
        on ILLEGAL_GENERATION: the member may still be known, and a new id would leave the
        old one in the group until its session expires."""
        self._leave_stable()
        self.generation_id = requests.NO_GENERATION
        if code != errors.ILLEGAL_GENERATION:
            self.member_id = ""
        self._lost = True

    def _wake_start(self) -> None:
        if self._started is not None and not self._started.done():
            self._started.set_result(None)

    def _check_usable(self) -> None:
        # Not ``_closed``: while closing, the owner commits in on_partitions_revoked.
        if self._link.closed:
            raise AlreadyClosedError(f"the membership of group {self.group_id!r} is closed")
        if self._fatal is not None:
            raise self._fatal

    def _commit_failure(
        self, code: int, connection: KafkaConnection, generation: int, member: str
    ) -> MsgClientError:
        """The error to retry after, or raise the one that ends this commit."""
        error = errors.kafka_error(code, f"OffsetCommit of group {self.group_id!r}")
        if code in errors.COORDINATOR_ERRORS:
            self._link.unknown(connection, code)
            return error
        if code == errors.REBALANCE_IN_PROGRESS:
            self._rejoin.set()
            raise RebalanceInProgressError(
                f"group {self.group_id!r} is rebalancing: commit again once it has rejoined"
            )
        if code in _LOST_MEMBERSHIP:
            if (generation, member) == (self.generation_id, self.member_id):
                if self._is_fatal_fence(code):
                    self._fatal = error
                    self._leave_stable()
                else:
                    self._reset_generation(code)
                self._rejoin.set()
            name = error.code if isinstance(error, BrokerError) else str(code)
            raise CommitFailedError(
                name,
                f"group {self.group_id!r} moved on from generation {generation} of member "
                f"{member}: the partitions may be another member's now",
            )
        if not is_retriable(error):
            raise error
        return error

    # -- listener and close -------------------------------------------------------------

    async def _call(self, method: str, partitions: list[TopicPartition]) -> None:
        self._in_listener = True
        try:
            await getattr(self._listener, method)(partitions)
        except Exception:  # the owner's failure must not break the membership
            log.exception("group %r: %s failed", self.group_id, method)
        finally:
            self._in_listener = False
        if self._closed and asyncio.current_task() is self._main:
            raise _Stop  # close() waited for this call to end instead of cancelling it

    async def _close(self, stop_main: bool) -> None:
        self._closed = True
        try:
            await self._stop_tasks(stop_main)
            if self.assignment:
                owned, lost = sorted(self.assignment), self._lost or self._fatal is not None
                await self._call("on_partitions_lost" if lost else "on_partitions_revoked", owned)
            self.assignment = frozenset()
            await self._leave()
        except Exception:
            log.exception("group %r: closing failed", self.group_id)
        finally:
            self._leave_stable()
            self._wake_start()
            self._link.close()

    async def _stop_tasks(self, stop_main: bool) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            await asyncio.wait({self._heartbeats})
        main = self._main
        if main is None or not stop_main:
            return
        # Not in the middle of a listener call: the owner may be committing there.
        if not self._in_listener:
            main.cancel()
        else:
            self._rejoin.set()
        await asyncio.wait({main}, timeout=self._join_timeout)
        if not main.done():
            log.warning("group %r: the listener did not return in time", self.group_id)
            main.cancel()
            await asyncio.wait({main})

    async def _leave(self) -> None:
        """LeaveGroup, so the group rebalances now rather than after our session times out
        (tansu even counts a member that never leaves at generation 0). Static members
        stay, as in Java: their instance id keeps their partitions across a restart."""
        if not self.member_id or self._instance_id is not None:
            return
        await self._link.leave(self.member_id, self._instance_id, self._session_timeout)
        self.member_id, self.generation_id = "", requests.NO_GENERATION
