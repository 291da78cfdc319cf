"""The sink: ``df.write.format("msgclient")`` and ``df.writeStream.format("msgclient")``.

Spark pickles the writers to its Python workers, so they hold only the parsed options and
the input columns; the executors' clients live in ``writing``. At-least-once: a task ends
only when the broker confirmed each of its rows, and a task that fails (or is retried)
may have written some of its rows already.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from msgclient.spark.sink_options import InputColumns, SinkOptions
from msgclient.spark.writing import write_rows

log = logging.getLogger("msgclient.spark")


@dataclass
class RowsWritten(WriterCommitMessage):
    """What a task reports to the driver: how many rows it wrote (all confirmed)."""

    rows: int


class _RowWriter:
    """What a task does in both writers: write its rows, report how many."""

    def __init__(self, options: SinkOptions, columns: InputColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RowsWritten:
        return RowsWritten(write_rows(self.options, self.columns, iterator))


class BatchWriter(_RowWriter, DataSourceArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.info("msgclient sink: %d rows written", _rows(messages))

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.warning(
            "msgclient sink: the write did not complete (it failed or was stopped); %d rows "
            "of the tasks that finished are stored (at-least-once: a retry writes them again)",
            _rows(messages),
        )


class StreamWriter(_RowWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.info("msgclient sink: micro-batch %d: %d rows written", batchId, _rows(messages))

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "msgclient sink: micro-batch %d did not complete (it failed, or the query was "
            "stopped); %d rows of the tasks that finished are stored (at-least-once: its "
            "replay writes them again)",
            batchId,
            _rows(messages),
        )


def _rows(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.rows for m in messages if isinstance(m, RowsWritten))
