"""Executor side: read exactly one range of one partition into Arrow record batches.

The client opens when Spark starts reading the partition and closes when the range is
done (or Spark stops early). It runs on an event loop owned by the read, driven batch by
batch: between batches nothing runs, so nothing leaks into Spark's threads. (The blocking
facade costs a thread hand-off per message: about 7x slower here than awaiting the async
API; docs/spark.md has the figures.)

Kafka ranges are read with a Reader of the partition. A Pulsar partition is a topic of its
own, so its range is read by a consumer assigned to it (exclusive, non-durable, from the
range's start): as the Reader, without the Reader's per-message cumulative ack and id
comparisons, which cost it 2.5x in throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterator

import pyarrow as pa

import msgclient
from msgclient.errors import MsgClientError, ReceiveTimeoutError
from msgclient.message import Message
from msgclient.message_batch import MessageBatch
from msgclient.options import ConsumerType, SubscriptionMode
from msgclient.spark.errors import report_data_loss
from msgclient.spark.metadata import PROBE_MS, first_after
from msgclient.spark.options import SourceOptions
from msgclient.spark.planning import PartitionRange
from msgclient.spark.positions import (
    WHOLE,
    Protocol,
    PulsarPosition,
    reader_start,
)
from msgclient.spark.schema import BatchBuilder
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarIdBytes, PulsarMessageId


def read_range(options: SourceOptions, part: PartitionRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``part`` in batches of up to ``batchRows`` rows."""
    with asyncio.Runner() as runner:
        reader = RangeReader(options, part)
        try:
            runner.run(reader.open())
            while not reader.done:
                batch = runner.run(reader.next_batch())
                if batch.num_rows:
                    yield batch
        finally:
            runner.run(reader.close())


class RangeReader:
    """One range: a Reader (Kafka) or an assigned consumer (Pulsar) from its start; skips
    what precedes the start, stops at the end."""

    def __init__(self, options: SourceOptions, part: PartitionRange) -> None:
        self._options = options
        self._part = part
        self._client: msgclient.Client | None = None
        self._consumer: msgclient.Consumer | None = None  # Pulsar
        self._read: Callable[[int], Awaitable[Message]] | None = None
        self._next_offset = part.start if isinstance(part.start, int) else -1  # Kafka
        self._read_key = (  # Pulsar: where the last message read (or the start) is
            part.start.key() if isinstance(part.start, PulsarPosition) else (-1, -1, -1)
        )
        self._first = True
        self._id_bytes = PulsarIdBytes(-1)
        tp = part.tp
        self._builder = BatchBuilder(
            options.protocol, tp.topic, tp.partition, options.include_headers
        )
        self.done = False

    async def open(self) -> None:
        tp, options = self._part.tp, self._options
        client = self._client = msgclient.Client(options.url, **options.client_options)
        start, inclusive = reader_start(self._part.start, tp.topic, tp.partition)
        if options.protocol is Protocol.KAFKA:
            reader = await client.create_reader(
                tp.topic,
                start,
                partition=tp.partition,
                start_message_id_inclusive=inclusive,
                receiver_queue_size=options.receiver_queue_size,
            )
            self._read = reader.read_next
            return
        names = await client.get_topic_partitions(tp.topic)
        # Pulsar names partitions "<topic>-partition-<i>"; their ids carry i.
        partitioned = names[tp.partition].endswith(f"-partition-{tp.partition}")
        self._id_bytes = PulsarIdBytes(tp.partition if partitioned else -1)
        self._consumer = await client.subscribe(
            names[tp.partition],
            f"msgclient-spark-{uuid.uuid4().hex[:12]}",
            consumer_type=ConsumerType.Exclusive,
            subscription_mode=SubscriptionMode.NonDurable,
            initial_position=msgclient.InitialPosition.Earliest,
            start_message_id=start if isinstance(start, msgclient.MessageId) else None,
            start_message_id_inclusive=inclusive,
            receiver_queue_size=options.receiver_queue_size,
        )

    async def close(self) -> None:
        if self._consumer is not None:
            # pulsar-lite keeps non-durable subscriptions after their consumer closes.
            with contextlib.suppress(MsgClientError):
                await self._consumer.unsubscribe()
        if self._client is not None:
            await self._client.close()  # and the reader or consumer with it

    async def next_batch(self) -> pa.RecordBatch:
        if self._options.protocol is Protocol.KAFKA:
            messages, offsets = await self._take_kafka()
            return self._builder.build(messages, offsets)
        return await self._take_pulsar()

    async def _take_kafka(self) -> tuple[list[Message], list[int]]:
        """Up to ``batchRows`` messages of the range, and their offsets."""
        assert self._read is not None and isinstance(self._part.end, int)
        read, timeout, end = self._read, self._options.poll_timeout_ms, self._part.end
        rows = self._options.batch_rows
        taken: list[Message] = []
        offsets: list[int] = []
        next_offset = self._next_offset
        try:
            while len(taken) < rows:
                try:
                    message = await read(timeout)
                except ReceiveTimeoutError:
                    self._missing(f"offset {max(next_offset, 0)}")
                    break
                message_id = message.message_id()
                assert type(message_id) is KafkaMessageId
                offset = message_id.offset
                if offset < next_offset:
                    continue
                if offset >= end:
                    self.done = True
                    break
                if self._first:
                    self._first = False
                    if 0 <= next_offset < offset:
                        await self._check_gap(next_offset, offset)
                taken.append(message)
                offsets.append(offset)
                next_offset = offset + 1
                if next_offset >= end:
                    self.done = True
                    break
        finally:
            self._next_offset = next_offset
        return taken, offsets

    async def _take_pulsar(self) -> pa.RecordBatch:
        """About ``batchRows`` messages of the range, read as columns (receive_many: no
        Message object per message), with their serialized ids."""
        end = self._part.end
        assert self._consumer is not None and isinstance(end, PulsarPosition)
        receive_many, timeout = self._consumer.receive_many, self._options.poll_timeout_ms
        end_key, end_entry, whole = end.key(), (end.ledger, end.entry), end.batch < 0
        rows = self._options.batch_rows
        runs: list[tuple[MessageBatch, int, int]] = []  # the parts of the batches in range
        ids: list[bytes] = []
        id_bytes = self._id_bytes
        read_key = self._read_key
        try:
            while len(ids) < rows and not self.done:
                try:
                    batch = await receive_many(rows - len(ids), timeout)
                except ReceiveTimeoutError:
                    self._missing(f"the message after {read_key}")
                    break
                # Usually all of a batch is in the range: one run. The rest of a start entry
                # (or a second copy of a message) is skipped, what follows the end is not
                # taken.
                start = last = -1  # the run being read: positions start..last
                for position, message_id in enumerate(batch.message_ids()):
                    assert type(message_id) is PulsarMessageId
                    index = message_id.batch_index
                    entry = (message_id.ledger_id, message_id.entry_id)
                    key = (*entry, index if index >= 0 else WHOLE)
                    if key > end_key:
                        self.done = True
                        break
                    # The end names a whole entry (an unbatched message, or a batch): done
                    # at its last message.
                    at_end = key == end_key or (
                        whole and entry == end_entry and index == message_id.batch_size - 1
                    )
                    if key > read_key:
                        ids.append(id_bytes(message_id))
                        read_key = key
                        if start < 0 or position != last + 1:  # the first run, or after a skip
                            if start >= 0:
                                runs.append((batch, start, last + 1))
                            start = position
                        last = position
                    if at_end:  # a range may begin at its end's last message: nothing to take
                        self.done = True
                        break
                if start >= 0:
                    runs.append((batch, start, last + 1))
        finally:
            # No acks: on pulsar-lite a cumulative ack on this subscription had the broker
            # dispatch the backlog again (2.6x the messages, measured).
            self._read_key = read_key
        return self._builder.build_columns(
            [k for b, i, j in runs for k in b.key_bytes()[i:j]],
            [v for b, i, j in runs for v in b.values()[i:j]],
            [t for b, i, j in runs for t in b.publish_timestamps()[i:j]],
            ids,
            [p for b, i, j in runs for p in b.properties()[i:j]] if self._builder.headers else [],
        )

    def _missing(self, position: str) -> None:
        """Nothing came within pollTimeoutMs though the range goes on: the messages are
        gone (deleted, expired, the topic recreated), or the broker is unreachable."""
        self.done = True
        report_data_loss(
            self._options.fail_on_data_loss,
            f"{self._part.tp}: no message within pollTimeoutMs={self._options.poll_timeout_ms} "
            f"at {position}, before the end of the range read ({self._part.end})",
        )

    async def _check_gap(self, expected: int, got: int) -> None:
        """Offsets skipped at the start: lost if the partition now starts after them (a gap
        within it is compaction or transaction markers, as Spark's Kafka source judges)."""
        assert self._client is not None
        first = await first_after(self._client, self._part.tp, None, PROBE_MS)
        if first is not None and isinstance(first, KafkaMessageId) and first.offset > expected:
            report_data_loss(
                self._options.fail_on_data_loss,
                f"{self._part.tp}: offsets {expected} to {first.offset - 1} no longer exist "
                f"(the partition starts at {first.offset}; {got} was read first)",
            )
