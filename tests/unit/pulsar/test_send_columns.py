"""send_many's Pulsar encoder: a bulk op's SEND frame carries the same batch payload as
the same messages sent one by one, and the same entry metadata but for the publish time."""

from __future__ import annotations

import asyncio

import pytest

from msgclient.contract import OpSend, ValueColumns
from msgclient.options import CompressionType
from protocols.pulsarwire.compression import get_codec
from protocols.pulsarwire.framing import FrameDecoder
from protocols.pulsarwire.send_codec import SendEncoder, batch_payload, batch_payload_columns
from tests.unit.pulsar.test_receive_codec import outgoing


def columns() -> tuple[list[bytes | None], list[str | bytes | None]]:
    values: list[bytes | None] = [b"v" * (i % 9) for i in range(300)]
    values[5] = None
    keys: list[str | bytes | None] = [None] * 300
    keys[0], keys[7], keys[8] = "first", b"\x00\x01", "clé"
    return values, keys


async def test_the_batch_payload_of_messages() -> None:
    values, keys = columns()
    messages = [
        outgoing(value or b"", 1000 + i, partition_key=key, null_value=value is None)
        for i, (value, key) in enumerate(zip(values, keys, strict=True))
    ]
    assert batch_payload_columns(ValueColumns(values, keys), 1000) == batch_payload(messages)
    plain = [v or b"" for v in values]
    assert batch_payload_columns(ValueColumns(plain), 1) == batch_payload(
        [outgoing(v, 1 + i) for i, v in enumerate(plain)]
    )


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
async def test_the_frame_of_the_same_messages(codec: CompressionType) -> None:
    values, keys = columns()
    encoder = SendEncoder(3, codec, None if codec is CompressionType.NONE else get_codec(codec))
    encoder.producer_name = "p"
    bulk = OpSend.of_columns(
        ValueColumns(values, keys), 1000, asyncio.get_running_loop().create_future(), 0, 0.0
    )
    messages = [
        outgoing(value or b"", 1000 + i, partition_key=key, null_value=value is None)
        for i, (value, key) in enumerate(zip(values, keys, strict=True))
    ]
    single = OpSend(messages, True, 0, 0.0)
    (ours,) = FrameDecoder().feed(encoder.encode(bulk))
    (theirs,) = FrameDecoder().feed(encoder.encode(single))
    assert ours.command == theirs.command
    assert ours.payload == theirs.payload
    assert ours.metadata is not None and theirs.metadata is not None
    ours.metadata.publish_time = theirs.metadata.publish_time = 0
    assert ours.metadata == theirs.metadata
    assert ours.metadata.partition_key == "first"


async def test_properties_and_event_timestamps_as_messages() -> None:
    values: list[bytes | None] = [b"x%d" % i for i in range(50)]
    props = [{"p": str(i)} if i % 2 else None for i in range(50)]
    stamps = [1_700_000_000_000 + i if i % 3 else None for i in range(50)]
    messages = [
        outgoing(value or b"", 7 + i, properties=prop, event_timestamp=stamp)
        for i, (value, prop, stamp) in enumerate(zip(values, props, stamps, strict=True))
    ]
    columns = ValueColumns(values, None, props, stamps)
    assert batch_payload_columns(columns, 7) == batch_payload(messages)
