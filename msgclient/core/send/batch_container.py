"""Batch containers: collect messages until a batch is full or its publish delay passes.

A batch closes on ``max_messages`` or ``max_bytes`` (payload bytes), whichever comes
first; the producer closes it on ``max_publish_delay`` with a timer. A message larger than
``max_bytes`` still goes out, alone in its batch. The key-based container keeps one batch
per partition key, so that Key_Shared consumers receive batches of a single key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from msgclient.contract import OpSend, ValueColumns, uniform_size
from msgclient.message import MessageId, OutgoingMessage, SendCallback

ADDED, ADDED_FULL, NO_SPACE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class PlainBatch:
    """A closed batch of messages sent without options, as columns: values (None: a null
    value) numbered from ``first_sequence_id``, and each one's future or callback."""

    values: list[bytes | None]
    futures: list[asyncio.Future[MessageId] | None]
    callbacks: list[SendCallback | None]
    first_sequence_id: int
    size_bytes: int

    def op(self, created_at: float) -> OpSend:
        columns = ValueColumns(self.values, uniform_size=uniform_size(self.values))
        return OpSend.of_plain(
            columns, self.first_sequence_id, self.futures, self.callbacks, self.size_bytes,
            created_at,
        )  # fmt: skip


class BatchMessageContainer:
    """One open batch of messages in arrival order.

    A message sent without options (``add_plain``) is kept as columns, with no
    ``OutgoingMessage`` made for it: the batch closes as a ``PlainBatch``. Once the batch
    also takes a message with options (``add``), what it holds becomes messages, so that
    one batch keeps the order of both.
    """

    takes_plain = True  # whether ``add_plain`` may be used

    __slots__ = (
        "_callbacks",
        "_clock",
        "_first_sequence_id",
        "_futures",
        "_values",
        "first_added_at",
        "max_bytes",
        "max_messages",
        "messages",
        "size_bytes",
    )

    def __init__(self, max_messages: int, max_bytes: int, clock: Callable[[], float]) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages: list[OutgoingMessage] = []
        self._values: list[bytes | None] = []
        self._futures: list[asyncio.Future[MessageId] | None] = []
        self._callbacks: list[SendCallback | None] = []
        self._first_sequence_id = 0
        self.size_bytes = 0
        self.first_added_at: float | None = None
        self._clock = clock

    def __len__(self) -> int:
        return len(self.messages) + len(self._values)

    def add(self, message: OutgoingMessage) -> int:
        """Add ``message`` if it fits: ADDED, ADDED_FULL (close the batch now), or NO_SPACE
        (close the batch, then add again). One call per message: this is the hot path."""
        if self._values:
            self._to_messages()
        messages = self.messages
        size = self.size_bytes + len(message.value)
        if not messages:
            self.first_added_at = self._clock()
        elif len(messages) >= self.max_messages or size > self.max_bytes:
            return NO_SPACE
        messages.append(message)
        self.size_bytes = size
        return ADDED_FULL if len(messages) >= self.max_messages or size >= self.max_bytes else ADDED

    def add_plain(
        self,
        value: bytes | None,
        size: int,
        future: asyncio.Future[MessageId] | None,
        callback: SendCallback | None,
        sequence_id: int,
    ) -> int:
        """``add`` of a message without options: ``value`` (None: a null value) of
        ``size`` bytes, its future or callback, and its sequence id, the one after the
        previous message's (the producer numbers them so)."""
        if self.messages:
            return self.add(_message(value, future, callback, sequence_id))
        values = self._values
        total = self.size_bytes + size
        if not values:
            self.first_added_at = self._clock()
            self._first_sequence_id = sequence_id
        elif len(values) >= self.max_messages or total > self.max_bytes:
            return NO_SPACE
        values.append(value)
        self._futures.append(future)
        self._callbacks.append(callback)
        self.size_bytes = total
        return ADDED_FULL if len(values) >= self.max_messages or total >= self.max_bytes else ADDED

    def close(self) -> list[list[OutgoingMessage] | PlainBatch]:
        """Take the open batch (as a list of batches, empty if none) and start a new one."""
        if self._values:
            batch = PlainBatch(
                self._values, self._futures, self._callbacks, self._first_sequence_id,
                self.size_bytes,
            )  # fmt: skip
            self._values, self._futures, self._callbacks = [], [], []
            self.size_bytes = 0
            self.first_added_at = None
            return [batch]
        if not self.messages:
            return []
        messages, self.messages = self.messages, []
        self.size_bytes = 0
        self.first_added_at = None
        return [messages]

    def _to_messages(self) -> None:
        """The plain messages held become OutgoingMessages, ahead of one with options."""
        first = self._first_sequence_id
        held = zip(self._values, self._futures, self._callbacks, strict=True)
        self.messages.extend(
            _message(value, future, callback, first + index)
            for index, (value, future, callback) in enumerate(held)
        )
        self._values, self._futures, self._callbacks = [], [], []


def _message(
    value: bytes | None,
    future: asyncio.Future[MessageId] | None,
    callback: SendCallback | None,
    sequence_id: int,
) -> OutgoingMessage:
    message = OutgoingMessage(
        b"" if value is None else value, future, callback=callback, null_value=value is None
    )
    message.sequence_id = sequence_id
    return message


class KeyBasedBatchMessageContainer(BatchMessageContainer):
    """One batch per key (the ordering key if set, else the partition key, as the Java
    client); all of them close together.

    Batches come out ordered by their first message, so sequence ids stay increasing
    along the pending queue.
    """

    __slots__ = ("_by_key",)
    takes_plain = False  # its batches go by key: messages only

    def __init__(self, max_messages: int, max_bytes: int, clock: Callable[[], float]) -> None:
        super().__init__(max_messages, max_bytes, clock)
        self._by_key: dict[bytes | str | None, list[OutgoingMessage]] = {}

    def add(self, message: OutgoingMessage) -> int:
        status = super().add(message)
        if status != NO_SPACE:
            key = (
                message.ordering_key if message.ordering_key is not None else message.partition_key
            )
            self._by_key.setdefault(key, []).append(message)
        return status

    def close(self) -> list[list[OutgoingMessage] | PlainBatch]:
        if not self.messages:
            return []
        super().close()
        batches, self._by_key = list(self._by_key.values()), {}
        batches.sort(key=lambda batch: batch[0].sequence_id or 0)
        return list(batches)
