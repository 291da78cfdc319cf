"""Exactly-once writes to Kafka (``exactlyOnce=true``): a two-phase commit.

- Each task writes its rows in a transaction of a transactional id of its own, one per
  (query, Spark partition): ``msgclient-sink-<query id>-<partition>`` (a batch write's
  id stands for the query). Registering the id takes a new epoch, which aborts whatever
  an earlier attempt of the same partition left open (a failed task, a replay after a
  driver crash). The task prepares (every row stored, none visible to read_committed
  consumers) and reports the transaction to the driver.
- The driver commits every task's transaction when Spark commits the write, or aborts
  them (``sink.py``).
- A streaming task also commits, inside its transaction, an offset of a consumer group of
  the same name: the micro-batch id, for (the first topic it writes, partition 0). A
  micro-batch replayed after the driver committed it to Kafka, but before Spark logged the
  commit, finds its id there and writes nothing again. Spark replays a micro-batch with the
  same rows in the same partitions (what its own exactly-once sinks rely on too).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from msgclient import blocking
from msgclient.admin import TopicPartition
from msgclient.errors import MsgClientError
from msgclient.spark.sink_options import InputColumns, SinkOptions
from msgclient.spark.task_scope import TaskScope, task_name
from msgclient.spark.writing import drop_client, first_topic, send_rows, sink_client
from msgclient.transaction import PreparedTransaction

log = logging.getLogger("msgclient.spark")


@dataclass(frozen=True)
class TaskWrite:
    rows: int
    prepared: PreparedTransaction | None  # None: nothing to commit
    replayed: bool = False  # the micro-batch's rows were committed before


def abort_tasks(options: SinkOptions, write: str, partitions: int) -> bool:
    """Abort the transactions of every task of ``write``, prepared or left open by a task
    that failed: each id is registered anew, which makes the broker abort its open
    transaction (and fences a task still running). A client of its own: one coordinator
    link per id, closed at the end. Whether it could."""
    try:
        with blocking.Client(options.url, **options.client_options) as client:
            for partition in range(partitions):
                client.new_transaction(transactional_id=task_name(write, partition)).abort()
        return True
    except MsgClientError as error:  # the write fails anyway: with its own error
        log.warning(
            "msgclient sink: the transactions of %s could not be aborted (%s); each ends "
            "when its id is used again, or at the broker's transaction timeout",
            write,
            error,
        )
        return False


def write_in_transaction(
    options: SinkOptions,
    columns: InputColumns,
    batches: Iterator[pa.RecordBatch],
    scope: TaskScope,
) -> TaskWrite:
    """Write the task's rows in its transaction and prepare it."""
    first = next(batches, None)
    if first is None:
        return TaskWrite(0, None)
    rows = itertools.chain([first], batches)
    client = sink_client(options)
    producers: dict[str, blocking.Producer] = {}

    def producer_of(topic: str) -> blocking.Producer:
        producer = producers.get(topic)
        if producer is None:
            producer = producers[topic] = client.create_producer(
                topic, transactional_id=scope.name, **options.producer_options
            )
        return producer

    try:
        marker = (first_topic(first, options), 0)
        producer_of(marker[0])  # registers the id: an earlier attempt's transaction ends
        if scope.batch_id is not None:
            admin = client.admin()
            done = admin.list_consumer_group_offsets(scope.name, [marker])[TopicPartition(*marker)]
            if done >= scope.batch_id:
                log.info("msgclient sink: %s: batch %d written already", scope.name, done)
                return TaskWrite(sum(batch.num_rows for batch in rows), None, replayed=True)
        transaction = client.new_transaction(transactional_id=scope.name)
        try:
            written = send_rows(options, columns, rows, producer_of)
            if scope.batch_id is not None:
                transaction.commit_offsets(scope.name, {marker: scope.batch_id})
            return TaskWrite(written, transaction.prepare())
        except BaseException:
            _abort(transaction, options, scope)
            raise
    finally:
        for producer in producers.values():
            with contextlib.suppress(MsgClientError):  # nothing unconfirmed is left
                producer.close()


def _abort(transaction: blocking.Transaction, options: SinkOptions, scope: TaskScope) -> None:
    """The task failed: abort its transaction now rather than when the retry takes the id
    over; if even that fails, the next task of this process gets a new client."""
    try:
        transaction.abort()
    except MsgClientError as error:
        log.warning("msgclient sink: %s: abort failed (%s); dropping the client", scope.name, error)
        drop_client(options)
