"""The sink: ``df.write.format("msgclient")`` and ``df.writeStream.format("msgclient")``.

Spark pickles the writers to its Python workers, so they hold only the parsed options and
the input columns; the executors' clients live in ``writing``. At-least-once by default:
a task ends only when the broker confirmed each of its rows, and a task that fails (or is
retried) may have written some of its rows already; on Pulsar with the same producer names
and sequence ids (``stable_ids``). With ``exactlyOnce`` (Kafka), each task prepares a
transaction and the driver commits them all (``exactly_once``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from msgclient.spark.exactly_once import abort_tasks, write_in_transaction
from msgclient.spark.positions import Protocol
from msgclient.spark.sink_options import InputColumns, SinkOptions
from msgclient.spark.stable_ids import write_with_stable_ids
from msgclient.spark.task_scope import TaskScope, write_of
from msgclient.spark.writing import sink_client, write_rows
from msgclient.transaction import PreparedTransaction

log = logging.getLogger("msgclient.spark")


@dataclass
class RowsWritten(WriterCommitMessage):
    """What a task reports to the driver: how many rows it wrote (all confirmed) and, with
    exactlyOnce, the transaction they wait in."""

    rows: int
    prepared: PreparedTransaction | None = None
    replayed: bool = False  # exactlyOnce: the micro-batch was committed before (a replay)


class _RowWriter:
    """What both writers do: write a task's rows, commit or abort what the tasks wrote."""

    def __init__(self, options: SinkOptions, columns: InputColumns) -> None:
        self.options = options
        self.columns = columns
        # A batch write's name for its transactional ids (a streaming query has its id).
        self.job_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RowsWritten:
        if self.options.exactly_once:
            scope = TaskScope.of_task(self.job_id)
            task = write_in_transaction(self.options, self.columns, iterator, scope)
            return RowsWritten(task.rows, task.prepared, task.replayed)
        if self.options.protocol is Protocol.PULSAR:
            scope = TaskScope.of_task(self.job_id)
            return RowsWritten(write_with_stable_ids(self.options, self.columns, iterator, scope))
        return RowsWritten(write_rows(self.options, self.columns, iterator))

    def _commit(self, messages: Sequence[WriterCommitMessage | None], what: str) -> None:
        written = _written(messages)
        prepared = [m.prepared for m in written if m.prepared is not None]
        if prepared:
            client = sink_client(self.options)
            for transaction in prepared:
                client.commit_prepared(transaction)
            if len(prepared) > 1:
                # tansu closes a transaction only if every transaction that wrote to a
                # partition it wrote has ended (docs/spark.md): the first ones ended could
                # hold read_committed readers back for good. Ended again, now that all
                # have, they all close; Kafka answers a repeated commit as done.
                for transaction in prepared:
                    client.commit_prepared(transaction)
        replayed = sum(m.rows for m in written if m.replayed)
        log.info(
            "msgclient sink: %s: %d rows written%s",
            what,
            sum(m.rows for m in written) - replayed,
            f" ({replayed} rows of a replay written before)" if replayed else "",
        )

    def _abort(
        self, messages: Sequence[WriterCommitMessage | None], what: str, write: str | None
    ) -> None:
        """``write``: what names the tasks' transactional ids, if known."""
        written = _written(messages)
        if not self.options.exactly_once:
            log.warning(
                "msgclient sink: %s did not complete (it failed or was stopped); %d rows of "
                "the tasks that finished are stored (at-least-once: a retry writes them again)",
                what,
                sum(m.rows for m in written),
            )
            return
        prepared = [m.prepared for m in written if m.prepared is not None]
        if write is None and prepared:
            write = write_of(prepared[0].transactional_id)
        if write is None:  # no task reported: their ids' next use (the replay) ends them
            log.warning("msgclient sink: %s did not complete; no task reported", what)
            return
        if not abort_tasks(self.options, write, len(messages)):
            return
        log.warning(
            "msgclient sink: %s did not complete (it failed or was stopped); the "
            "transactions of its %d tasks are aborted: none of its rows is visible to "
            "read_committed readers",
            what,
            len(messages),
        )


class BatchWriter(_RowWriter, DataSourceArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._commit(messages, "write")

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._abort(messages, "the write", self.job_id)


class StreamWriter(_RowWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        # The query's id is known to the tasks only: their reports name it.
        self._abort(messages, f"micro-batch {batchId}", None)


def _written(messages: Sequence[WriterCommitMessage | None]) -> list[RowsWritten]:
    return [m for m in messages if isinstance(m, RowsWritten)]
