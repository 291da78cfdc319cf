"""Read committed (protocols/kafkawire/records/reader.py): random logs of transactional producers
decoded with their aborted transactions, against a model of the log and against
kafka-python's port of the Java client's filtering (``Fetcher.PartitionRecords``).

A log interleaves three transactional producers (transactions committed, aborted, or still
open at the end), batches outside any transaction, and offset gaps (compaction); each
batch under any codec. A Fetch returns it from the batch holding the fetch offset, maybe
cut short (the broker's size limit), with the aborted transactions a broker lists (those
whose marker is at or after the fetch offset) in any order.
"""

from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from msgclient.options import CompressionType
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.records import decode_record_batches
from tests.fuzz.strategies import examples
from tests.unit.kafka.test_read_committed import ABORT, COMMIT, marker, txn

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.consumer.fetcher import Fetcher as KafkaPythonFetcher
    from kafka.consumer.fetcher import IsolationLevel
    from kafka.record.memory_records import MemoryRecords
    from kafka.structs import TopicPartition

TOPIC, PARTITION = "payments", 0
LIMIT = 1 << 20
CODECS = st.sampled_from(
    [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD]
)
PRODUCERS = (1, 2, 3)
AbortedTransaction = namedtuple("AbortedTransaction", "producer_id first_offset")

# A batch of the log: its base and last offset, its bytes, and for each of its records
# (none for a marker) the offset; the fate of every record is kept apart.
Batch = tuple[int, int, bytes]


class Log:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.fate: dict[int, str] = {}  # record offset -> plain, committed, aborted, open
        self.aborted: list[tuple[int, int, int]] = []  # producer, first offset, marker
        self.open: dict[int, tuple[int, list[int]]] = {}  # producer -> first, offsets
        self.end = 0

    @property
    def last_stable_offset(self) -> int:
        firsts = [first for first, _ in self.open.values()]
        return min(firsts) if firsts else self.end


@st.composite
def logs(draw: st.DrawFn) -> Log:
    log = Log()
    offset = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 16))):
        action = draw(st.sampled_from(["plain", "data", "data", "data", "commit", "abort"]))
        producer = draw(st.sampled_from(PRODUCERS))
        codec = draw(CODECS)
        if action in ("commit", "abort"):
            if producer not in log.open:
                continue  # a marker ends an open transaction only
            first, offsets = log.open.pop(producer)
            kind = ABORT if action == "abort" else COMMIT
            log.batches.append((offset, offset, marker(offset, producer, kind)))
            for o in offsets:
                log.fate[o] = "aborted" if kind == ABORT else "committed"
            if kind == ABORT:
                log.aborted.append((producer, first, offset))
            offset += 1
        else:
            count = draw(st.integers(1, 4))
            values = [b"%d" % (offset + i) for i in range(count)]
            if action == "plain":
                data = txn(offset, -1, *values, transactional=False, compression=codec)
                for i in range(count):
                    log.fate[offset + i] = "plain"
            else:
                data = txn(offset, producer, *values, compression=codec)
                first, offsets = log.open.setdefault(producer, (offset, []))
                offsets.extend(range(offset, offset + count))
            log.batches.append((offset, offset + count - 1, data))
            offset += count
        offset += draw(st.sampled_from([0, 0, 0, 1, 3]))  # compaction leaves gaps
    for _, offsets in log.open.values():
        for o in offsets:
            log.fate[o] = "open"
    log.end = offset
    return log


def fetch(log: Log, fetch_offset: int, cut: int) -> tuple[bytes, list[int], int | None]:
    """What a broker returns from ``fetch_offset`` (``cut`` bytes short): the bytes, the
    offsets of the records in its complete batches, and the last offset of those."""
    batches = [b for b in log.batches if b[1] >= fetch_offset]
    data = b"".join(b[2] for b in batches)
    data = data[: len(data) - cut] if cut else data
    complete, size, last = [], 0, None
    for base, last_offset, batch in batches:
        size += len(batch)
        if size > len(data):
            break
        complete += [o for o in range(base, last_offset + 1) if o in log.fate]
        last = last_offset
    return data, complete, last


@settings(max_examples=examples(0.5))
@given(logs(), st.data())
def test_read_committed_delivers_what_the_model_and_kafka_python_deliver(
    log: Log, data: st.DataObject
) -> None:
    first = log.batches[0][0] if log.batches else 0
    fetch_offset = data.draw(st.integers(max(0, first - 2), log.end + 1))
    cut = data.draw(st.sampled_from([0, 0, 0, 1, 30, 100]))
    records, complete, last = fetch(log, fetch_offset, cut)
    listed = [(p, f) for p, f, at in log.aborted if at >= fetch_offset]
    listed = data.draw(st.permutations(listed))
    lso = log.last_stable_offset
    kept = [o for o in complete if o >= fetch_offset and log.fate[o] != "aborted"]
    read_to = fetch_offset if last is None else max(fetch_offset, last + 1)

    # Without the last stable offset (as kafka-python, which leaves it to the broker).
    offsets, values, next_offset = decode(records, fetch_offset, listed, -1)
    assert offsets == kept
    assert values == [b"%d" % o for o in kept]
    assert next_offset == read_to
    theirs, their_next = kafka_python(records, fetch_offset, listed)
    assert [(r.offset, r.value) for r in theirs] == list(zip(offsets, values, strict=True))
    assert their_next == next_offset

    # With it: nothing of an open transaction or after it; the next fetch starts there.
    offsets, values, next_offset = decode(records, fetch_offset, listed, lso)
    assert offsets == [o for o in kept if o < lso]
    assert "open" not in {log.fate[o] for o in offsets}
    assert next_offset == (
        max(fetch_offset, min(read_to, lso)) if last is not None else fetch_offset
    )

    # Read uncommitted: every record of the complete batches.
    offsets, _, next_offset = decode(records, fetch_offset, None, -1)
    assert offsets == [o for o in complete if o >= fetch_offset]
    assert next_offset == read_to


def decode(
    records: bytes, fetch_offset: int, aborted: list[tuple[int, int]] | None, lso: int
) -> tuple[list[int], list[bytes | None], int]:
    runs, next_offset = decode_record_batches(
        records, TOPIC, PARTITION, fetch_offset, max_uncompressed_bytes=LIMIT,
        aborted_transactions=aborted, last_stable_offset=lso,
    )  # fmt: skip
    messages = [message for run in runs for message in run]
    offsets = []
    for message in messages:
        message_id = message.message_id()
        assert isinstance(message_id, KafkaMessageId)
        offsets.append(message_id.offset)
    return offsets, [m.value() for m in messages], next_offset


def kafka_python(
    records: bytes, fetch_offset: int, aborted: list[tuple[int, int]]
) -> tuple[list[Any], int]:
    """The records kafka-python's consumer (read_committed) returns, and its next offset."""
    partition_records = KafkaPythonFetcher.PartitionRecords(
        fetch_offset,
        TopicPartition(TOPIC, PARTITION),
        MemoryRecords(records),
        isolation_level=IsolationLevel.READ_COMMITTED,
        aborted_transactions=[AbortedTransaction(p, f) for p, f in aborted],
    )
    taken = partition_records.take()
    return taken, partition_records.next_fetch_offset
