"""The sink's executor side: Arrow batches of rows in, ``send_many`` calls out.

One client per connection and one producer per topic live as long as the executor's
Python worker, which Spark reuses from task to task: a task pays no connection or
producer registration. A task's rows are written in its order, each Arrow batch with one
``send_many`` per (topic, partition) it holds, and the task returns only when the broker
has confirmed every row; a failed send fails the task with its error, and the producer
that failed is dropped (the next task makes a new one).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from msgclient import blocking
from msgclient.errors import MsgClientError
from msgclient.sent_messages import SentMessages
from msgclient.spark.positions import Protocol
from msgclient.spark.sink_options import InputColumns, SinkOptions

Target = tuple[str, int | None]  # topic, partition (None: the producer routes)

_lock = threading.Lock()
_clients: dict[tuple[str, str], blocking.Client] = {}
_producers: dict[tuple[str, str, str, str], blocking.Producer] = {}


def write_rows(
    options: SinkOptions, columns: InputColumns, batches: Iterator[pa.RecordBatch]
) -> int:
    """Send the rows of ``batches`` with this process's producers (at-least-once); how
    many were written (all confirmed)."""
    return send_rows(
        options,
        columns,
        batches,
        lambda topic: _producer(options, topic),
        lambda topic: _drop(options, topic),
    )


def send_rows(
    options: SinkOptions,
    columns: InputColumns,
    batches: Iterator[pa.RecordBatch],
    producer_of: Callable[[str], blocking.Producer],
    failed: Callable[[str], None] = lambda topic: None,
    pin_unkeyed: Callable[[str], int] | None = None,
) -> int:
    """Send the rows of ``batches`` with the producer of each topic; ``failed(topic)``: a
    send to it failed (its error is raised then). ``pin_unkeyed(topic)``: the partition
    of a batch's rows with neither key nor partition (else the producer routes them).

    One call is confirmed while the next batch is read and queued: Spark's conversion of
    a batch overlaps the broker's work on the previous one, and a task still ends only
    when every row is confirmed."""
    written = 0
    in_flight: tuple[str, concurrent.futures.Future[SentMessages]] | None = None
    for batch in batches:
        for (topic, partition), rows in _by_target(batch, options, columns):
            producer = producer_of(topic)
            for pinned, part in _pinned(rows, topic, partition, columns, pin_unkeyed):
                try:
                    queued = producer.send_many_async(
                        _values(part.column("value")),
                        keys=_keys(part.column("key"), options) if columns.key else None,
                        properties=_properties(part.column("headers"), options)
                        if columns.headers
                        else None,
                        partition=pinned,
                    )
                except MsgClientError:
                    failed(topic)
                    raise
                if in_flight is not None:
                    _confirm(*in_flight, failed)
                in_flight = (topic, queued)
        written += batch.num_rows
    if in_flight is not None:
        _confirm(*in_flight, failed)
    return written


def _confirm(
    topic: str,
    queued: concurrent.futures.Future[SentMessages],
    failed: Callable[[str], None],
) -> None:
    try:
        queued.result()
    except MsgClientError:
        failed(topic)
        raise


def _pinned(
    rows: pa.RecordBatch,
    topic: str,
    partition: int | None,
    columns: InputColumns,
    pin_unkeyed: Callable[[str], int] | None,
) -> Iterator[tuple[int | None, pa.RecordBatch]]:
    """``rows`` by the partition to send them to (None: the producer routes by key)."""
    if partition is not None or pin_unkeyed is None:
        yield partition, rows
        return
    keyless = rows.column("key").is_null() if columns.key else None
    if keyless is None or keyless.true_count == rows.num_rows:
        yield pin_unkeyed(topic), rows
        return
    if keyless.true_count:
        yield pin_unkeyed(topic), rows.filter(keyless)
        rows = rows.filter(pc.invert(keyless))
    yield None, rows


def first_topic(batch: pa.RecordBatch, options: SinkOptions) -> str:
    """The topic the first row of ``batch`` goes to."""
    if options.topic is not None:
        return options.topic
    topic: str | None = batch.column("topic")[0].as_py()
    if topic is None:
        raise MsgClientError("msgclient sink: row 0 of a batch has a null topic")
    return topic


# -- rows to columns ---------------------------------------------------------------------


def _by_target(
    batch: pa.RecordBatch, options: SinkOptions, columns: InputColumns
) -> Iterator[tuple[Target, pa.RecordBatch]]:
    """The rows of each (topic, partition) of ``batch``, in their order within each."""
    if not columns.topic and not columns.partition:
        assert options.topic is not None
        yield (options.topic, None), batch
        return
    topics = batch.column("topic") if columns.topic else None
    if topics is not None and topics.null_count:
        row = topics.is_null().index(True).as_py()
        raise MsgClientError(f"msgclient sink: row {row} of a batch has a null topic")
    keys = pa.table(
        {
            "topic": topics if topics is not None else pa.nulls(batch.num_rows, pa.string()),
            "partition": batch.column("partition")
            if columns.partition
            else pa.nulls(batch.num_rows, pa.int32()),
        }
    )
    for group in keys.group_by(["topic", "partition"]).aggregate([]).to_pylist():
        topic = group["topic"] if topics is not None else options.topic
        assert topic is not None
        mask = _equal(keys.column("topic"), group["topic"])
        mask = pc.and_(mask, _equal(keys.column("partition"), group["partition"]))
        yield (topic, group["partition"]), batch.filter(mask)


def _equal(column: pa.ChunkedArray, value: object) -> pa.ChunkedArray:
    return column.is_null() if value is None else pc.fill_null(pc.equal(column, value), False)


def _values(column: pa.Array) -> Sequence[bytes | None]:
    values: list[bytes | None] = column.cast(pa.binary()).to_pylist()
    return values


def _keys(column: pa.Array, options: SinkOptions) -> Sequence[str | bytes | None]:
    keys: list[str | bytes | None] = column.to_pylist()
    if options.protocol is Protocol.PULSAR and column.type == pa.binary():
        # A Pulsar key is text, and bytes go base64-encoded as Java's keyBytes: a binary
        # key (the source's column, Spark's Kafka schema) that is UTF-8 is sent as text,
        # so that a copy keeps its keys (and Key_Shared hashes the same).
        return [_as_text(key) for key in keys]
    return keys


def _as_text(key: str | bytes | None) -> str | bytes | None:
    if isinstance(key, bytes):
        try:
            return key.decode("utf-8")
        except UnicodeDecodeError:
            return key
    return key


def _properties(column: pa.Array, options: SinkOptions) -> list[Mapping[str, str] | None]:
    """Kafka headers as msgclient keeps them (text; bytes that are not UTF-8 as surrogates,
    written back as the same bytes); Pulsar properties must be UTF-8 text."""
    errors = "surrogateescape" if options.protocol is Protocol.KAFKA else "strict"
    result: list[Mapping[str, str] | None] = []
    for headers in column.to_pylist():
        if not headers:
            result.append(None)
            continue
        try:
            result.append({h["key"]: _text(h["value"], errors) for h in headers})
        except UnicodeDecodeError as error:
            raise MsgClientError(
                f"msgclient sink: a header value is not UTF-8 text ({error}); Pulsar "
                "properties are text"
            ) from None
    return result


def _text(value: bytes | str | None, errors: str) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", errors)


# -- clients and producers of this process -----------------------------------------------


def _producer(options: SinkOptions, topic: str) -> blocking.Producer:
    key = _producer_key(options, topic)
    with _lock:
        producer = _producers.get(key)
        if producer is None:
            producer = _client(options).create_producer(topic, **options.producer_options)
            _producers[key] = producer
        return producer


def sink_client(options: SinkOptions) -> blocking.Client:
    """This process's client of ``options``' broker."""
    with _lock:
        return _client(options)


def drop_client(options: SinkOptions) -> None:
    """Close this process's client of ``options``' broker (and its producers): it is in a
    state the next task must not inherit."""
    key = _client_key(options)
    with _lock:
        client = _clients.pop(key, None)
        for producer_key in [k for k in _producers if k[:2] == key]:
            del _producers[producer_key]
    if client is not None:
        with contextlib.suppress(Exception):  # a failed client: closing it is best effort
            client.close()


def _client(options: SinkOptions) -> blocking.Client:
    key = _client_key(options)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = blocking.Client(options.url, **options.client_options)
    return client


def _client_key(options: SinkOptions) -> tuple[str, str]:
    return options.url, repr(sorted(options.client_options.items()))


def _producer_key(options: SinkOptions, topic: str) -> tuple[str, str, str, str]:
    return (*_client_key(options), topic, repr(sorted(options.producer_options.items())))


def _drop(options: SinkOptions, topic: str) -> None:
    with _lock:
        producer = _producers.pop(_producer_key(options, topic), None)
    if producer is not None:
        with contextlib.suppress(MsgClientError):  # it failed already: a new one comes next
            producer.close()


@atexit.register
def _close_all() -> None:
    """Every row was confirmed before its task ended: closing loses nothing."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
        _producers.clear()
    for client in clients:
        with contextlib.suppress(Exception):  # the interpreter is exiting
            client.close()
