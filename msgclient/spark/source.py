"""The Spark data source ``msgclient``: batch and streaming readers (pyspark >= 4.2), and
the writers of ``sink``.

Spark pickles the readers to its Python workers, so they hold only parsed options and
plain offsets; clients open inside each call or each ``read`` and close before it returns.
Spark's Python data source API is untyped: ``Any`` appears at that boundary only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from msgclient.spark.errors import SourceOptionError
from msgclient.spark.metadata import TopicPartition
from msgclient.spark.options import SourceOptions, parse_options
from msgclient.spark.partition_reader import read_range
from msgclient.spark.planning import (
    Offsets,
    PartitionRange,
    initial_offsets,
    latest_offsets,
    next_end,
    plan_batch,
    run,
    stream_ranges,
)
from msgclient.spark.positions import earliest, from_json, to_json
from msgclient.spark.sink import BatchWriter, StreamWriter
from msgclient.spark.sink_options import input_columns, parse_sink_options

log = logging.getLogger("msgclient.spark")

OffsetJson = dict[str, dict[str, int | str]]


class MsgClientDataSource(DataSource):
    """``spark.read.format("msgclient")`` and ``spark.readStream.format("msgclient")``."""

    @classmethod
    def name(cls) -> str:
        return "msgclient"

    def schema(self) -> str:
        # Every option is checked here, so that a bad one fails at load(), not at the
        # first action.
        options = parse_options(self.options, streaming=None)
        from msgclient.spark.schema import spark_schema

        return spark_schema(options.protocol, options.include_headers)

    def reader(self, schema: Any) -> BatchReader:
        return BatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: Any) -> StreamReader:
        return StreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema: Any, overwrite: bool) -> BatchWriter:
        # Checked on the driver as Spark plans the write: a bad option or column fails
        # it before any task runs.
        options = parse_sink_options(self.options, overwrite)
        return BatchWriter(options, input_columns(schema, options))

    def streamWriter(self, schema: Any, overwrite: bool) -> StreamWriter:
        options = parse_sink_options(self.options, overwrite)
        return StreamWriter(options, input_columns(schema, options))


class RangePartition(InputPartition):
    """One range of one topic partition: a Spark input partition."""

    def __init__(self, part: PartitionRange) -> None:
        super().__init__(str(part.tp))
        self.part = part


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[RangePartition]:
        ranges = run(plan_batch(self.options))
        log.info("msgclient source: %d input partitions", len(ranges))
        return [RangePartition(part) for part in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"topic": {"partition": position}}`` with sorted keys (Spark compares
    them as strings); positions as ``positions.to_json`` writes them."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.target: OffsetJson | None = None  # Trigger.AvailableNow: nothing past this
        self.latest_seen: OffsetJson | None = None
        self.last_batch_at = time.time()

    def initialOffset(self) -> OffsetJson:
        return self._json(run(initial_offsets(self.options)))

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._json(run(latest_offsets(self.options)))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        begin = self._offsets(start)
        latest = run(latest_offsets(self.options))
        self.latest_seen = self._json(latest)
        if self.target is not None:
            target = self._offsets(self.target)
            latest = {tp: earliest(top, target[tp]) for tp, top in latest.items() if tp in target}
        max_units, min_units = self._limits(limit)
        delay_over = time.time() - self.last_batch_at >= self.options.max_trigger_delay_ms / 1000
        if delay_over or self.target is not None:
            min_units = None  # AvailableNow must reach its target, whatever is left
        end = self._json(run(next_end(self.options, begin, latest, max_units, min_units)))
        if end != start:
            self.last_batch_at = time.time()
        return end

    def reportLatestOffset(self) -> OffsetJson | None:
        return self.latest_seen

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[RangePartition]:
        ranges = stream_ranges(self.options, self._offsets(start), self._offsets(end))
        return [RangePartition(part) for part in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: OffsetJson) -> None:
        """Nothing to do: the brokers keep no state for the source (offsets live in
        Spark's checkpoint), so retention alone decides what stays readable."""

    def stop(self) -> None:
        """Nothing is open between calls."""

    # -- helpers -----------------------------------------------------------------------

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        """The engine's limit wins over the options (ReadAllAvailable: none at all)."""
        options = self.options
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, options.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            return options.max_offsets_per_trigger, limit.min_rows
        return None, None

    def _json(self, offsets: Offsets) -> OffsetJson:
        result: OffsetJson = {}
        for tp in sorted(offsets, key=lambda tp: (tp.topic, str(tp.partition))):
            result.setdefault(tp.topic, {})[str(tp.partition)] = to_json(offsets[tp])
        return result

    def _offsets(self, data: Any) -> Offsets:
        what = "the offsets Spark handed back (from the checkpoint?)"
        if not isinstance(data, dict) or not all(isinstance(p, dict) for p in data.values()):
            raise SourceOptionError("startingOffsets", f"{what} are not topic -> partition maps")
        offsets: Offsets = {}
        for topic, parts in data.items():
            for index, value in parts.items():
                tp = TopicPartition(topic, int(index))
                offsets[tp] = from_json(self.options.protocol, value, f"{what}: {tp}")
        return offsets


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # With no range to read, Spark still runs one task, with a partition of its own.
    if not isinstance(partition, RangePartition):
        return iter(())
    return read_range(options, partition.part)
