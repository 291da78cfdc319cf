"""ChunkMessageId: its bytes are the official clients', and acks and redeliveries of it
cover every chunk."""

from __future__ import annotations

from msgclient.contract import AckBatch
from protocols.pulsarwire.acks import BatchAckers, ack_commands, redeliver_commands
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

CHUNKS = tuple(PulsarMessageId(7, entry, 2) for entry in (10, 11, 13))
CHUNKED = ChunkMessageId(CHUNKS[0], CHUNKS[-1], CHUNKS)


def test_serialized_as_the_last_chunk_with_the_first_inside() -> None:
    data = pb.MessageIdData()
    data.ParseFromString(CHUNKED.serialize())
    assert (data.ledgerId, data.entryId, data.partition) == (7, 13, 2)
    first = data.first_chunk_message_id
    assert (first.ledgerId, first.entryId, first.partition) == (7, 10, 2)


def test_deserialized_back_to_a_chunk_id() -> None:
    back = PulsarMessageId.deserialize(CHUNKED.serialize())
    assert isinstance(back, ChunkMessageId)
    assert back == CHUNKED and hash(back) == hash(CHUNKED)
    assert back.first_chunk_id == CHUNKS[0] and back.last_chunk_id == CHUNKS[-1]
    assert back.chunk_ids == (CHUNKS[0], CHUNKS[-1])  # the middle ones are not in the bytes


def test_orders_as_its_last_chunk() -> None:
    assert PulsarMessageId(7, 12, 2) < CHUNKED < PulsarMessageId(7, 14, 2)
    assert str(CHUNKED) == "(7,10,2,-1);(7,13,2,-1)"


def test_an_individual_ack_covers_every_chunk() -> None:
    [ack] = ack_commands(1, AckBatch((CHUNKED,), None), BatchAckers(), False)
    assert sorted(i.entryId for i in ack.message_id) == [10, 11, 13]


def test_a_cumulative_ack_goes_to_the_last_chunk() -> None:
    [ack] = ack_commands(1, AckBatch((), CHUNKED), BatchAckers(), False)
    assert [(i.ledgerId, i.entryId) for i in ack.message_id] == [(7, 13)]


def test_a_redelivery_covers_every_chunk() -> None:
    [command] = redeliver_commands(1, [CHUNKED, PulsarMessageId(7, 20, 2)])
    assert [i.entryId for i in command.message_ids] == [10, 11, 13, 20]
