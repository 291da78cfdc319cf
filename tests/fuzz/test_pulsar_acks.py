"""Pulsar acknowledgments (protocols/pulsarwire/acks.py): ack sets, ACK and REDELIVER
commands, and the batch ackers.

Ack sets round-trip between the encoder (ack_set) and the entry decoder's reading of them;
the ACK commands for any order of acks name each entry once it is complete (or, with batch
index acks, with exactly its unacked indexes) and survive the frame codec; mutated ACK
frames give only ProtocolError.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msgclient.contract import AckBatch
from msgclient.errors import ProtocolError
from protocols.pulsarwire.acks import (
    CUMULATIVE,
    INDIVIDUAL,
    MAX_REDELIVER_IDS,
    BatchAckers,
    ack_commands,
    ack_set,
    redeliver_commands,
)
from protocols.pulsarwire.framing import FrameDecoder, encode_command
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.receive_codec import _unacked_indexes
from tests.fuzz.strategies import KIB, bounded, examples, mutated

CONSUMER_ID = 5


def bits(words: list[int]) -> set[int]:
    """The indexes set in a BitSet's signed 64-bit words (read independently of the code)."""
    return {w * 64 + b for w, word in enumerate(words) for b in range(64) if (word >> b) & 1}


def through_frames(command: pb.BaseCommand) -> pb.BaseCommand:
    (frame,) = FrameDecoder().feed(encode_command(command))
    return frame.command


# -- ack sets ------------------------------------------------------------------------------


@settings(max_examples=examples(0.15))
@given(st.sets(st.integers(0, 1000), max_size=64), st.integers(0, 1100))
def test_ack_sets_round_trip_through_the_message_command(indexes: set[int], count: int) -> None:
    words = ack_set(indexes)
    assert all(-(2**63) <= w < 2**63 for w in words)  # int64 on the wire
    assert bits(words) == indexes
    command = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2), ack_set=words
        ),
    )
    received = list(through_frames(command).message.ack_set)
    # What the consumer delivers of a batch of ``count``: the set bits below count.
    expected = {i for i in indexes if i < count} if words else None
    assert _unacked_indexes(received, count) == expected


@settings(max_examples=examples(0.1))
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20), st.integers(0, 5000))
def test_any_ack_set_words_give_indexes_of_the_batch(words: list[int], count: int) -> None:
    unacked = _unacked_indexes(words, count)
    if not words:
        assert unacked is None
    else:
        assert unacked == {i for i in bits(words) if i < count}


# -- individual acks -----------------------------------------------------------------------

# Entries of a topic: (entry id, batch size; 0 for a message that is not batched).
ENTRIES = st.dictionaries(st.integers(0, 50), st.integers(0, 40), min_size=1, max_size=6)


@st.composite
def ack_flushes(
    draw: st.DrawFn,
) -> tuple[dict[int, int], list[list[PulsarMessageId]]]:
    """Entries, and each id acked once, in a random order cut into flushes."""
    entries = draw(ENTRIES)
    ids = [
        PulsarMessageId(3, entry, 0, index, size)
        for entry, size in entries.items()
        for index in (range(size) if size else [-1])
    ]
    ids = draw(st.permutations(ids))
    ids = ids[: draw(st.integers(0, len(ids)))]  # some never acked
    cuts = sorted(draw(st.lists(st.integers(0, len(ids)), max_size=5)))
    flushes = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True)]
    return entries, flushes


@settings(max_examples=examples(0.3))
@given(ack_flushes(), st.booleans(), st.booleans())
def test_individual_acks_name_an_entry_when_it_is_complete(
    case: tuple[dict[int, int], list[list[PulsarMessageId]]], batch_index_ack: bool, seen: bool
) -> None:
    entries, flushes = case
    ackers = BatchAckers()
    if seen:  # dispatched before the acks (else: acked after a seek, never seen)
        for entry, size in entries.items():
            if size:
                ackers.delivered(3, entry, set(range(size)))
    acked: dict[int, set[int]] = {entry: set() for entry in entries}
    for flush in flushes:
        commands = ack_commands(CONSUMER_ID, AckBatch(tuple(flush), None), ackers, batch_index_ack)
        for mid in flush:
            acked[mid.entry_id].add(mid.batch_index)
        touched = {mid.entry_id for mid in flush}
        expected: dict[int, set[int]] = {}
        for entry in touched:
            size = entries[entry]
            unacked = set(range(size)) - acked[entry]
            if not size or not unacked:
                expected[entry] = set()
            elif batch_index_ack:
                expected[entry] = unacked
        if not expected:
            assert commands == []
            continue
        (command,) = commands
        received = through_frames(pb.BaseCommand(type=pb.BaseCommand.ACK, ack=command)).ack
        assert received.consumer_id == CONSUMER_ID and received.ack_type == INDIVIDUAL
        got = {data.entryId: bits(list(data.ack_set)) for data in received.message_id}
        assert all(data.ledgerId == 3 for data in received.message_id)
        assert got == expected
    # Completed entries leave no acker behind.
    incomplete = {e for e, size in entries.items() if size and acked[e] != set(range(size))}
    assert len(ackers) == len(incomplete if seen else {e for e in incomplete if acked[e]})


@settings(max_examples=examples(0.1))
@given(ENTRIES, st.data(), st.booleans())
def test_a_cumulative_ack_never_passes_its_message(
    entries: dict[int, int], data: st.DataObject, batch_index_ack: bool
) -> None:
    entry = data.draw(st.sampled_from(sorted(entries)))
    size = entries[entry]
    index = data.draw(st.integers(0, size - 1)) if size else -1
    ackers = BatchAckers()
    for e, s in entries.items():
        if s:
            ackers.delivered(3, e, set(range(s)))
    target = PulsarMessageId(3, entry, 0, index, size)
    commands = ack_commands(CONSUMER_ID, AckBatch((), target), ackers, batch_index_ack)
    if not commands:  # the first entry, partly acked: nothing may be acked yet
        assert entry == 0 and 0 <= index < size - 1 and not batch_index_ack
        return
    (command,) = commands
    received = through_frames(pb.BaseCommand(type=pb.BaseCommand.ACK, ack=command)).ack
    assert received.ack_type == CUMULATIVE
    (position,) = received.message_id
    whole = index < 0 or index == size - 1
    if whole:
        assert (position.entryId, bits(list(position.ack_set))) == (entry, set())
    elif batch_index_ack:  # the entry, with the indexes after the message still unacked
        assert position.entryId == entry
        assert bits(list(position.ack_set)) == set(range(index + 1, size))
    else:  # the entry before it
        assert (position.entryId, list(position.ack_set)) == (entry - 1, [])


# -- redelivery ----------------------------------------------------------------------------


@settings(max_examples=examples(0.1))
@given(
    st.lists(
        st.builds(
            PulsarMessageId,
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 3),
            st.integers(-1, 10),
        ),
        max_size=2500,
    )
)
def test_redeliver_commands_name_each_entry_once(ids: list[PulsarMessageId]) -> None:
    commands = redeliver_commands(CONSUMER_ID, list(ids))
    named = []
    for command in commands:
        received = through_frames(
            pb.BaseCommand(
                type=pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                redeliverUnacknowledgedMessages=command,
            )
        ).redeliverUnacknowledgedMessages
        assert 0 < len(received.message_ids) <= MAX_REDELIVER_IDS or not ids
        named += [PulsarMessageId.from_proto(data).serialize() for data in received.message_ids]
    expected = dict.fromkeys(
        PulsarMessageId(i.ledger_id, i.entry_id, i.partition).serialize() for i in ids
    )
    assert named == list(expected)


# -- mutated ACK frames --------------------------------------------------------------------


@settings(max_examples=examples(0.25))
@given(ack_flushes(), st.booleans(), st.data())
def test_mutated_ack_frames_raise_only_protocol_errors(
    case: tuple[dict[int, int], list[list[PulsarMessageId]]],
    batch_index_ack: bool,
    data: st.DataObject,
) -> None:
    _, flushes = case
    ackers = BatchAckers()
    ids = tuple(mid for flush in flushes for mid in flush)
    with_cumulative = data.draw(st.booleans())
    cumulative = ids[-1] if ids and with_cumulative else None
    commands = ack_commands(CONSUMER_ID, AckBatch(ids, cumulative), ackers, batch_index_ack)
    stream = b"".join(
        encode_command(pb.BaseCommand(type=pb.BaseCommand.ACK, ack=c)) for c in commands
    )
    bad = data.draw(mutated(stream, [(0, 4), (4, 4)]))
    bounded(lambda: FrameDecoder().feed(bad), ProtocolError, 96 * len(bad) + 64 * KIB)


# -- bugs found ----------------------------------------------------------------------------


@pytest.mark.parametrize("batch_index_ack", [False, True])
@pytest.mark.parametrize("batch_size", [1_000_000, 2**31 - 1])
def test_acking_a_deserialized_id_costs_memory_bounded_by_its_bytes(
    batch_size: int, batch_index_ack: bool
) -> None:
    """A message id read back with deserialize() may claim any batch size up to 2**31 - 1.
    BatchAckers.ack used to build set(range(batch_size)) for an entry it had not seen:
    about 60 MB for a million, over 100 GB for the largest int32. It now stores what was
    acked, and sends no ack set for claims over MAX_ACK_SET_INDEXES."""
    raw = PulsarMessageId(1, 2, 0, 0, batch_size).serialize()

    def ack_deserialized() -> list[pb.CommandAck]:
        message_id = PulsarMessageId.deserialize(raw)
        batch = AckBatch((message_id,), message_id)
        return ack_commands(CONSUMER_ID, batch, BatchAckers(), batch_index_ack)

    # Refusing the id (MalformedFrameError) is as good as acking it cheaply.
    bounded(ack_deserialized, ProtocolError, 1024 * len(raw) + 64 * KIB)
