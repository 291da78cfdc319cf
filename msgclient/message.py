"""Messages as the core sees them: the id the broker assigns and the message on its way out."""

from __future__ import annotations

import asyncio
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

SendCallback = Callable[[BaseException | None, "MessageId | None"], None]


@functools.total_ordering
class MessageId(ABC):
    """Where the broker stored a message. Each protocol has its own fields.

    Ids of one topic are ordered, hashable, and survive ``serialize``/``deserialize``.
    """

    __slots__ = ()

    @abstractmethod
    def serialize(self) -> bytes:
        """Bytes that the same protocol's ``deserialize`` turns back into an equal id."""

    @abstractmethod
    def _sort_key(self) -> tuple[int, ...]: ...

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._sort_key() == other._sort_key()

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def __hash__(self) -> int:
        return hash(self._sort_key())


class OutgoingMessage:
    """One message from ``send_async`` until the broker confirms it (or it fails).

    Plain slots and a positional constructor: one of these is made per message sent.
    """

    __slots__ = (
        "callback",
        "event_timestamp",
        "future",
        "ordering_key",
        "partition_key",
        "properties",
        "replicate_to",
        "sequence_id",
        "value",
    )

    def __init__(
        self,
        value: bytes,
        future: asyncio.Future[MessageId],
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        replicate_to: tuple[str, ...] | None = None,
        callback: SendCallback | None = None,
    ) -> None:
        self.value = value
        self.future = future
        self.partition_key = partition_key
        self.ordering_key = ordering_key
        self.properties = properties
        self.event_timestamp = event_timestamp
        self.sequence_id = sequence_id
        self.replicate_to = replicate_to
        self.callback = callback

    def complete(self, message_id: MessageId) -> None:
        if not self.future.done():
            self.future.set_result(message_id)
        if self.callback is not None:
            _call(self.callback, None, message_id)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)
            # The caller may hold the future only to learn of success: don't warn
            # "exception never retrieved" for errors it chose not to look at.
            self.future.exception()
        if self.callback is not None:
            _call(self.callback, error, None)


def _call(callback: SendCallback, error: BaseException | None, message_id: Any) -> None:
    try:
        callback(error, message_id)
    except Exception as exc:  # a user callback must not break the producer
        asyncio.get_running_loop().call_exception_handler(
            {"message": "exception in send callback", "exception": exc}
        )
