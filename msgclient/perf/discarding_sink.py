"""A Spark data source that takes rows as the msgclient sink does (Arrow batches, in the
Python workers) and drops them: what Spark costs a Python sink before it sends anything.
Its own module: the perf runner imports pyspark only when asked for a Spark benchmark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


class _Discard(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class DiscardingSink(DataSource):
    """Takes the rows as the msgclient sink does (Arrow batches) and drops them."""

    @classmethod
    def name(cls) -> str:
        return "msgclient-perf-discard"

    def writer(self, schema: Any, overwrite: bool) -> _Discard:
        return _Discard()
