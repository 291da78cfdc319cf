"""Batch containers: collect messages until a batch is full or its publish delay passes.

A batch closes on ``max_messages`` or ``max_bytes`` (payload bytes), whichever comes
first; the producer closes it on ``max_publish_delay`` with a timer. A message larger than
``max_bytes`` still goes out, alone in its batch. The key-based container keeps one batch
per partition key, so that Key_Shared consumers receive batches of a single key.
"""

from __future__ import annotations

from collections.abc import Callable

from msgclient.message import OutgoingMessage

ADDED, ADDED_FULL, NO_SPACE = 0, 1, 2


class BatchMessageContainer:
    """One open batch of messages in arrival order."""

    __slots__ = ("_clock", "first_added_at", "max_bytes", "max_messages", "messages", "size_bytes")

    def __init__(self, max_messages: int, max_bytes: int, clock: Callable[[], float]) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages: list[OutgoingMessage] = []
        self.size_bytes = 0
        self.first_added_at: float | None = None
        self._clock = clock

    def __len__(self) -> int:
        return len(self.messages)

    def add(self, message: OutgoingMessage) -> int:
        """Add ``message`` if it fits: ADDED, ADDED_FULL (close the batch now), or NO_SPACE
        (close the batch, then add again). One call per message: this is the hot path."""
        messages = self.messages
        size = self.size_bytes + len(message.value)
        if not messages:
            self.first_added_at = self._clock()
        elif len(messages) >= self.max_messages or size > self.max_bytes:
            return NO_SPACE
        messages.append(message)
        self.size_bytes = size
        return ADDED_FULL if len(messages) >= self.max_messages or size >= self.max_bytes else ADDED

    def close(self) -> list[list[OutgoingMessage]]:
        """Take the open batch (as a list of batches, empty if none) and start a new one."""
        if not self.messages:
            return []
        batch, self.messages = self.messages, []
        self.size_bytes = 0
        self.first_added_at = None
        return [batch]


class KeyBasedBatchMessageContainer(BatchMessageContainer):
    """One batch per key (the ordering key if set, else the partition key, as the Java
    client); all of them close together.

    Batches come out ordered by their first message, so sequence ids stay increasing
    along the pending queue.
    """

    __slots__ = ("_by_key",)

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

    def close(self) -> list[list[OutgoingMessage]]:
        if not self.messages:
            return []
        super().close()
        batches, self._by_key = list(self._by_key.values()), {}
        batches.sort(key=lambda batch: batch[0].sequence_id or 0)
        return batches
