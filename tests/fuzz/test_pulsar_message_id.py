"""Pulsar message ids (protocols/pulsarwire/message_id.py): serialize round-trips every
field; deserialize of random or mutated bytes raises only MalformedFrameError."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from msgclient.errors import MalformedFrameError
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.fuzz.strategies import KIB, bounded, examples, mutated

I64 = st.sampled_from([-1, 0, 1, 2**31, 2**63 - 1]) | st.integers(-1, 2**63 - 1)
I32 = st.sampled_from([-1, 0, 1, 2**31 - 1]) | st.integers(-1, 2**31 - 1)
IDS = st.builds(PulsarMessageId, I64, I64, I32, I32, I32.map(lambda n: max(n, 0)))


def fields(message_id: PulsarMessageId) -> tuple[int, ...]:
    return (
        message_id.ledger_id,
        message_id.entry_id,
        message_id.partition,
        message_id.batch_index,
        message_id.batch_size,
    )


@settings(max_examples=examples(0.4))
@given(IDS)
def test_round_trip(message_id: PulsarMessageId) -> None:
    back = PulsarMessageId.deserialize(message_id.serialize())
    assert back == message_id
    assert fields(back) == fields(message_id)
    assert hash(back) == hash(message_id)


def deserialize_bounded(data: bytes) -> None:
    # A MessageIdData of n bytes is a handful of ints: nothing grows with a claimed size.
    outcome = bounded(
        lambda: PulsarMessageId.deserialize(data), MalformedFrameError, 64 * len(data) + 16 * KIB
    )
    if outcome.error is None:
        assert isinstance(outcome.result, PulsarMessageId)


@settings(max_examples=examples(0.3))
@given(st.binary(max_size=200))
@example(b"")
@example(b"\x08\x01")  # entryId missing
@example(b"\x08\x01\x10\x02\x3a\xff\xff\xff\xff\x07")  # first_chunk_message_id of 2 GiB
def test_random_bytes_raise_only_malformed_frame_errors(data: bytes) -> None:
    deserialize_bounded(data)


@settings(max_examples=examples(0.3))
@given(IDS, st.data())
def test_mutated_ids_raise_only_malformed_frame_errors(
    message_id: PulsarMessageId, data: st.DataObject
) -> None:
    deserialize_bounded(data.draw(mutated(message_id.serialize())))
