"""A dispatch's payload bytes (the consumer's ``bytes_received``): a product when the
decoder read every value at one size, a sum otherwise; the same either way."""

from __future__ import annotations

import asyncio

import pytest

from msgclient.contract import OpSend
from msgclient.message import OutgoingMessage
from msgclient.message_batch import MessageBlock, payload_bytes
from msgclient.options import CompressionType
from protocols.kafkawire.records import decode_record_batches, encode_record_batch
from protocols.kafkawire.records.run import RecordRun
from protocols.pulsarwire.send_codec import SendEncoder
from tests.unit.pulsar.test_receive_codec import as_message_frame, decode

UNIFORM = [b"v%04d" % i for i in range(40)]  # columnar decoding: 16 or more alike
VARIED = [b"x" * (i % 7) for i in range(40)]


def outgoing(value: bytes, sequence_id: int) -> OutgoingMessage:
    message = OutgoingMessage(value, asyncio.get_running_loop().create_future())
    message.sequence_id = sequence_id
    return message


@pytest.mark.parametrize("values", [UNIFORM, VARIED], ids=["uniform", "varied"])
async def test_kafka_runs(values: list[bytes]) -> None:
    batch = encode_record_batch(
        [outgoing(v, i) for i, v in enumerate(values)], compression=CompressionType.NONE, now_ms=0
    )
    runs, _ = decode_record_batches(batch, "t", 0, 0, max_uncompressed_bytes=1 << 20)
    assert sum(map(payload_bytes, runs)) == sum(map(len, values))
    if values is UNIFORM:
        (run,) = runs
        assert isinstance(run, RecordRun) and run._value_size == 5  # the product
        assert payload_bytes(run.part(3, 10)) == 35


@pytest.mark.parametrize("values", [UNIFORM, VARIED], ids=["uniform", "varied"])
async def test_pulsar_entries(values: list[bytes]) -> None:
    encoder = SendEncoder(1, CompressionType.NONE, None)
    encoder.producer_name = "p"
    messages = [outgoing(v, i) for i, v in enumerate(values)]
    op = OpSend(messages, True, sum(map(len, values)), 0.0)
    entry = decode(as_message_frame(encoder.encode(op)))
    assert isinstance(entry, MessageBlock)
    assert entry._value_size == (5 if values is UNIFORM else -1)  # type: ignore[attr-defined]
    assert payload_bytes(entry) == sum(map(len, values))
    assert payload_bytes(list(entry)) == sum(map(len, values))  # Messages: the same
