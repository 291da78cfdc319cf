"""The sink: ``df.write.format("msgclient")`` and ``df.writeStream.format("msgclient")``.

Spark pickles the writers to its Python workers, so they hold only the parsed options and
the input columns; the executors' clients live in ``writing``. At-least-once by default:
a task ends only when the broker confirmed each of its rows, and a task that fails (or is
retried) may have written some of its rows already. With ``exactlyOnce`` (Kafka), each
task prepares a transaction and the driver commits them all (``exactly_once``).
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

from msgclient.errors import MsgClientError
from msgclient.spark.exactly_once import TaskScope, write_in_transaction
from msgclient.spark.sink_options import InputColumns, SinkOptions
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
        if not self.options.exactly_once:
            return RowsWritten(write_rows(self.options, self.columns, iterator))
        scope = TaskScope.of_task(self.job_id)
        task = write_in_transaction(self.options, self.columns, iterator, scope)
        return RowsWritten(task.rows, task.prepared, task.replayed)

    def _commit(self, messages: Sequence[WriterCommitMessage | None], what: str) -> None:
        written = _written(messages)
        if self.options.exactly_once:
            client = sink_client(self.options)
            for message in written:
                if message.prepared is not None:
                    client.commit_prepared(message.prepared)
        replayed = sum(m.rows for m in written if m.replayed)
        log.info(
            "msgclient sink: %s: %d rows written%s",
            what,
            sum(m.rows for m in written) - replayed,
            f" ({replayed} rows of a replay written before)" if replayed else "",
        )

    def _abort(self, messages: Sequence[WriterCommitMessage | None], what: str) -> None:
        written = _written(messages)
        if not self.options.exactly_once:
            log.warning(
                "msgclient sink: %s did not complete (it failed or was stopped); %d rows of "
                "the tasks that finished are stored (at-least-once: a retry writes them again)",
                what,
                sum(m.rows for m in written),
            )
            return
        client = sink_client(self.options)
        for message in written:
            if message.prepared is None:
                continue
            try:
                client.abort_prepared(message.prepared)
            except MsgClientError as error:  # its id's next epoch aborts it
                log.warning(
                    "msgclient sink: %s: aborting %s failed: %s",
                    what,
                    message.prepared.transactional_id,
                    error,
                )
        log.warning(
            "msgclient sink: %s did not complete (it failed or was stopped); its "
            "transactions are aborted, none of its rows is visible to read_committed readers",
            what,
        )


class BatchWriter(_RowWriter, DataSourceArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._commit(messages, "write")

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._abort(messages, "the write")


class StreamWriter(_RowWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        self._abort(messages, f"micro-batch {batchId}")


def _written(messages: Sequence[WriterCommitMessage | None]) -> list[RowsWritten]:
    return [m for m in messages if isinstance(m, RowsWritten)]
