"""send_many's input by columns: checked, and cut into batches as send_async's batches
close; and the ids of a call's messages once all are settled (``SentMessages``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from msgclient.contract import Router
from msgclient.errors import InvalidConfigurationError, MessageTooBigError
from msgclient.message import MessageId, OutgoingMessage
from msgclient.sent_messages import SentMessages
from msgclient.validators import check_key, check_non_negative, check_properties, value_bytes


def key_column(
    keys: Sequence[str | bytes | None] | None, count: int
) -> Sequence[str | bytes | None] | None:
    """``send_many``'s keys, checked (None: no keys at all). A str key stays one: Pulsar
    sends str keys as they are and bytes keys base64-encoded and flagged."""
    if keys is None:
        return None
    if len(keys) != count:
        raise InvalidConfigurationError(f"send_many: {len(keys)} keys for {count} values")
    for key in keys:
        if key is not None and type(key) is not str and type(key) is not bytes:
            check_key("a key", key)
    return keys


def check_columns(
    count: int,
    properties: Sequence[Mapping[str, str] | None] | None,
    event_timestamps: Sequence[int | None] | None,
) -> None:
    """``send_many``'s properties and event timestamps: a column each, of ``count``."""
    for name, column in (("properties", properties), ("event_timestamps", event_timestamps)):
        if column is not None and len(column) != count:
            raise InvalidConfigurationError(f"send_many: {len(column)} {name} for {count} values")
    if properties is not None:
        for record_properties in properties:
            check_properties("properties", record_properties)
    if event_timestamps is not None:
        for timestamp in event_timestamps:
            if timestamp is not None:
                check_non_negative("event_timestamp", timestamp)


def check_value(value: object, size_limit: int, topic: str) -> None:
    if type(value) is not bytes:
        value_bytes(value)  # raises TypeError naming the type
        raise TypeError(f"send_many takes bytes or None values, not {type(value).__name__}")
    raise MessageTooBigError(
        f"message of {len(value)} bytes is over the broker's limit of {size_limit} bytes "
        f"(topic {topic})"
    )


def uniform_cuts(
    count: int, size: int, max_count: int, max_bytes: int
) -> Iterator[tuple[int, int, int]]:
    """``cuts`` of ``count`` values of ``size`` bytes each."""
    per_batch = min(max_count, max(1, max_bytes // size) if size else max_count)
    for start in range(0, count, per_batch):
        end = min(start + per_batch, count)
        yield start, end, (end - start) * size


def cuts(
    values: Sequence[bytes | None], max_count: int, max_bytes: int
) -> Iterator[tuple[int, int, int]]:
    """(start, end, payload bytes) of each batch of ``values``: at most ``max_count``
    values, and ``max_bytes`` unless one value alone is larger."""
    start = size = 0
    for end, value in enumerate(values):
        length = 0 if value is None else len(value)
        if end > start and (end - start == max_count or size + length > max_bytes):
            yield start, end, size
            start, size = end, 0
        size += length
    if start < len(values):
        yield start, len(values), size


class _BatchProbe:
    """What a partitioner sees of one unkeyed batch of a bulk send: no key, and its size
    (a range of that length stands for the values: nothing is allocated)."""

    __slots__ = ("partition_key", "value")

    def __init__(self, partition_key: str | bytes | None, size: int) -> None:
        self.partition_key = partition_key
        self.value = range(size)


class RoutingProbe:
    """What a built-in router sees of a message sent without options (which has no
    OutgoingMessage): no key, and its value, set before each call."""

    __slots__ = ("partition_key", "value")

    def __init__(self) -> None:
        self.partition_key: str | bytes | None = None
        self.value: bytes = b""


def batch_probe(size: int) -> OutgoingMessage:
    return _BatchProbe(None, size)  # type: ignore[return-value]


def by_partition(router: Router | None, keys: Sequence[str | bytes | None]) -> dict[int, list[int]]:
    """The positions of ``keys`` by the partition the router gives each (in order)."""
    if router is None:
        return {0: list(range(len(keys)))}
    by_partition: dict[int, list[int]] = {}
    probe = _BatchProbe(None, 0)
    for position, key in enumerate(keys):
        probe.partition_key = key
        by_partition.setdefault(router(probe), []).append(position)  # type: ignore[arg-type]
    return by_partition


async def each_confirmed(futures: list[asyncio.Future[MessageId]]) -> SentMessages:
    """The ids of a ``send_many_async`` call sent message by message, once all are
    settled; the first failure's error if one failed."""
    await _settled(futures)
    count = len(futures)
    return SentMessages(count, [(range(count), lambda: [f.result() for f in futures])])


async def confirmed(
    count: int,
    positions: list[Sequence[int] | range],
    futures: list[asyncio.Future[Callable[[], list[MessageId]]]],
) -> SentMessages:
    """The ids of a ``send_many_async`` call once every batch is settled; the first failed
    batch's error if one failed."""
    await _settled(futures)
    return SentMessages(
        count, [(taken, f.result()) for taken, f in zip(positions, futures, strict=True)]
    )


async def _settled(futures: Sequence[asyncio.Future[Any]]) -> None:
    """Once every future is done: the first one's error, if one failed."""
    await asyncio.wait(futures)
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
