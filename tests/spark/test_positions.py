"""Positions, offset JSON, read-limit shares and slices (no Spark, no broker)."""

from __future__ import annotations

import itertools
import json

import pytest

from msgclient.spark.metadata import TopicPartition
from msgclient.spark.options import parse_options
from msgclient.spark.planning import PartitionRange, slice_ranges, split
from msgclient.spark.positions import (
    PULSAR_EARLIEST,
    Protocol,
    PulsarPosition,
    advance,
    covers,
    distance,
    end_after,
    from_json,
    is_before,
    is_last_up_to,
    start_at,
    to_json,
)
from msgclient.spark.source import StreamReader
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarIdBytes, PulsarMessageId

TP = [TopicPartition("t", i) for i in range(4)]


def test_pulsar_id_bytes_are_the_official_serialization() -> None:
    values = itertools.product(
        [-1, 0, 3, 300],  # partition
        [0, 5, 300, 2**40, 2**63 - 1],  # ledger
        [0, 1, 127, 128, 16383, 16384, 99_999],  # entry
        [-1, 0, 1, 127, 128, 999, 16383, 20_000],  # batch index
        [0, 1, 128, 1000, 20_000],  # batch size
    )
    encoders = {p: PulsarIdBytes(p) for p in (-1, 0, 3, 300)}
    for partition, ledger, entry, index, size in values:
        # The dispatched id may carry another partition (a consumer of the partition's
        # own topic gives -1): the column carries the topic's partition index.
        dispatched = PulsarMessageId(ledger, entry, -1, index, size)
        expected = PulsarMessageId(ledger, entry, partition, index, size).serialize()
        assert encoders[partition](dispatched) == expected


def test_pulsar_positions_order_whole_entries_after_their_messages() -> None:
    whole = PulsarPosition(4, 10, -1)
    assert is_before(PulsarPosition(4, 10, 3), whole)
    assert is_before(whole, PulsarPosition(4, 11, 0))
    assert is_before(PULSAR_EARLIEST, PulsarPosition(0, 0, 0))
    assert covers(whole, PulsarMessageId(4, 10, 2, 7, 8))
    assert not covers(PulsarPosition(4, 10, 6), PulsarMessageId(4, 10, 2, 7, 8))
    assert start_at(PulsarMessageId(4, 10, 2, 0, 8)) == PulsarPosition(4, 9, -1)
    assert start_at(PulsarMessageId(4, 10, 2, 5, 8)) == PulsarPosition(4, 10, 4)
    assert end_after(Protocol.PULSAR, None) == PULSAR_EARLIEST
    assert end_after(Protocol.KAFKA, None) == 0
    assert end_after(Protocol.KAFKA, KafkaMessageId("t", 1, 41)) == 42
    assert covers(42, KafkaMessageId("t", 1, 41)) and not covers(42, KafkaMessageId("t", 1, 42))


def test_the_last_message_up_to_a_position_is_known_without_reading_past_it() -> None:
    """What lets a count of messages up to a partition's end stop at its last message
    instead of waiting for one more (the planner's probe)."""
    unbatched = PulsarPosition(4, 10, -1)
    assert is_last_up_to(unbatched, PulsarMessageId(4, 10, 2))
    assert not is_last_up_to(unbatched, PulsarMessageId(4, 9, 2))
    # An end inside an entry: its own index; an end naming the whole entry: its last index.
    assert is_last_up_to(PulsarPosition(4, 10, 3), PulsarMessageId(4, 10, 2, 3, 8))
    assert not is_last_up_to(PulsarPosition(4, 10, 3), PulsarMessageId(4, 10, 2, 2, 8))
    assert is_last_up_to(unbatched, PulsarMessageId(4, 10, 2, 7, 8))
    assert not is_last_up_to(unbatched, PulsarMessageId(4, 10, 2, 6, 8))


def test_counting_entries_and_offsets() -> None:
    assert distance(5, 12) == 7 and advance(5, 3) == 8
    start, end = PulsarPosition(2, 10, -1), PulsarPosition(2, 20, -1)
    assert distance(start, end) == 10
    assert advance(start, 4) == PulsarPosition(2, 14, -1)
    inside = PulsarPosition(2, 10, 3)  # the rest of entry 10 is one more entry to read
    assert distance(inside, end) == 11 and advance(inside, 1) == PulsarPosition(2, 10, -1)
    assert distance(PULSAR_EARLIEST, end) is None  # where the topic starts is not known
    assert distance(PulsarPosition(1, 99, -1), end) is None  # another ledger


def test_offset_json_round_trip_with_sorted_keys() -> None:
    options = parse_options({"url": "pulsar://h:1", "subscribe": "t"}, streaming=True)
    reader = StreamReader(options)
    positions = {
        TopicPartition("t", 10): PulsarPosition(1, 2, -1),
        TopicPartition("t", 2): PULSAR_EARLIEST,
        TopicPartition("a", 0): PulsarPosition(7, 8, 3),
    }
    data = reader._json(positions)
    text = json.dumps(data)
    assert text == json.dumps(data, sort_keys=True)  # Spark compares offsets as strings
    assert reader._offsets(json.loads(text)) == positions
    assert from_json(Protocol.PULSAR, to_json(PulsarPosition(7, 8, 3)), "x") == (7, 8, 3)


def test_read_limits_split_by_backlog_exactly() -> None:
    assert split(10, {TP[0]: 10, TP[1]: 10, TP[2]: 5}) == {TP[0]: 4, TP[1]: 4, TP[2]: 2}
    # 10 * 100/103 = 9.71 and 0.097 each: floors 9, 0, 0, 0; the unit left goes to the
    # largest remainder (0.71).
    shares = split(10, {TP[0]: 1, TP[1]: 1, TP[2]: 1, TP[3]: 100})
    assert shares == {TP[0]: 0, TP[1]: 0, TP[2]: 0, TP[3]: 10}
    assert split(100, {TP[0]: 3, TP[1]: 4}) == {TP[0]: 3, TP[1]: 4}
    for limit, backlog in itertools.product([1, 7, 13], [(0, 5, 9), (1, 1, 1), (50, 3, 0)]):
        shares = split(limit, dict(zip(TP, backlog, strict=False)))
        assert sum(shares.values()) == min(limit, sum(backlog))
        assert all(shares[tp] <= units for tp, units in zip(TP, backlog, strict=False))


@pytest.mark.parametrize(
    ("extra", "pieces"),
    [({}, 1), ({"maxRecordsPerPartition": "30"}, 4), ({"minPartitions": "3"}, 3)],
)
def test_large_ranges_are_sliced(extra: dict[str, str], pieces: int) -> None:
    options = parse_options({"url": "kafka://h:1", "subscribe": "t", **extra}, streaming=False)
    ranges = slice_ranges([PartitionRange(TP[0], 100, 200)], options)
    assert len(ranges) == pieces
    assert ranges[0].start == 100 and ranges[-1].end == 200
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
    pulsar = parse_options({"url": "pulsar://h:1", "subscribe": "t", **extra}, streaming=False)
    whole = PartitionRange(TP[0], PulsarPosition(3, 99, -1), PulsarPosition(3, 199, -1))
    sliced = slice_ranges([whole], pulsar)
    assert len(sliced) == pieces and sliced[-1].end == whole.end
    unknown = PartitionRange(TP[0], PULSAR_EARLIEST, PulsarPosition(3, 199, -1))
    assert slice_ranges([unknown], pulsar) == [unknown]  # size unknown: kept whole
