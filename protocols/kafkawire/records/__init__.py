"""Kafka RecordBatch v2 (magic 2), sans-IO, one direction a module: ``writer`` encodes a
producer's batches; ``reader`` decodes Fetch records (read committed included), runs of
alike records by columns into a ``run.RecordRun`` and the others by ``record``; ``layout``
is the format both directions share."""

from protocols.kafkawire.records.reader import decode_record_batches
from protocols.kafkawire.records.writer import (
    encode_record_batch,
    encode_record_columns,
    with_producer_state,
)

__all__ = [
    "decode_record_batches",
    "encode_record_batch",
    "encode_record_columns",
    "with_producer_state",
]
