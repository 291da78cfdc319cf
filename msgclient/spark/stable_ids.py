"""Pulsar writes whose replay a broker can drop: deterministic producer names and
sequence ids (docs/spark.md, "Pulsar: replays with the same ids").

A task writes with producers of its own (one per topic), named after it
(``msgclient-sink-<query id or write>-<Spark partition>``), whose sequence ids start at
``micro-batch id << 32`` (0 for a batch write) and count the rows of each topic partition
in their order. Keyed rows go where their key hashes; a batch's rows with neither key nor
partition go to one partition, taken in turn from the task's Spark partition on. A replay
(a retried task, a micro-batch replayed after a restart) thus sends each row to the same
partition with the same producer name and sequence id as before, and a broker with
deduplication enabled drops what it stored already. pulsar-lite has no deduplication:
there a replay writes its rows again (at-least-once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow as pa

from msgclient import blocking
from msgclient.errors import MsgClientError
from msgclient.spark.sink_options import InputColumns, SinkOptions
from msgclient.spark.task_scope import TaskScope
from msgclient.spark.writing import send_rows, sink_client

BATCH_SHIFT = 32  # sequence ids of micro-batch N: N << 32 on (2**32 rows a task at most)


def first_sequence_id(scope: TaskScope) -> int:
    return 0 if scope.batch_id is None else scope.batch_id << BATCH_SHIFT


def write_with_stable_ids(
    options: SinkOptions,
    columns: InputColumns,
    batches: Iterator[pa.RecordBatch],
    scope: TaskScope,
) -> int:
    """Send the task's rows with its own producers; how many (all confirmed)."""
    client = sink_client(options)
    producers: dict[str, blocking.Producer] = {}
    partitions: dict[str, int] = {}
    turns: dict[str, int] = {}

    def producer_of(topic: str) -> blocking.Producer:
        producer = producers.get(topic)
        if producer is None:
            producer = producers[topic] = client.create_producer(
                topic,
                **options.producer_options,
                producer_name=scope.name,
                initial_sequence_id=first_sequence_id(scope) - 1,
            )
        return producer

    def pin_unkeyed(topic: str) -> int:
        if topic not in partitions:
            partitions[topic] = len(client.get_topic_partitions(topic))
        turn = turns[topic] = turns.get(topic, -1) + 1
        return (scope.partition + turn) % partitions[topic]

    try:
        return send_rows(options, columns, batches, producer_of, pin_unkeyed=pin_unkeyed)
    finally:
        for producer in producers.values():
            with contextlib.suppress(MsgClientError):  # nothing unconfirmed is left
                producer.close()
