"""The hand-encoded Produce request is byte for byte kafka-python's, at every version."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import ProduceRequest

from protocols.kafkawire.framing import encode_request
from protocols.kafkawire.produce_request import (
    MAX_PRODUCE_VERSION,
    MIN_PRODUCE_VERSION,
    TopicBatches,
    encode_produce_request,
)

SMALL = b"\x01" * 300
LARGE = bytes(range(256)) * 400  # 100 KiB: written as its own piece
TOPICS: list[TopicBatches] = [
    ("orders", [(0, SMALL), (3, LARGE), (1, b"")]),
    ("t\u00e9l\u00e9", [(7, LARGE)]),
    ("x" * 200, [(2, SMALL)]),
]


def kafka_python(version: int, acks: int, topics: list[TopicBatches]) -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=name,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=index, records=records
                    )
                    for index, records in partitions
                ],
            )
            for name, partitions in topics
        ],
    )
    return encode_request(request, version, 42, "client-\u00e9")


@pytest.mark.parametrize("version", range(MIN_PRODUCE_VERSION, MAX_PRODUCE_VERSION + 1))
@pytest.mark.parametrize("acks", [-1, 0, 1])
def test_the_pieces_join_to_kafka_pythons_encoding(version: int, acks: int) -> None:
    pieces = encode_produce_request(version, 42, "client-\u00e9", acks, 30_000, TOPICS)
    assert b"".join(pieces) == kafka_python(version, acks, TOPICS)


@pytest.mark.parametrize("version", [MIN_PRODUCE_VERSION, MAX_PRODUCE_VERSION])
def test_large_batches_are_not_copied(version: int) -> None:
    pieces = encode_produce_request(version, 1, "c", -1, 1000, TOPICS)
    assert sum(piece is LARGE for piece in pieces) == 2
    assert len(pieces) == 5  # envelope, batch, envelope, batch, rest


def test_no_topics_is_a_request_too() -> None:
    assert b"".join(encode_produce_request(9, 42, "client-\u00e9", 1, 30_000, [])) == (
        kafka_python(9, 1, [])
    )


@pytest.mark.parametrize("version", [2, 13])
def test_other_versions_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match=f"Produce v{version}"):
        encode_produce_request(version, 1, "c", 1, 1000, TOPICS)
