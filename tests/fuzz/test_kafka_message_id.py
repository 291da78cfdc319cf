"""Kafka message ids (protocols/kafkawire/message_id.py): serialize round-trips topic,
partition and offset; deserialize of random or mutated bytes raises only
MalformedFrameError."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import MalformedFrameError
from protocols.kafkawire.message_id import KafkaMessageId
from tests.fuzz.strategies import KIB, bounded, examples, mutated, text

IDS = st.builds(
    KafkaMessageId,
    text(max_size=60),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=examples(0.4))
@given(IDS)
def test_round_trip(message_id: KafkaMessageId) -> None:
    back = KafkaMessageId.deserialize(message_id.serialize())
    assert (back.topic, back.partition, back.offset) == (
        message_id.topic,
        message_id.partition,
        message_id.offset,
    )
    assert back == message_id and hash(back) == hash(message_id)


def deserialize_bounded(data: bytes) -> None:
    outcome = bounded(
        lambda: KafkaMessageId.deserialize(data), MalformedFrameError, 8 * len(data) + 16 * KIB
    )
    if outcome.error is None:
        assert isinstance(outcome.result, KafkaMessageId)


@settings(max_examples=examples(0.3))
@given(st.binary(max_size=200))
@example(b"")
@example(b"\x01" + b"\x00" * 11)  # a header and no topic
@example(b"\x02" + b"\x00" * 11)  # an unknown version
def test_random_bytes_raise_only_malformed_frame_errors(data: bytes) -> None:
    deserialize_bounded(data)


@settings(max_examples=examples(0.3))
@given(IDS, st.data())
def test_mutated_ids_raise_only_malformed_frame_errors(
    message_id: KafkaMessageId, data: st.DataObject
) -> None:
    deserialize_bounded(data.draw(mutated(message_id.serialize())))
