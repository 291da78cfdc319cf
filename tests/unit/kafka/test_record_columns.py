"""encode_record_columns (send_many's encoder) writes the same bytes as encode_record_batch
for the same records, across the offset-delta widths, with keys, null and empty values."""

from __future__ import annotations

import pytest

from msgclient.contract import ValueColumns
from msgclient.errors import MessageEncodingError
from msgclient.options import CompressionType
from protocols.kafkawire.records import (
    decode_record_batches,
    encode_record_batch,
    encode_record_columns,
)
from tests.unit.kafka.test_records import LIMIT, NOW, out

STATE = {"producer_id": 9, "producer_epoch": 2, "base_sequence": 41, "transactional": True}


def as_messages(values: list[bytes | None], keys: list[bytes | None] | None) -> list:  # type: ignore[type-arg]
    messages = []
    for i, value in enumerate(values):
        message = out(b"" if value is None else value, key=None if keys is None else keys[i])
        message.null_value = value is None
        messages.append(message)
    return messages


@pytest.mark.parametrize("count", [1, 63, 64, 65, 8191, 8192, 9000])
@pytest.mark.parametrize("keyed", [False, True])
def test_the_same_bytes_as_the_message_encoder(count: int, keyed: bool) -> None:
    values: list[bytes | None] = [b"v" * (i % 5 + 100) for i in range(count)]
    values[0] = b""
    values[-1] = None
    keys: list[bytes | None] | None = None
    if keyed:
        keys = [b"k%d" % (i % 7) if i % 3 else None for i in range(count)]
    columns = encode_record_columns(
        ValueColumns(values, keys), compression=CompressionType.NONE, now_ms=NOW, **STATE
    )
    messages = encode_record_batch(
        as_messages(values, keys), compression=CompressionType.NONE, now_ms=NOW, **STATE
    )
    assert columns == messages
    runs, next_offset = decode_record_batches(columns, "t", 0, 0, max_uncompressed_bytes=LIMIT)
    decoded = [m for run in runs for m in run]
    assert [m.value() for m in decoded] == values
    assert next_offset == count


@pytest.mark.parametrize("count", [1, 63, 64, 65, 8191, 8192, 9000])
def test_uniform_values_the_same_bytes_as_the_message_encoder(count: int) -> None:
    """The uniform-size path (cached record separators, no step per record) against the
    per-message encoder: every delta width, a cache grown for a larger batch, sizes that
    evict one another (one byte: where a record's length varint widens)."""
    for size in (100, 0, 63, 64, 1000, 100, 7, 8, 9, 100):
        values: list[bytes | None] = [bytes([i % 256]) * size for i in range(count)]
        columns = encode_record_columns(
            ValueColumns(values, uniform_size=size),
            compression=CompressionType.NONE,
            now_ms=NOW,
            **STATE,
        )
        messages = encode_record_batch(
            as_messages(values, None), compression=CompressionType.NONE, now_ms=NOW, **STATE
        )
        assert columns == messages, (count, size)


def test_compressed_and_refused() -> None:
    values: list[bytes | None] = [b"x" * 50] * 100
    batch = encode_record_columns(ValueColumns(values), compression=CompressionType.LZ4, now_ms=NOW)
    runs, _ = decode_record_batches(batch, "t", 0, 0, max_uncompressed_bytes=LIMIT)
    assert [m.value() for run in runs for m in run] == values
    with pytest.raises(MessageEncodingError, match="at least one"):
        encode_record_columns(ValueColumns([]), compression=CompressionType.NONE, now_ms=NOW)


def test_headers_and_event_timestamps_as_the_message_encoder() -> None:
    count = 200
    values: list[bytes | None] = [b"v%d" % i for i in range(count)]
    headers = [{"h": str(i)} if i % 3 == 0 else None for i in range(count)]
    stamps = [NOW - 5_000 + i if i % 4 else None for i in range(count)]
    stamps[0] = NOW - 10_000  # the batch's base timestamp
    keys: list[str | bytes | None] = ["k" if i % 5 == 0 else None for i in range(count)]
    columns = encode_record_columns(
        ValueColumns(values, keys, headers, stamps),
        compression=CompressionType.NONE,
        now_ms=NOW,
        **STATE,
    )
    messages = [
        out(value or b"", key=key, headers=header, timestamp=stamp)
        for value, key, header, stamp in zip(values, keys, headers, stamps, strict=True)
    ]
    assert columns == encode_record_batch(
        messages, compression=CompressionType.NONE, now_ms=NOW, **STATE
    )
