"""The consumer protocol's member bytes (protocols/kafkawire/assignors.py): subscriptions and
assignments round-trip at every version; random, mutated and lying bytes give only
MalformedFrameError, in memory bounded by the input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import MalformedFrameError
from protocols.kafkawire.assignors import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tests.fuzz.strategies import KIB, bounded, examples, mutated, text

TOPICS = text(max_size=12)
PARTITIONS = st.lists(st.tuples(TOPICS, st.integers(-(2**31), 2**31 - 1)), max_size=6)
USER_DATA = st.none() | st.binary(max_size=100)
SUBSCRIPTIONS = st.builds(
    Subscription,
    st.lists(TOPICS, max_size=4).map(tuple),
    USER_DATA,
    PARTITIONS.map(tuple),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | TOPICS,
)
ASSIGNMENTS = st.builds(Assignment, PARTITIONS.map(tuple), USER_DATA)
VERSIONS = st.integers(0, 3)


def grouped(partitions: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Partitions as the wire carries them: by topic, topics in order of first appearance."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((t, p) for t, ps in by_topic.items() for p in ps)


@settings(max_examples=examples(0.2))
@given(SUBSCRIPTIONS, VERSIONS)
def test_subscriptions_round_trip(sub: Subscription, version: int) -> None:
    back = decode_subscription(encode_subscription(sub, version))
    assert back.topics == tuple(sorted(sub.topics))
    assert back.user_data == sub.user_data
    assert back.owned_partitions == (
        grouped(tuple(sorted(sub.owned_partitions))) if version >= 1 else ()
    )
    assert back.generation_id == (sub.generation_id if version >= 2 else -1)
    assert back.rack_id == ((sub.rack_id or None) if version >= 3 else None)


@settings(max_examples=examples(0.15))
@given(ASSIGNMENTS, VERSIONS)
def test_assignments_round_trip(assignment: Assignment, version: int) -> None:
    back = decode_assignment(encode_assignment(assignment, version))
    assert back.partitions == grouped(assignment.partitions)
    assert back.user_data == assignment.user_data


def decode_bounded(data: bytes) -> None:
    # A partition is a tuple and an int per 4 bytes; a topic a str per 2 or more.
    for decode in (decode_subscription, decode_assignment):
        bounded(lambda: decode(data), MalformedFrameError, 64 * len(data) + 16 * KIB)  # noqa: B023


@settings(max_examples=examples(0.2))
@given(st.binary(max_size=512))
@example(b"")
@example(b"\x00\x00\x7f\xff\xff\xff")  # 2**31 - 1 topics in no bytes
@example(b"\x00\x00\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff")  # 2**31 - 1 partitions
@example(b"\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff")  # user data of 2 GiB
def test_random_bytes_raise_only_malformed_frame_errors(data: bytes) -> None:
    decode_bounded(data)


@settings(max_examples=examples(0.45))
@given(
    st.one_of(SUBSCRIPTIONS.map(encode_subscription), ASSIGNMENTS.map(encode_assignment)), st.data()
)
def test_mutated_bytes_raise_only_malformed_frame_errors(valid: bytes, data: st.DataObject) -> None:
    decode_bounded(data.draw(mutated(valid)))


@pytest.mark.parametrize("count", [1_000_000, 2**31 - 1, -1, -(2**31)])
@pytest.mark.parametrize("where", ["topics", "partitions", "user_data"])
def test_lying_counts_fail_fast(count: int, where: str) -> None:
    i32 = struct.pack(">i", count)
    version, none, one, topic = b"\x00\x01", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01", b"\x00\x01t"
    cases = {  # (decoder, bytes): version, then the fields up to the lying count
        "topics": [(decode_subscription, version + i32), (decode_assignment, version + i32)],
        "partitions": [
            (decode_subscription, version + bytes(4) + none + one + topic + i32),
            (decode_assignment, version + one + topic + i32),
        ],
        "user_data": [
            (decode_subscription, version + bytes(4) + i32),
            (decode_assignment, version + bytes(4) + i32),
        ],
    }[where]
    for decode, data in cases:
        outcome = bounded(lambda: decode(data), MalformedFrameError, 16 * KIB)  # noqa: B023
        if count >= 0 or where != "user_data":  # a negative length is a null: valid
            assert isinstance(outcome.error, MalformedFrameError)
