"""Ack encoding without sockets: AckBatch -> CommandAck, the batch acker, redelivery ids."""

from __future__ import annotations

from msgclient.contract import AckBatch
from protocols.pulsarwire.acks import (
    CUMULATIVE,
    INDIVIDUAL,
    MAX_ACK_SET_INDEXES,
    MAX_REDELIVER_IDS,
    BatchAckers,
    ack_commands,
    ack_set,
    redeliver_commands,
)
from protocols.pulsarwire.message_id import PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

CONSUMER_ID = 7


def batched(entry: int, index: int, size: int = 3, ledger: int = 5) -> PulsarMessageId:
    return PulsarMessageId(ledger, entry, -1, index, size)


def entries(ack: pb.CommandAck) -> list[tuple[int, int, list[int]]]:
    """(ledger, entry, ack set) of each MessageIdData; nothing else may be set."""
    for data in ack.message_id:
        assert not data.HasField("batch_index") and not data.HasField("partition")
    return [(d.ledgerId, d.entryId, list(d.ack_set)) for d in ack.message_id]


def acks(
    batch: AckBatch, ackers: BatchAckers, batch_index_ack: bool = False
) -> list[pb.CommandAck]:
    commands = ack_commands(CONSUMER_ID, batch, ackers, batch_index_ack)
    assert all(c.consumer_id == CONSUMER_ID for c in commands)
    return commands


def individual(*ids: PulsarMessageId) -> AckBatch:
    return AckBatch(tuple(sorted(ids)), None)


def cumulative(message_id: PulsarMessageId) -> AckBatch:
    return AckBatch((), message_id)


def test_individual_acks_of_unbatched_messages_go_in_one_command() -> None:
    (ack,) = acks(
        individual(PulsarMessageId(5, 1), PulsarMessageId(5, 2), PulsarMessageId(6, 0)),
        BatchAckers(),
    )
    assert ack.ack_type == INDIVIDUAL
    assert entries(ack) == [(5, 1, []), (5, 2, []), (6, 0, [])]
    assert not ack.HasField("request_id")


def test_nothing_to_ack_is_no_command() -> None:
    assert acks(AckBatch((), None), BatchAckers()) == []


def test_a_batched_entry_is_acked_only_when_all_its_messages_are() -> None:
    # pulsar-lite acks the whole entry on any ack of it (brokers.md): acking the entry
    # early would lose the messages of it still unacked.
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    assert acks(individual(batched(1, 0)), ackers) == []
    assert acks(individual(batched(1, 2)), ackers) == []
    (ack,) = acks(individual(batched(1, 1)), ackers)
    assert entries(ack) == [(5, 1, [])]
    assert len(ackers) == 0  # the entry's acker is gone with it


def test_one_flush_can_complete_an_entry() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    ackers.delivered(5, 2, {0, 1, 2})
    ids = [batched(1, i) for i in range(3)] + [batched(2, 0), PulsarMessageId(5, 3)]
    (ack,) = acks(individual(*ids), ackers)
    assert entries(ack) == [(5, 1, []), (5, 3, [])]  # entry 2 still has two unacked
    assert len(ackers) == 1


def test_acks_of_entries_interleaved_complete_each_entry() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    ackers.delivered(5, 2, {0, 1})
    order = [batched(1, 0), batched(2, 1), batched(1, 2), batched(2, 0), batched(1, 1)]
    (ack,) = acks(AckBatch(tuple(order), None), ackers)  # in this order, not sorted
    assert sorted(entries(ack)) == [(5, 1, []), (5, 2, [])]
    assert len(ackers) == 0


def test_the_entry_id_of_a_batched_entry_acks_all_of_it_and_forgets_its_acker() -> None:
    # What acknowledging a whole receive_many batch sends: one id per entry.
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    (ack,) = acks(individual(PulsarMessageId(5, 1)), ackers)
    assert entries(ack) == [(5, 1, [])]
    assert len(ackers) == 0


def test_an_entry_not_seen_dispatched_counts_all_its_messages_as_unacked() -> None:
    ackers = BatchAckers()
    assert acks(individual(batched(4, 1, size=2)), ackers) == []
    (ack,) = acks(individual(batched(4, 0, size=2)), ackers)
    assert entries(ack) == [(5, 4, [])]


def test_an_unknown_batch_size_acks_the_entry_at_once() -> None:
    # An id built by hand carries no batch size: as the Java client's disabled acker.
    (ack,) = acks(individual(PulsarMessageId(5, 4, -1, 1)), BatchAckers())
    assert entries(ack) == [(5, 4, [])]


def test_a_redelivered_entry_keeps_what_was_acked_and_drops_what_the_broker_did() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2, 3})
    assert acks(individual(batched(1, 0, 4)), ackers) == []
    # Redelivered without index 3 (acked by batch index on the broker): 1 and 2 are left.
    ackers.delivered(5, 1, {0, 1, 2})
    assert acks(individual(batched(1, 1, 4)), ackers) == []
    (ack,) = acks(individual(batched(1, 2, 4)), ackers)
    assert entries(ack) == [(5, 1, [])]


def test_batch_index_ack_sends_the_indexes_still_unacked() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    (ack,) = acks(individual(batched(1, 1)), ackers, batch_index_ack=True)
    assert entries(ack) == [(5, 1, [0b101])]  # bits set: still unacked, as Java's BitSet
    (ack,) = acks(individual(batched(1, 0)), ackers, batch_index_ack=True)
    assert entries(ack) == [(5, 1, [0b100])]
    (ack,) = acks(individual(batched(1, 2)), ackers, batch_index_ack=True)
    assert entries(ack) == [(5, 1, [])]  # complete: the entry, with no ack set


def test_batch_index_ack_of_several_indexes_of_an_entry_is_one_id() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, set(range(5)))
    (ack,) = acks(individual(batched(1, 0, 5), batched(1, 3, 5)), ackers, batch_index_ack=True)
    assert entries(ack) == [(5, 1, [0b10110])]


def test_ack_set_words_are_signed_64_bit() -> None:
    assert ack_set([]) == []
    assert ack_set([0, 2]) == [0b101]
    assert ack_set([63]) == [-(2**63)]
    assert ack_set([64, 65]) == [0, 0b11]


def test_cumulative_ack_of_an_unbatched_message() -> None:
    (ack,) = acks(cumulative(PulsarMessageId(5, 9, 2)), BatchAckers())
    assert ack.ack_type == CUMULATIVE
    assert entries(ack) == [(5, 9, [])]


def test_cumulative_ack_of_the_last_message_of_a_batch_acks_the_entry() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 9, {0, 1, 2})
    (ack,) = acks(cumulative(batched(9, 2)), ackers)
    assert (ack.ack_type, entries(ack)) == (CUMULATIVE, [(5, 9, [])])
    assert len(ackers) == 0


def test_cumulative_ack_inside_a_batch_acks_up_to_the_previous_entry() -> None:
    # As the Java client (prevBatchMessageId): acking entry 9 would ack all of it.
    ackers = BatchAckers()
    ackers.delivered(5, 9, {0, 1, 2})
    (ack,) = acks(cumulative(batched(9, 1)), ackers)
    assert (ack.ack_type, entries(ack)) == (CUMULATIVE, [(5, 8, [])])
    # The rest of the entry, acked individually, completes it.
    (ack,) = acks(individual(batched(9, 2)), ackers)
    assert (ack.ack_type, entries(ack)) == (INDIVIDUAL, [(5, 9, [])])


def test_cumulative_ack_inside_the_first_entry_of_a_ledger_sends_nothing() -> None:
    # Java would send entry -1 (2**64 - 1 on the wire), which a broker reading it as
    # unsigned would take for the whole ledger.
    assert acks(cumulative(batched(0, 1)), BatchAckers()) == []


def test_cumulative_ack_completes_an_entry_whose_later_messages_were_acked() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 9, {0, 1, 2})
    assert acks(individual(batched(9, 2)), ackers) == []
    (ack,) = acks(cumulative(batched(9, 1)), ackers)
    assert (ack.ack_type, entries(ack)) == (CUMULATIVE, [(5, 9, [])])


def test_cumulative_batch_index_ack_carries_the_indexes_after_it() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 9, set(range(4)))
    (ack,) = acks(cumulative(batched(9, 1, 4)), ackers, batch_index_ack=True)
    assert (ack.ack_type, entries(ack)) == (CUMULATIVE, [(5, 9, [0b1100])])


def test_cumulative_ack_forgets_the_ackers_of_earlier_entries() -> None:
    ackers = BatchAckers()
    for entry in (1, 2, 3):
        ackers.delivered(5, entry, {0, 1, 2})
    acks(cumulative(PulsarMessageId(5, 2)), ackers)
    assert len(ackers) == 1  # entry 3's


def test_cumulative_and_individual_in_one_flush_cumulative_first() -> None:
    batch = AckBatch((PulsarMessageId(5, 20),), PulsarMessageId(5, 10))
    first, second = acks(batch, BatchAckers())
    assert (first.ack_type, entries(first)) == (CUMULATIVE, [(5, 10, [])])
    assert (second.ack_type, entries(second)) == (INDIVIDUAL, [(5, 20, [])])


def test_cumulative_ack_covering_individual_acks_of_the_same_flush_leaves_no_acker() -> None:
    ackers = BatchAckers()
    ackers.delivered(5, 1, {0, 1, 2})
    (ack,) = acks(AckBatch((batched(1, 0),), PulsarMessageId(5, 2)), ackers)
    assert (ack.ack_type, entries(ack)) == (CUMULATIVE, [(5, 2, [])])
    assert len(ackers) == 0


def test_an_unseen_entry_completes_when_every_index_is_acked_in_any_order() -> None:
    ackers = BatchAckers()  # acked after a seek: the entry was never delivered here
    assert acks(individual(batched(4, 2)), ackers) == []
    (before,) = acks(cumulative(batched(4, 0)), ackers)
    assert (before.ack_type, entries(before)) == (CUMULATIVE, [(5, 3, [])])
    (ack,) = acks(individual(batched(4, 1)), ackers)
    assert (ack.ack_type, entries(ack)) == (INDIVIDUAL, [(5, 4, [])])
    assert len(ackers) == 0


def test_an_unseen_entry_redelivered_keeps_its_acks() -> None:
    ackers = BatchAckers()
    acks(individual(batched(4, 0)), ackers)
    acks(cumulative(batched(3, 0)), ackers)
    ackers.delivered(5, 4, {0, 1, 2})  # the broker sends the whole entry again
    assert acks(individual(batched(4, 1)), ackers) == []
    (ack,) = acks(individual(batched(4, 2)), ackers)
    assert entries(ack) == [(5, 4, [])]


def test_an_unseen_entry_has_an_ack_set_of_what_is_left() -> None:
    (ack,) = acks(individual(batched(4, 1, 4)), BatchAckers(), batch_index_ack=True)
    assert entries(ack) == [(5, 4, [0b1101])]


def test_no_ack_set_for_an_entry_claiming_more_indexes_than_any_batch() -> None:
    huge = MAX_ACK_SET_INDEXES + 1
    ackers = BatchAckers()
    assert acks(individual(batched(4, 1, huge)), ackers, batch_index_ack=True) == []
    assert acks(cumulative(batched(4, 5, huge)), ackers, batch_index_ack=True) == [
        pb.CommandAck(
            consumer_id=CONSUMER_ID,
            ack_type=CUMULATIVE,
            message_id=[pb.MessageIdData(ledgerId=5, entryId=3)],
        )
    ]


def test_redeliver_names_each_entry_once() -> None:
    ids = [batched(1, 0), batched(1, 2), PulsarMessageId(5, 2, 3), batched(1, 1)]
    (command,) = redeliver_commands(CONSUMER_ID, list(ids))
    assert command.consumer_id == CONSUMER_ID
    fields = [
        (d.ledgerId, d.entryId, d.partition, d.HasField("batch_index")) for d in command.message_ids
    ]
    assert fields == [(5, 1, -1, False), (5, 2, 3, False)]


def test_redeliver_everything_has_no_ids() -> None:
    (command,) = redeliver_commands(CONSUMER_ID, None)
    assert list(command.message_ids) == []


def test_redeliver_splits_many_ids() -> None:
    ids = [PulsarMessageId(5, i) for i in range(MAX_REDELIVER_IDS + 1)]
    commands = redeliver_commands(CONSUMER_ID, list(ids))
    assert [len(c.message_ids) for c in commands] == [MAX_REDELIVER_IDS, 1]
