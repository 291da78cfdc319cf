"""Consumer isolation (read_committed) as byte conversations: record batches of
transactional producers (our encoder, ``transactional=True``) and hand-built transaction
markers (control batches) are decoded with the aborted transactions and last stable offset
a Fetch response gives; the fetcher and a reader's partition transport are driven over a
real KafkaSession whose broker is scripted here, request bytes out, response bytes in.

tansu keeps aborted records and their ABORT markers but lists no aborted transactions in
its Fetch responses (seen with confluent-kafka and msgclient as producers), so the Java
client's rules cannot be shown against it: they are shown here, with bytes.
"""

from __future__ import annotations

import asyncio
import struct
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

from msgclient.contract import AckBatch, ConsumerEvents
from msgclient.errors import MalformedFrameError
from msgclient.message import Message, MessageId
from msgclient.options import CompressionType, ConsumerOptions, InitialPosition, SubscriptionMode
from protocols.kafkawire.api import ApiVersionTable
from protocols.kafkawire.compression import get_kafka_codec
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.consumer import KafkaConsumerTransport, KafkaSubscription
from protocols.kafkawire.context import KafkaContext
from protocols.kafkawire.fetcher import (
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Fetcher,
    FetchState,
    list_offset,
)
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.kafkawire.metadata import KafkaLookupService
from protocols.kafkawire.records import decode_record_batches, encode_record_batch
from protocols.kafkawire.records.run import RecordRun
from protocols.kafkawire.session import KafkaSession
from tests.unit.kafka.test_records import HEADER, NOW, at_offset, out, with_crc, zz

with warnings.catch_warnings():  # kafka-python's import warns about importlib.resources
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch

TOPIC, PARTITION = "payments", 0
LIMIT = 1 << 20
ABORT, COMMIT = 0, 1  # control record types
TRANSACTIONAL, CONTROL = 0x10, 0x20  # batch attribute bits
WAIT = 5.0  # seconds: every wait on the event loop is bounded

# The record of a COMMIT marker exactly as tansu wrote it (coordinator epoch 0), read off
# a Fetch response after confluent-kafka committed a transaction: the builder below must
# write the same bytes.
TANSU_COMMIT_RECORD = bytes.fromhex("2000000008000000010c00000000000000")


# -- batches -------------------------------------------------------------------------------


def txn(
    base_offset: int,
    producer_id: int,
    *values: bytes,
    transactional: bool = True,
    compression: CompressionType = CompressionType.NONE,
    key: str | None = None,
) -> bytes:
    """A producer's batch of ``values`` at ``base_offset``, by our encoder."""
    batch = encode_record_batch(
        [out(value, key=key) for value in values],
        compression=compression,
        now_ms=NOW,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        transactional=transactional,
    )
    return at_offset(batch, base_offset)


def plain(base_offset: int, *values: bytes) -> bytes:
    """A batch of a producer outside any transaction (no producer id)."""
    return txn(base_offset, -1, *values, transactional=False)


def marker(
    base_offset: int,
    producer_id: int,
    kind: int,
    *,
    key: bytes | None = None,
    codec: CompressionType = CompressionType.NONE,
) -> bytes:
    """A transaction marker, built by hand as the coordinator writes one: a control batch
    (attributes transactional | control) of one record whose key is version 0 | type and
    whose value is version 0 | coordinator epoch."""
    key = struct.pack(">hh", 0, kind) if key is None else key
    value = struct.pack(">hi", 0, 0)
    body = b"\x00" + zz(0) + zz(0) + zz(len(key)) + key + zz(len(value)) + value + zz(0)
    records = zz(len(body)) + body
    codec_ids = {CompressionType.NONE: 0, CompressionType.GZIP: 1, CompressionType.LZ4: 3}
    if codec is not CompressionType.NONE:
        records = get_kafka_codec(codec).compress(records)
    attributes = TRANSACTIONAL | CONTROL | codec_ids[codec]
    head = HEADER.pack(
        base_offset, HEADER.size - 12 + len(records), -1, 2, 0, attributes, 0, NOW, NOW,
        producer_id, 0, -1, 1,
    )  # fmt: skip
    return with_crc(head + records)


def read(
    data: bytes,
    fetch_offset: int = 0,
    aborted: list[tuple[int, int]] | None = None,
    last_stable_offset: int = -1,
) -> tuple[list[int], list[bytes | None], int]:
    """Offsets and values delivered, and the offset to fetch next."""
    runs, next_offset = decode_record_batches(
        data,
        TOPIC,
        PARTITION,
        fetch_offset,
        max_uncompressed_bytes=LIMIT,
        aborted_transactions=aborted,
        last_stable_offset=last_stable_offset,
    )
    messages = [message for run in runs for message in run]
    return [offset(m) for m in messages], [m.value() for m in messages], next_offset


def offset(message: Message) -> int:
    message_id = message.message_id()
    assert isinstance(message_id, KafkaMessageId)
    return message_id.offset


# -- the bytes of markers and transactional batches ----------------------------------------


def test_markers_are_what_brokers_write() -> None:
    commit = marker(4, 1, COMMIT)
    assert commit[HEADER.size :] == TANSU_COMMIT_RECORD
    for kind, aborts in ((ABORT, True), (COMMIT, False)):
        batch = DefaultRecordBatch(marker(9, 77, kind))  # kafka-python reads them
        assert batch.validate_crc()
        assert batch.is_control_batch and batch.is_transactional
        assert (batch.base_offset, batch.producer_id) == (9, 77)
        assert next(batch).abort is aborts


@pytest.mark.parametrize("kind", [CompressionType.NONE, CompressionType.GZIP])
def test_transactional_sets_attribute_bit_0x10_and_nothing_else(kind: CompressionType) -> None:
    plain_batch = txn(0, 5, b"a", b"b", transactional=False, compression=kind)
    batch = txn(0, 5, b"a", b"b", compression=kind)
    fields, plain_fields = list(HEADER.unpack_from(batch)), list(HEADER.unpack_from(plain_batch))
    assert fields[5] == plain_fields[5] | TRANSACTIONAL and not plain_fields[5] & TRANSACTIONAL
    fields[4] = plain_fields[4] = fields[5] = plain_fields[5] = 0  # CRC and attributes
    assert fields == plain_fields
    assert batch[HEADER.size :] == plain_batch[HEADER.size :]
    parsed = DefaultRecordBatch(batch)  # kafka-python's reader
    assert parsed.validate_crc() and parsed.is_transactional and not parsed.is_control_batch
    assert [r.value for r in parsed] == [b"a", b"b"]
    assert not DefaultRecordBatch(plain_batch).is_transactional


# -- decoding read committed ---------------------------------------------------------------


def test_an_aborted_transaction_is_dropped_and_a_committed_one_kept() -> None:
    data = b"".join((
        txn(0, 7, b"a0", b"a1"), marker(2, 7, ABORT),
        txn(3, 7, b"c3"), marker(4, 7, COMMIT),
    ))  # fmt: skip
    assert read(data, aborted=[(7, 0)]) == ([3], [b"c3"], 5)
    # read uncommitted: everything but the markers
    assert read(data) == ([0, 1, 3], [b"a0", b"a1", b"c3"], 5)


def test_interleaved_transactions_of_two_producers_on_one_partition() -> None:
    data = b"".join((
        txn(0, 1, b"1-0", b"1-1"),  # producer 1: aborted
        txn(2, 2, b"2-2", b"2-3"),  # producer 2: committed
        plain(4, b"p4"),
        txn(5, 1, b"1-5", b"1-6"),
        txn(7, 2, b"2-7"),
        marker(8, 1, ABORT),
        marker(9, 2, COMMIT),
        plain(10, b"p10"),
    ))  # fmt: skip
    offsets, values, next_offset = read(data, aborted=[(1, 0)])
    assert offsets == [2, 3, 4, 7, 10]
    assert values == [b"2-2", b"2-3", b"p4", b"2-7", b"p10"]
    assert next_offset == 11
    assert read(data)[0] == [0, 1, 2, 3, 4, 5, 6, 7, 10]  # read uncommitted


def test_an_aborted_transaction_that_starts_inside_the_fetched_range() -> None:
    # One producer: committed, aborted, committed again. Only the middle transaction is
    # aborted: the one before its first offset and the one after its ABORT marker are not.
    data = b"".join((
        txn(10, 1, b"c10"), marker(11, 1, COMMIT),
        txn(12, 1, b"a12", b"a13"), marker(14, 1, ABORT),
        txn(15, 1, b"c15"), marker(16, 1, COMMIT),
    ))  # fmt: skip
    assert read(data, fetch_offset=10, aborted=[(1, 12)]) == ([10, 15], [b"c10", b"c15"], 17)


def test_an_aborted_transaction_that_started_before_the_fetched_range() -> None:
    # Producer 1's aborted transaction began at offset 5, before the fetch: its records in
    # the range are dropped all the same, producer 2's are kept.
    data = b"".join((
        txn(20, 1, b"a20", b"a21"),
        txn(22, 2, b"c22"),
        marker(23, 1, ABORT),
        marker(24, 2, COMMIT),
    ))  # fmt: skip
    assert read(data, fetch_offset=20, aborted=[(1, 5)]) == ([22], [b"c22"], 25)
    assert read(data, fetch_offset=21, aborted=[(1, 5)]) == ([22], [b"c22"], 25)
    assert read(data, fetch_offset=21) == ([21, 22], [b"a21", b"c22"], 25)


def test_aborted_transactions_listed_in_any_order() -> None:
    data = b"".join((
        txn(0, 1, b"a0", b"a1"), marker(2, 1, ABORT),
        txn(3, 2, b"c3"), marker(4, 2, COMMIT),
        txn(5, 2, b"a5"), marker(6, 2, ABORT),
        txn(7, 1, b"c7"), marker(8, 1, COMMIT),
    ))  # fmt: skip
    for aborted in ([(2, 5), (1, 0)], [(1, 0), (2, 5)]):
        assert read(data, aborted=aborted) == ([3, 7], [b"c3", b"c7"], 9)


def test_only_an_abort_marker_ends_an_aborted_transaction() -> None:
    # Not a log a broker writes (a COMMIT marker inside an aborted transaction), but the
    # Java client's rule: the producer's batches stay dropped until its ABORT marker.
    data = b"".join((
        txn(0, 1, b"a0"), marker(1, 1, COMMIT), txn(2, 1, b"a2"), marker(3, 1, ABORT),
        txn(4, 1, b"c4"),
    ))  # fmt: skip
    assert read(data, aborted=[(1, 0)]) == ([4], [b"c4"], 5)


def test_only_transactional_batches_of_an_aborted_producer_are_dropped() -> None:
    # The Java client's rule: a batch of the producer id without the transactional bit
    # is not part of the transaction.
    data = txn(0, 3, b"t0") + txn(1, 3, b"i1", transactional=False) + marker(2, 3, ABORT)
    assert read(data, aborted=[(3, 0)]) == ([1], [b"i1"], 3)


def test_control_records_are_never_delivered() -> None:
    data = b"".join((
        txn(0, 3, b"x0"), marker(1, 3, COMMIT),
        txn(2, 4, b"y2"), marker(3, 4, ABORT),
        plain(4, b"z4"),
    ))  # fmt: skip
    assert read(data) == ([0, 2, 4], [b"x0", b"y2", b"z4"], 5)
    assert read(data, aborted=[(4, 2)]) == ([0, 4], [b"x0", b"z4"], 5)
    committed = txn(0, 3, b"x0") + marker(1, 3, COMMIT) + plain(2, b"z2")
    assert read(committed, aborted=[]) == ([0, 2], [b"x0", b"z2"], 3)
    markers_only = marker(7, 3, COMMIT) + marker(8, 4, ABORT)
    for aborted in (None, [], [(4, 0)]):
        assert read(markers_only, fetch_offset=7, aborted=aborted) == ([], [], 9)


def test_the_next_offset_steps_past_a_trailing_marker() -> None:
    committed = txn(0, 5, b"a", b"b", b"c") + marker(3, 5, COMMIT)
    assert read(committed, aborted=[]) == ([0, 1, 2], [b"a", b"b", b"c"], 4)
    assert read(committed, fetch_offset=3, aborted=[]) == ([], [], 4)
    aborted = txn(0, 5, b"a", b"b", b"c") + marker(3, 5, ABORT)
    assert read(aborted, aborted=[(5, 0)]) == ([], [], 4)


def test_an_abort_marker_read_compressed_ends_the_aborted_transaction() -> None:
    # Coordinators write markers uncompressed; one compressed is read all the same.
    for codec in (CompressionType.GZIP, CompressionType.LZ4):
        data = b"".join((
            txn(0, 6, b"a0", compression=codec), marker(1, 6, ABORT, codec=codec),
            txn(2, 6, b"c2", compression=codec), marker(3, 6, COMMIT, codec=codec),
        ))  # fmt: skip
        assert read(data, aborted=[(6, 0)]) == ([2], [b"c2"], 4)


def test_a_marker_without_a_version_and_type_is_malformed() -> None:
    for key in (b"\x00\x00", b"", struct.pack(">hh", -1, ABORT)):
        data = txn(0, 6, b"a0") + marker(1, 6, ABORT, key=key) + txn(2, 6, b"c2")
        with pytest.raises(MalformedFrameError):
            read(data, aborted=[(6, 0)])
    # Read uncommitted, markers are skipped unread.
    assert read(txn(0, 6, b"c0") + marker(1, 6, ABORT, key=b""))[0] == [0]


# -- the last stable offset ----------------------------------------------------------------


def test_nothing_at_or_after_the_last_stable_offset_is_delivered() -> None:
    data = b"".join((
        plain(0, b"p0", b"p1", b"p2"),
        txn(3, 5, b"open3", b"open4"),  # an open transaction: the last stable offset is 3
        plain(5, b"p5"),
    ))  # fmt: skip
    assert read(data, aborted=[], last_stable_offset=3) == ([0, 1, 2], [b"p0", b"p1", b"p2"], 3)
    assert read(data, fetch_offset=3, aborted=[], last_stable_offset=3) == ([], [], 3)
    assert read(data, aborted=[], last_stable_offset=6)[0] == [0, 1, 2, 3, 4, 5]
    assert read(data)[0] == [0, 1, 2, 3, 4, 5]  # read uncommitted: no stop
    # Offset 2 compacted away: the next fetch starts at the last stable offset all the same.
    gap = plain(0, b"p0", b"p1") + txn(3, 5, b"open3")
    assert read(gap, aborted=[], last_stable_offset=3) == ([0, 1], [b"p0", b"p1"], 3)


def test_a_batch_across_the_last_stable_offset_is_cut_there() -> None:
    # Brokers stop at batch boundaries; a batch across the offset loses what is past it.
    values = [b"%03d" % i for i in range(40)]
    runs, next_offset = decode_record_batches(
        plain(100, *values), TOPIC, PARTITION, 100, max_uncompressed_bytes=LIMIT,
        aborted_transactions=[], last_stable_offset=120,
    )  # fmt: skip
    assert [type(run) for run in runs] == [RecordRun]  # the columns' path, cut
    assert [offset(m) for run in runs for m in run] == list(range(100, 120))
    assert [m.value() for run in runs for m in run] == values[:20]
    assert next_offset == 120
    keyed = txn(0, 2, *values[:10], key="k")  # Messages one by one
    assert read(keyed, aborted=[], last_stable_offset=4) == ([0, 1, 2, 3], values[:4], 4)
    assert read(keyed, fetch_offset=2, aborted=[], last_stable_offset=4)[0] == [2, 3]


# -- the fetcher and a reader's transport over a scripted broker ---------------------------


Answer = Callable[[Any, int], Any]  # (decoded request, version) -> response, or None: wait


class ScriptedConnection:
    """``KafkaConnection.request`` over a real KafkaSession: every request is encoded to
    bytes (kept in ``sent``) and decoded back, the scripted broker's response is encoded
    to bytes and decoded by the session. Fetch v12 and ListOffsets v8 are negotiated. An
    answer of None is a long poll that never ends."""

    address = "broker-1:9092"
    operation_timeout = 5.0

    def __init__(self, answer: Answer) -> None:
        self.session = KafkaSession("reader")
        self.session.versions = ApiVersionTable(
            {FetchRequest.API_KEY: (4, 17), ListOffsetsRequest.API_KEY: (1, 10)}, self.address
        )
        self.answer = answer
        self.sent: list[bytes] = []
        self.requests: list[Any] = []
        self.waiting: list[asyncio.Future[Any]] = []

    def request(self, request: Any, version: int | None = None) -> asyncio.Future[Any]:
        correlation, frame = self.session.encode_request(request, version)
        self.sent.append(frame)
        api_version = struct.unpack_from(">h", frame, 6)[0]
        decoded = type(request).decode(frame[4:], version=api_version, header=True)
        self.requests.append(decoded)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        response = self.answer(decoded, api_version)
        if response is None:
            self.waiting.append(future)
            return future
        response.API_VERSION = api_version
        response.with_header(correlation_id=correlation)
        (answer,) = self.session.receive_data(bytes(response.encode(header=True, framed=True)))
        asyncio.get_running_loop().call_soon(future.set_result, answer.result)
        return future


def isolation_byte(frame: bytes, body_offset: int) -> int:
    """The isolation_level byte of a framed request, ``body_offset`` bytes into the body
    (after the v2 header: size, api key, version, correlation id, client id, no tags)."""
    client_id_size = int.from_bytes(frame[12:14], "big")
    header_end = 14 + client_id_size + 1
    return frame[header_end + body_offset]


FETCH_ISOLATION_AT = 16  # replica_id, max_wait_ms, min_bytes, max_bytes (Fetch v12)
LIST_OFFSETS_ISOLATION_AT = 4  # replica_id (ListOffsets v8)


def fetched(
    records: bytes,
    *,
    aborted: list[tuple[int, int]] | None,
    last_stable_offset: int,
    high_watermark: int,
) -> Any:
    Partition = FetchResponse.FetchableTopicResponse.PartitionData
    partition = Partition(
        partition_index=PARTITION,
        error_code=0,
        high_watermark=high_watermark,
        last_stable_offset=last_stable_offset,
        log_start_offset=0,
        aborted_transactions=None
        if aborted is None
        else [
            Partition.AbortedTransaction(producer_id=producer, first_offset=first)
            for producer, first in aborted
        ],
        preferred_read_replica=-1,
        records=records,
    )
    topic = FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[partition])
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])


def listed(position: int) -> Any:
    Topic = ListOffsetsResponse.ListOffsetsTopicResponse
    partition = Topic.ListOffsetsPartitionResponse(
        partition_index=PARTITION, error_code=0, timestamp=-1, offset=position, leader_epoch=-1
    )
    return ListOffsetsResponse(
        throttle_time_ms=0, topics=[Topic(name=TOPIC, partitions=[partition])]
    )


# Producer 1's transaction aborted (0-1, marker 4), producer 2's committed (2-3, marker
# 5), producer 3's still open from 6 on: the last stable offset is 6, the high watermark 8.
LOG = b"".join((
    txn(0, 1, b"a0", b"a1"),
    txn(2, 2, b"c2", b"c3"),
    marker(4, 1, ABORT),
    marker(5, 2, COMMIT),
    txn(6, 3, b"open6", b"open7"),
))  # fmt: skip
LOG_ABORTED = [(1, 0)]
LOG_STABLE, LOG_END = 6, 8


def log_from(position: int) -> bytes:
    """What a broker that does not stop at the last stable offset returns from
    ``position``: the batches from the one holding it on."""
    cut = 0
    while cut < len(LOG):
        (base,) = struct.unpack_from(">q", LOG, cut)
        (length,) = struct.unpack_from(">i", LOG, cut + 8)
        (last_delta,) = struct.unpack_from(">i", LOG, cut + 23)
        if base + last_delta >= position:
            break
        cut += 12 + length
    return LOG[cut:]


def broker(request: Any, version: int) -> Any:
    """The scripted broker of LOG: every Fetch from its position, once; then long polls."""
    if isinstance(request, ListOffsetsRequest):
        return listed(LOG_STABLE if request.isolation_level == READ_COMMITTED else LOG_END)
    position = request.topics[0].partitions[0].fetch_offset
    if position >= (LOG_STABLE if request.isolation_level == READ_COMMITTED else LOG_END):
        return None
    return fetched(
        log_from(position),
        aborted=LOG_ABORTED,
        last_stable_offset=LOG_STABLE,
        high_watermark=LOG_END,
    )


class Deliveries:
    def __init__(self) -> None:
        self.runs: list[Sequence[Message]] = []
        self.consumed_to: list[int] = []
        self.arrived = asyncio.Event()

    def __call__(self, runs: list[Sequence[Message]], consumed_to: int) -> None:
        self.runs += runs
        self.consumed_to.append(consumed_to)
        self.arrived.set()

    def offsets(self) -> list[int]:
        return [offset(m) for run in self.runs for m in run]


class SilentLookup:
    """A lookup that never answers: the fetcher's own loop never fetches; the tests call
    its fetch methods with the scripted connection."""

    async def leader(self, topic: str, partition: int) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def invalidate(self, topic: str) -> None:
        pass


@pytest.fixture
async def silent_fetchers() -> AsyncIterator[Callable[[ConsumerOptions], Fetcher]]:
    made: list[Fetcher] = []

    def make(options: ConsumerOptions) -> Fetcher:
        fetcher = Fetcher(cast(KafkaLookupService, SilentLookup()), lambda a: None, options, LIMIT)
        made.append(fetcher)
        return fetcher

    yield make
    for fetcher in made:
        await fetcher.close()
    for task in asyncio.all_tasks():  # the lookups that never answer
        if getattr(task.get_coro(), "__qualname__", "") == "Fetcher._locate":
            task.cancel()


def fetch_state(fetcher: Fetcher, position: int) -> tuple[FetchState, Deliveries]:
    deliveries = Deliveries()
    state = FetchState(TOPIC, PARTITION, deliveries, lambda error: None)
    state.position = position
    state.permits = 100
    fetcher.add(state)
    return state, deliveries


@pytest.mark.parametrize(
    ("level", "wire", "offsets", "position"),
    [
        ("read_committed", READ_COMMITTED, [2, 3], LOG_STABLE),
        ("read_uncommitted", READ_UNCOMMITTED, [0, 1, 2, 3, 6, 7], LOG_END),
    ],
)
async def test_the_fetcher_reads_at_the_consumers_isolation_level(
    silent_fetchers: Callable[[ConsumerOptions], Fetcher],
    level: str,
    wire: int,
    offsets: list[int],
    position: int,
) -> None:
    # The broker here ignores the isolation level (returns the whole log, the open
    # transaction too): what read committed drops, it drops by the response's fields.
    fetcher = silent_fetchers(ConsumerOptions(isolation_level=level))
    state, deliveries = fetch_state(fetcher, 0)
    connection = ScriptedConnection(
        lambda request, version: fetched(
            LOG, aborted=LOG_ABORTED, last_stable_offset=LOG_STABLE, high_watermark=LOG_END
        )
    )
    await asyncio.wait_for(fetcher._fetch(cast(KafkaConnection, connection), [state]), WAIT)
    (frame,) = connection.sent
    assert isolation_byte(frame, FETCH_ISOLATION_AT) == wire
    assert connection.requests[0].isolation_level == wire
    assert deliveries.offsets() == offsets
    assert state.position == position
    assert deliveries.consumed_to == [position]  # past the markers, to the stable offset


async def test_redeliveries_are_read_at_the_same_isolation_level(
    silent_fetchers: Callable[[ConsumerOptions], Fetcher],
) -> None:
    fetcher = silent_fetchers(ConsumerOptions())
    state, deliveries = fetch_state(fetcher, LOG_STABLE)
    # Offset 3 was delivered; offset 1 (an aborted record) and 6 (an open transaction's)
    # cannot have been, but asked for anyway they must not come back.
    state.redeliveries.update({1: 2, 3: 1, 6: 1})
    connection = ScriptedConnection(
        lambda request, version: fetched(
            log_from(request.topics[0].partitions[0].fetch_offset),
            aborted=LOG_ABORTED,
            last_stable_offset=LOG_STABLE,
            high_watermark=LOG_END,
        )
    )
    conn = cast(KafkaConnection, connection)
    await asyncio.wait_for(fetcher._fetch_redeliveries(conn, state), WAIT)
    assert deliveries.offsets() == [3]
    assert [m.redelivery_count() for run in deliveries.runs for m in run] == [1]
    assert connection.requests[0].isolation_level == READ_COMMITTED
    # What the fetch read past and did not deliver is not asked for again; the offset at
    # the last stable offset waits.
    assert state.redeliveries == {6: 1}


async def test_list_offset_carries_the_isolation_level() -> None:
    connection = ScriptedConnection(lambda request, version: broker(request, version))
    conn = cast(KafkaConnection, connection)
    latest = [
        await asyncio.wait_for(list_offset(conn, TOPIC, PARTITION, LATEST_TIMESTAMP), WAIT),
        await asyncio.wait_for(
            list_offset(conn, TOPIC, PARTITION, LATEST_TIMESTAMP, READ_COMMITTED), WAIT
        ),
    ]
    assert latest == [LOG_END, LOG_STABLE]
    assert [isolation_byte(f, LIST_OFFSETS_ISOLATION_AT) for f in connection.sent] == [0, 1]
    assert [r.isolation_level for r in connection.requests] == [0, 1]


class Events(ConsumerEvents):
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.arrived = asyncio.Event()

    def on_messages(self, messages: Sequence[Message]) -> None:
        self.messages += messages
        self.arrived.set()

    def on_disconnected(self, error: Exception) -> None:
        pass

    def on_active_consumer_change(self, is_active: bool) -> None:
        pass

    def on_reached_end_of_topic(self) -> None:
        pass

    def on_partition_revoked(self) -> None:
        pass


@pytest.mark.parametrize(
    ("level", "wire", "offsets", "end"),
    [
        ("read_committed", READ_COMMITTED, [2, 3], LOG_STABLE),
        ("read_uncommitted", READ_UNCOMMITTED, [0, 1, 2, 3, 6, 7], LOG_END),
    ],
)
async def test_a_reader_reads_committed_records_and_its_position_passes_the_markers(
    level: str, wire: int, offsets: list[int], end: int
) -> None:
    """A reader (no group) from Latest and then from Earliest, its fetch loop running:
    ListOffsets and Fetch at its isolation level, what it delivers, and the position its
    acknowledgments reach."""
    connection = ScriptedConnection(broker)

    async def leader(topic: str, partition: int) -> str:
        return connection.address

    async def get_connection(address: str) -> ScriptedConnection:
        return connection

    context = SimpleNamespace(
        lookup=SimpleNamespace(leader=leader, invalidate=lambda topic: None),
        pool=SimpleNamespace(get_connection=get_connection),
        operation_timeout=WAIT,
    )
    options = ConsumerOptions(
        isolation_level=level,
        subscription_mode=SubscriptionMode.NonDurable,
        initial_position=InitialPosition.Latest,
    )
    subscription = KafkaSubscription(cast(KafkaContext, context), [TOPIC], "reader", options)
    events = Events()
    transport = KafkaConsumerTransport(subscription, TOPIC, PARTITION, options, events)
    try:
        assert await asyncio.wait_for(transport.initial_offset(), WAIT) == end
        assert connection.requests[-1].isolation_level == wire
        transport.activate(0)  # as from Earliest
        transport.flow(100)
        await asyncio.wait_for(events.arrived.wait(), WAIT)
        assert [offset(m) for m in events.messages] == offsets
        fetches = [r for r in connection.requests if isinstance(r, FetchRequest)]
        assert {r.isolation_level for r in fetches} == {wire}
        ids: tuple[MessageId, ...] = tuple(m.message_id() for m in events.messages)
        transport.acknowledge(AckBatch(ids, None))
        tracker = transport._tracker
        assert tracker is not None
        assert tracker.commit_position == end  # past the markers and skipped records
    finally:
        for waiting in connection.waiting:
            waiting.cancel()
        await asyncio.wait_for(transport.close(), WAIT)
