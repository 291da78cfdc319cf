"""Transactions: sends and acknowledgments that take effect together, or not at all.

The API is Pulsar's (``txn = await client.new_transaction()``, ``producer.send(...,
transaction=txn)``, ``consumer.acknowledge(message, transaction=txn)``, ``await
txn.commit()`` / ``abort()``), with Kafka's names on the producer as well
(``begin_transaction``, ``commit_transaction``, ...). On Kafka a transaction belongs to
one transactional id: every producer of the client created with that ``transactional_id``
sends in it (a producer serves one topic; together they are one Kafka producer), and one
transaction at a time is open per id, as on Kafka. The adapter's ``TransactionTransport``
speaks to the coordinator; this module checks each call against the transaction's state,
waits for the sends before a commit and hands the acknowledgments over.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from msgclient.contract import ConsumerTransport, TransactionTransport
from msgclient.errors import (
    TransactionAbortableError,
    TransactionStateError,
    TransactionTimeoutError,
)
from msgclient.message import MessageId


class Producer(Protocol):
    """A producer, as a transaction waits for its sends."""

    @property
    def failed_count(self) -> int:
        """Messages failed since it was created."""

    async def flush(self) -> None: ...


class PartitionConsumer(Protocol):
    """A partition consumer, as a transaction commits or returns its acknowledgments."""

    @property
    def transport(self) -> ConsumerTransport: ...

    def redeliver_aborted(self, message_ids: list[MessageId]) -> None:
        """The transaction that acknowledged them was aborted: deliver them again."""


class TransactionState(enum.Enum):
    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    PREPARING = "preparing"
    PREPARED = "prepared"
    ABORTING = "aborting"
    ABORTED = "aborted"


@dataclass(frozen=True)
class PreparedTransaction:
    """A transaction whose messages are stored and whose offsets are written, still open at
    the coordinator: its holder commits or aborts it with ``client.commit_prepared`` /
    ``abort_prepared``, from any client or process (two-phase commit: a Spark task
    prepares, the driver commits). Plain data: it pickles."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionalProducers:
    """The client's producers of one transactional id: their transport to the coordinator
    and their open transaction (one at a time)."""

    def __init__(self, transactional_id: str, transport: TransactionTransport, timeout_ms: int):
        self.transactional_id = transactional_id
        self.transport = transport
        self.timeout = timeout_ms / 1000
        self.current: Transaction | None = None

    def begin(self) -> Transaction:
        current = self.current
        if current is not None:
            raise TransactionStateError(
                f"a transaction of transactional id {self.transactional_id!r} is "
                f"{current.state.value}: commit or abort it before beginning another (one "
                "transaction at a time per transactional id, as on Kafka)"
            )
        self.transport.begin()
        self.current = Transaction(self)
        return self.current

    def for_send(self, transaction: Transaction | None, producer: Producer) -> Transaction:
        """The transaction a send of ``producer`` joins: ``transaction``, else the open
        one; raises if it cannot take sends."""
        current = self.current
        if transaction is None:
            if current is None:
                raise TransactionStateError(
                    f"a producer with transactional_id {self.transactional_id!r} sends only "
                    "in a transaction: begin_transaction() (or client.new_transaction()) first"
                )
            transaction = current
        elif transaction is not current:
            raise TransactionStateError(
                f"transaction={transaction!r} is not the open transaction of this producer's "
                f"transactional id {self.transactional_id!r}"
            )
        # check_open, inlined: this runs for every message
        if transaction.state is not TransactionState.OPEN or transaction.must_abort is not None:
            transaction.check_open("send")
        self.transport.check_usable()
        if producer is not transaction.last_enlisted:
            transaction.enlist(producer)
        return transaction

    def ended(self, transaction: Transaction) -> None:
        transaction.expiry.cancel()
        if self.current is transaction:
            self.current = None


class Transaction:
    """One transaction; made by ``client.new_transaction()`` or
    ``producer.begin_transaction()``. ``async with transaction:`` commits at the end of
    the block, or aborts if it raises."""

    def __init__(self, owner: TransactionalProducers) -> None:
        self._owner = owner
        self.transactional_id = owner.transactional_id
        self.state = TransactionState.OPEN
        # A timer, not a clock read per send: what a Kafka coordinator would abort, the
        # client refuses to go on with.
        self.expiry = asyncio.get_running_loop().call_later(owner.timeout, self._expire)
        # the producers that sent in it, with their count of failed messages when they joined
        self._producers: dict[Producer, int] = {}
        self.last_enlisted: Producer | None = None
        self._acks: dict[PartitionConsumer, list[MessageId]] = {}
        self._group_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.must_abort: TransactionAbortableError | None = None  # why, once it must

    def __repr__(self) -> str:
        return f"<Transaction of {self.transactional_id!r}, {self.state.value}>"

    # -- what joins it --------------------------------------------------------------------

    def check_open(self, what: str) -> None:
        """Raise unless the transaction can take ``what`` (a send, an acknowledgment)."""
        if self.state is not TransactionState.OPEN:
            raise TransactionStateError(
                f"cannot {what} in the transaction of {self.transactional_id!r}: it is "
                f"{self.state.value}"
            )
        if self.must_abort is not None:
            raise type(self.must_abort)(str(self.must_abort))
        self._owner.transport.check_usable()

    def _expire(self) -> None:
        if self.must_abort is None:
            self.must_abort = TransactionTimeoutError(
                f"the transaction of {self.transactional_id!r} is open longer than its "
                f"transaction_timeout_ms ({self._owner.timeout * 1000:.0f} ms): a Kafka "
                "coordinator aborts it; abort it and begin again"
            )

    def enlist(self, producer: Producer) -> None:
        """``producer`` sends in the transaction: a commit waits for its messages, and fails
        if one of those sent from now on fails."""
        if producer not in self._producers:
            self._producers[producer] = producer.failed_count
        self.last_enlisted = producer

    def add_acknowledgments(
        self, partition: PartitionConsumer, message_ids: Iterable[MessageId]
    ) -> None:
        self.check_open("acknowledge")
        self._acks.setdefault(partition, []).extend(message_ids)

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` ({(topic, partition): offset}) for consumer group ``group_id``
        with the transaction (Kafka's ``sendOffsetsToTransaction`` with offsets of its own:
        the group needs no member; a consumer's acknowledgments go with
        ``acknowledge(..., transaction=)``)."""
        self.check_open("commit offsets")
        self._group_offsets.setdefault(group_id, {}).update(offsets)

    # -- the end ----------------------------------------------------------------------------

    async def commit(self) -> None:
        """Wait for every send of the transaction, then commit it with its
        acknowledgments. A failure leaves it open: abort it (TransactionAbortableError),
        or commit again after a retriable error; TransactionFatalError ends the producer."""
        self._check_can_end("commit")
        self.state = TransactionState.COMMITTING
        try:
            await self._settle_and_check()
            await self._owner.transport.commit(
                {partition.transport: ids for partition, ids in self._acks.items()},
                self._group_offsets,
            )
        except BaseException:
            self.state = TransactionState.OPEN
            raise
        self.state = TransactionState.COMMITTED
        self._owner.ended(self)

    async def prepare(self) -> PreparedTransaction | None:
        """The first phase of a two-phase commit: wait for every send, write the offsets
        (``commit_offsets``) into the transaction, and hand it over open, to be ended with
        ``client.commit_prepared`` or ``abort_prepared`` (None: it wrote nothing, there is
        nothing to end). The next transaction of the id begins with ``await
        client.new_transaction(...)``, which takes a new epoch; a new epoch taken before the
        prepared one is ended aborts it (Kafka's fencing). Kafka only; acknowledgments
        cannot be prepared (the consumer settles them when the transaction commits)."""
        self._check_can_end("prepare")
        if self._acks:
            raise TransactionStateError(
                f"the transaction of {self.transactional_id!r} holds acknowledgments, which "
                "settle only when it commits here: prepare a transaction with commit_offsets "
                "instead"
            )
        self.state = TransactionState.PREPARING
        try:
            await self._settle_and_check()
            ids = await self._owner.transport.prepare(self._group_offsets)
        except BaseException:
            self.state = TransactionState.OPEN
            raise
        self.state = TransactionState.PREPARED
        self._owner.ended(self)
        return None if ids is None else PreparedTransaction(self.transactional_id, *ids)

    async def abort(self) -> None:
        """Abort: nothing the transaction sent is read by read_committed consumers, and the
        messages acknowledged in it are delivered again."""
        self._check_can_end("abort")
        self.state = TransactionState.ABORTING
        try:
            await self._settle_sends()
            await self._owner.transport.abort(self._failed_sends() > 0)
        except BaseException:
            self.state = TransactionState.OPEN
            raise
        self.state = TransactionState.ABORTED
        self._owner.ended(self)
        for partition, ids in self._acks.items():
            partition.redeliver_aborted(ids)

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None:
            await self.commit()
        elif self.state is TransactionState.OPEN:
            await self.abort()

    def _check_can_end(self, what: str) -> None:
        if self.state is not TransactionState.OPEN:
            raise TransactionStateError(
                f"cannot {what} the transaction of {self.transactional_id!r}: it is "
                f"{self.state.value}"
            )

    async def _settle_and_check(self) -> None:
        """Every send settled; raises if one failed or the transaction must be aborted."""
        await self._settle_sends()
        self._owner.transport.check_usable()  # fenced first: that ends the producer
        failed = self._failed_sends()
        if failed and self.must_abort is None:
            self.must_abort = TransactionAbortableError(
                f"{failed} messages sent in the transaction of {self.transactional_id!r} "
                "failed: abort it"
            )
        if self.must_abort is not None:
            raise type(self.must_abort)(str(self.must_abort))

    def _failed_sends(self) -> int:
        return sum(p.failed_count - before for p, before in self._producers.items())

    async def _settle_sends(self) -> None:
        """Every message sent in the transaction confirmed or failed."""
        await asyncio.gather(*(producer.flush() for producer in self._producers))
