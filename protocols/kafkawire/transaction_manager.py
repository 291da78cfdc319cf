"""TransactionManager: the transactions of one transactional id (the Java client's).

The producers of one client with the same transactional id share it, and with it one
producer id and epoch, got from InitProducerId at the transaction coordinator (which
aborts a previous incarnation's open transaction and fences that producer). A partition
joins the open transaction before its first batch in it is sent (AddPartitionsToTxn): the
batches written in one loop turn for partitions not yet in it wait for one request for all
of them. A commit adds the offsets acknowledged in the transaction (AddOffsetsToTxn, then
TxnOffsetCommit at the group's coordinator with the member's generation: a member that
left the group cannot commit, KIP-447) and ends it (EndTxn); an abort ends it as well and
bumps the epoch (InitProducerId with the current id and epoch), so that every partition's
sequence numbers start over: a batch failed in the aborted transaction leaves no gap.

Errors (``transaction_requests.classify``): coordinator moves and concurrent transactions
are retried here until the operation timeout; abortable ones fail the open transaction
until it is aborted; fatal ones (fenced, not authorized) fail every later call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from msgclient.contract import ConsumerTransport, OpSend, TransactionTransport
from msgclient.core.network.registration import is_retriable
from msgclient.errors import (
    MsgClientError,
    TransactionAbortableError,
    TransactionFatalError,
    TransactionStateError,
)
from msgclient.message import MessageId
from protocols.kafkawire import errors
from protocols.kafkawire import transaction_requests as requests
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.group_coordinator import CoordinatorLink, new_backoff, retry_later
from protocols.kafkawire.group_requests import TRANSACTION_KEY_TYPE, commit_error
from protocols.kafkawire.transaction_requests import ErrorClass, TopicPartition

log = logging.getLogger(__name__)


class TransactionalWriter(Protocol):
    """A producer transport, as the manager releases or fails the batches it held."""

    topic: str
    partition: int
    attachment: int

    def send_admitted(self, op: OpSend, attachment: int) -> None:
        """The partition joined the transaction: send ``op`` (written at ``attachment``)."""

    def fail_admission(self, op: OpSend, attachment: int, error: MsgClientError) -> None:
        """The partition could not join the transaction: fail ``op``."""


class TransactionalConsumer(Protocol):
    """A consumer transport, as a commit reads and settles its acknowledgments."""

    def transaction_offsets(self, message_ids: list[MessageId]) -> tuple[Any, TopicPartition, int]:
        """The group membership, the partition and the position to commit with these ids
        acknowledged (nothing changes until the commit succeeds)."""

    def transaction_committed(self, message_ids: list[MessageId], position: int) -> None:
        """The transaction committed ``position``: the ids are acknowledged."""


_Held = tuple[TransactionalWriter, OpSend, int]
_RANK = {
    ErrorClass.NONE: 0,
    ErrorClass.RETRY: 1,
    ErrorClass.COORDINATOR: 2,
    ErrorClass.ABORTABLE: 3,
    ErrorClass.FATAL: 4,
}


class TransactionManager(TransactionTransport):
    def __init__(self, context: KafkaContext, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._context = context
        self._link = self._new_link()
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_number = 0  # counts the epochs: each starts the sequence numbers over
        self._started: asyncio.Future[None] | None = None
        self._partitions: set[TopicPartition] = set()  # joined the open transaction
        self._held: dict[TopicPartition, list[_Held]] = {}  # waiting to join it
        self._adding: asyncio.Task[None] | None = None
        self._abortable: str | None = None  # why the open transaction must be aborted
        self._fatal: str | None = None  # why the producer is unusable

    # -- TransactionTransport -------------------------------------------------------------

    async def start(self) -> None:
        if self._started is None:
            if self._link.closed:  # handed over: the next transaction gets a link again
                self._link = self._new_link()
            self._started = asyncio.ensure_future(self._new_epoch())
        try:
            await asyncio.shield(self._started)
        except MsgClientError:
            self._started = None  # the next producer of this id tries again
            raise

    def begin(self) -> None:
        self.check_usable()
        if self._started is None:
            raise TransactionStateError(
                f"the last transaction of transactional id {self.transactional_id!r} was "
                "prepared and handed over: begin the next with await client.new_transaction("
                "transactional_id=...), which takes a new epoch first"
            )
        self._partitions.clear()

    def check_usable(self) -> None:
        if self._fatal is not None:
            raise TransactionFatalError(self._fatal)
        if self._abortable is not None:
            raise TransactionAbortableError(self._abortable)

    async def commit(
        self,
        acknowledgments: Mapping[ConsumerTransport, list[MessageId]],
        group_offsets: Mapping[str, Mapping[TopicPartition, int]],
    ) -> None:
        self.check_usable()
        settled: list[tuple[TransactionalConsumer, list[MessageId], int]] = []
        by_group: dict[Any, dict[TopicPartition, int]] = {}
        for transport, message_ids in acknowledgments.items():
            consumer: TransactionalConsumer = transport  # type: ignore[assignment]
            try:
                group, tp, position = consumer.transaction_offsets(message_ids)
            except TransactionAbortableError as error:
                self._abortable = str(error)
                raise
            by_group.setdefault(group, {})[tp] = position
            settled.append((consumer, message_ids, position))
        for group, offsets in by_group.items():
            # The generation as it is now: if the group moves on before the coordinator
            # answers, the commit fails (ILLEGAL_GENERATION) instead of landing in it.
            await self._add_offsets(
                group.link,
                offsets,
                group.generation_id,
                group.member_id,
                group.instance_id,
            )
        await self._add_group_offsets(group_offsets)
        if self._partitions or by_group or group_offsets:  # an empty one has nothing to end
            await self._end(commit=True)
        for consumer, message_ids, position in settled:
            consumer.transaction_committed(message_ids, position)

    async def prepare(
        self, group_offsets: Mapping[str, Mapping[TopicPartition, int]]
    ) -> tuple[int, int] | None:
        self.check_usable()
        await self._add_group_offsets(group_offsets)
        touched = bool(self._partitions or group_offsets)
        # The transaction stays open at the coordinator under this id and epoch until its
        # holder ends it: this manager must not add to it, so the next transaction takes a
        # new epoch (start), and no connection is kept meanwhile.
        self._partitions.clear()
        self._started = None
        self._link.close()
        return (self.producer_id, self.producer_epoch) if touched else None

    async def end_prepared(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """End the transaction a manager of this id prepared with ``producer_id`` and
        ``producer_epoch`` (EndTxn may come from any connection)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        await self._end(commit=commit)

    async def abort(self, sends_failed: bool) -> None:
        if self._fatal is not None:
            raise TransactionFatalError(self._fatal)
        if self._partitions:
            await self._end(commit=False)
        if sends_failed or self._abortable is not None:
            # A batch that failed, or was never sent, would leave a gap in its partition's
            # sequence numbers: a new epoch starts them over.
            await self._new_epoch()
        self._abortable = None

    # -- partitions joining the transaction, from the producer transports -----------------

    def admit(self, writer: TransactionalWriter, op: OpSend) -> bool:
        """Whether ``op`` may be sent now; if not, the manager sends it (or fails it) once
        its partition has joined the transaction."""
        tp = (writer.topic, writer.partition)
        if tp in self._partitions:
            return True
        self._held.setdefault(tp, []).append((writer, op, writer.attachment))
        if self._adding is None:
            self._adding = asyncio.ensure_future(self._add_held())
        return False

    def fail(self, error: MsgClientError, *, fatal: bool) -> MsgClientError:
        """A send of the open transaction failed: the transaction must be aborted, or, when
        ``fatal``, the producer is unusable. The error to fail the send with."""
        reason = f"transactional id {self.transactional_id!r}: {error}"
        if fatal:
            if self._fatal is None:
                self._fatal = reason + " (fatal: close the producer)"
            return TransactionFatalError(self._fatal)
        if self._abortable is None:
            self._abortable = reason + " (abort the transaction)"
        return TransactionAbortableError(self._abortable)

    async def close(self) -> None:
        if self._adding is not None:
            self._adding.cancel()
        self._link.close()

    # -- requests -------------------------------------------------------------------------

    def _new_link(self) -> CoordinatorLink:
        return CoordinatorLink(self._context, self.transactional_id, TRANSACTION_KEY_TYPE)

    async def _add_held(self) -> None:
        try:
            await asyncio.sleep(0)  # the batches written in this turn join in one request
            while self._held:
                wanted = list(self._held)
                failure: MsgClientError | None = None
                try:
                    self.check_usable()
                    await self._request(
                        self._link,
                        requests.add_partitions(
                            self.transactional_id, self.producer_id, self.producer_epoch, wanted
                        ),
                        "AddPartitionsToTxn",
                        _worst_partition_code,
                    )
                    self._partitions.update(wanted)
                except MsgClientError as error:
                    failure = error
                for tp in wanted:
                    for writer, op, attachment in self._held.pop(tp):
                        if failure is None:
                            writer.send_admitted(op, attachment)
                        else:
                            writer.fail_admission(op, attachment, failure)
        finally:
            self._adding = None

    async def _add_group_offsets(
        self, group_offsets: Mapping[str, Mapping[TopicPartition, int]]
    ) -> None:
        """Offsets of groups named by id, with no member (generation -1: Kafka's standalone
        consumers commit that way too)."""
        for group_id, offsets in group_offsets.items():
            link = CoordinatorLink(self._context, group_id)
            try:
                await self._add_offsets(link, offsets, -1, "", None)
            finally:
                link.close()

    async def _add_offsets(
        self,
        group_link: CoordinatorLink,
        offsets: Mapping[TopicPartition, int],
        generation_id: int,
        member_id: str,
        instance_id: str | None,
    ) -> None:
        """The group's offsets commit with the transaction: AddOffsetsToTxn at the
        transaction coordinator, then TxnOffsetCommit at the group's."""
        group_id = group_link.group_id
        await self._request(
            self._link,
            requests.add_offsets(
                self.transactional_id, self.producer_id, self.producer_epoch, group_id
            ),
            "AddOffsetsToTxn",
        )
        await self._request(
            group_link,
            requests.txn_offset_commit(
                self.transactional_id,
                group_id,
                self.producer_id,
                self.producer_epoch,
                generation_id,
                member_id,
                instance_id,
                offsets,
            ),
            f"TxnOffsetCommit to group {group_id!r}",
            commit_error,  # answered as an OffsetCommit is
        )

    async def _new_epoch(self) -> None:
        tid, timeout = self.transactional_id, self.timeout_ms
        if self.producer_id < 0:
            answer = await self._request(
                self._link, requests.init_producer_id(tid, timeout), "InitProducerId"
            )
        else:
            # The current id and epoch prove this is the live incarnation (KIP-360): a
            # fenced one gets PRODUCER_FENCED instead of taking the id back.
            answer = await self._request(
                self._link,
                requests.init_producer_id(tid, timeout, self.producer_id, self.producer_epoch),
                "InitProducerId",
                _unknown_error_passes,
            )
            if answer.error_code:
                # A broker without KIP-360 (tansu answers UNKNOWN_SERVER_ERROR): register as
                # a new incarnation, which bumps the epoch all the same.
                log.info("transactional id %r: new epoch without KIP-360", tid)
                answer = await self._request(
                    self._link, requests.init_producer_id(tid, timeout), "InitProducerId"
                )
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self.epoch_number += 1
        log.info(
            "transactional id %r: producer id %d, epoch %d",
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
        )

    async def _end(self, *, commit: bool) -> None:
        request = requests.end_txn(
            self.transactional_id, self.producer_id, self.producer_epoch, commit
        )
        await self._request(self._link, request, "EndTxn (commit)" if commit else "EndTxn (abort)")
        self._partitions.clear()

    async def _request(
        self,
        link: CoordinatorLink,
        request: Any,
        what: str,
        error_code: Callable[[Any], int] = lambda response: int(response.error_code),
    ) -> Any:
        """Send to a coordinator, retrying what may be retried for the operation timeout;
        abortable and fatal errors also set the manager's state."""
        deadline = asyncio.get_running_loop().time() + self._context.operation_timeout
        backoff = new_backoff()
        while True:
            try:
                connection, response = await link.request(request)
            except MsgClientError as error:
                if not is_retriable(error):
                    raise
                retry = error
            else:
                code = error_code(response)
                kind = requests.classify(code)
                if kind is ErrorClass.NONE:
                    return response
                retry = errors.kafka_error(code, f"{what} of {self.transactional_id!r}")
                if kind is ErrorClass.FATAL:
                    raise self.fail(retry, fatal=True) from retry
                if kind is ErrorClass.ABORTABLE:
                    raise self.fail(retry, fatal=False) from retry
                if kind is ErrorClass.COORDINATOR:
                    link.unknown(connection, code)
            await retry_later(retry, backoff, deadline)


def _unknown_error_passes(response: Any) -> int:
    """InitProducerId's code, with UNKNOWN_SERVER_ERROR left to the caller."""
    code = int(response.error_code)
    return errors.NONE if code == requests.UNKNOWN_SERVER_ERROR else code


def _worst_partition_code(response: Any) -> int:
    """AddPartitionsToTxn answers per partition: the code that decides what to do."""
    codes = requests.add_partitions_errors(response).values()
    return max(codes, key=lambda code: _RANK[requests.classify(code)], default=errors.NONE)
