"""Messages in bulk: columns instead of one object per message.

A ``MessageBlock`` is what an adapter hands the core for one dispatch it decoded as
columns (a Pulsar batch entry): a sequence of Messages made only when asked for, so the
per-message path (``receive``) works on it unchanged, while ``Consumer.receive_many``
gives a bulk reader a ``MessageBatch`` whose columns are slices of the blocks' lists: no
Message, no MessageId and no acknowledgment per message.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar, cast, overload

from msgclient.message import Message, MessageId
from msgclient.message import payload_bytes as message_payload_bytes

T = TypeVar("T")


class MessageBlock(Sequence[Message], abc.ABC):
    """The messages of one dispatch as columns. Looking at a message makes the Messages of
    the whole block, once, in one pass (the per-message path takes them all anyway); the
    columns and ids never make any."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: list[Message] | None = None

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self.messages()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages())

    def messages(self) -> list[Message]:
        """Every Message of the block (made at the first call)."""
        made = self._made
        if made is None:
            made = self._made = self._make_all()
        return made

    @abc.abstractmethod
    def _make_all(self) -> list[Message]:
        """The Messages, built from the columns."""

    @abc.abstractmethod
    def topic_name(self) -> str: ...

    # The columns, for messages start..end-1 of the block.

    @abc.abstractmethod
    def values(self, start: int, end: int) -> list[bytes | None]: ...

    @abc.abstractmethod
    def key_bytes(self, start: int, end: int) -> list[bytes | None]: ...

    @abc.abstractmethod
    def properties(self, start: int, end: int) -> list[Mapping[str, str] | None]: ...

    @abc.abstractmethod
    def publish_timestamps(self, start: int, end: int) -> list[int]: ...

    @abc.abstractmethod
    def event_timestamps(self, start: int, end: int) -> list[int]: ...

    @abc.abstractmethod
    def message_ids(self, start: int, end: int) -> list[MessageId]: ...

    @abc.abstractmethod
    def ack_ids(self, start: int, end: int) -> list[MessageId]:
        """The ids that acknowledge messages start..end-1: fewer than one per message
        where the protocol allows (a whole Pulsar entry is acknowledged by its entry id)."""

    def payload_bytes(self) -> int:
        """The payload bytes of every message of the block (a null value: 0); blocks
        that keep their values as a list of bytes add them up in C."""
        return sum(len(value) for value in self.values(0, len(self)) if value is not None)


Slice = tuple[Sequence[Message], int, int]  # messages[start:end] of one dispatch


def message_ids(messages: Sequence[Message], start: int, end: int) -> list[MessageId]:
    """The ids of ``messages[start:end]``, without making a block's Messages."""
    if isinstance(messages, MessageBlock):
        return messages.message_ids(start, end)
    return [m.message_id() for m in messages[start:end]]


def first_and_last_ids(messages: Sequence[Message]) -> tuple[MessageId, MessageId]:
    """The ids of a dispatch's first and last messages (not empty)."""
    count = len(messages)
    return message_ids(messages, 0, 1)[0], message_ids(messages, count - 1, count)[0]


def payload_bytes(messages: Sequence[Message]) -> int:
    """The payload bytes of one dispatch's messages (the consumer's ``bytes_received``)."""
    # The class's MRO, not isinstance: an ABC's isinstance runs Python code, a cost per
    # dispatch that a Kafka run of some 80 records felt.
    if MessageBlock in type(messages).__mro__:
        return cast(MessageBlock, messages).payload_bytes()
    return message_payload_bytes(messages)


def topic_name(messages: Sequence[Message]) -> str:
    """The topic (partition) of one dispatch's messages."""
    if isinstance(messages, MessageBlock):
        return messages.topic_name()
    return messages[0].topic_name()


class MessageBatch(Sequence[Message]):
    """Messages taken together by ``Consumer.receive_many``, in arrival order.

    A sequence of Message (made on access) and, for bulk readers, columns: ``values()``,
    ``key_bytes()``, ``properties()``, ``publish_timestamps()``, ``event_timestamps()``,
    ``message_ids()`` and ``topic_names()``, each a new list of ``len(batch)`` items.
    ``Consumer.acknowledge(batch)`` acknowledges all of them at once.
    """

    __slots__ = ("_length", "_slices")

    def __init__(self, slices: list[Slice]) -> None:
        self._slices = slices
        self._length = sum(end - start for _, start, end in slices)

    @property
    def slices(self) -> list[Slice]:
        """(dispatch, start, end) parts, for the consumer's bulk acknowledgment."""
        return self._slices

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"message index {index} out of range ({self._length} messages)")
        for messages, start, end in self._slices:
            if index < end - start:
                return messages[start + index]
            index -= end - start
        raise AssertionError("unreachable: the length counts every slice")

    def __iter__(self) -> Iterator[Message]:
        for messages, start, end in self._slices:
            for index in range(start, end):
                yield messages[index]

    def __repr__(self) -> str:
        return f"MessageBatch({self._length} messages)"

    def values(self) -> list[bytes | None]:
        """The payloads (None for a null value)."""
        return self._column(lambda b, i, j: b.values(i, j), lambda m: m.value())

    def key_bytes(self) -> list[bytes | None]:
        """The keys as bytes, as ``Message.key_bytes()`` (a Pulsar key in UTF-8)."""
        return self._column(lambda b, i, j: b.key_bytes(i, j), lambda m: m.key_bytes())

    def properties(self) -> list[Mapping[str, str] | None]:
        """Each message's properties (Kafka headers), None when it has none."""
        return self._column(lambda b, i, j: b.properties(i, j), lambda m: m.properties() or None)

    def publish_timestamps(self) -> list[int]:
        return self._column(
            lambda b, i, j: b.publish_timestamps(i, j), lambda m: m.publish_timestamp()
        )

    def event_timestamps(self) -> list[int]:
        return self._column(lambda b, i, j: b.event_timestamps(i, j), lambda m: m.event_timestamp())

    def _column(
        self,
        of_block: Callable[[MessageBlock, int, int], list[T]],
        of_message: Callable[[Message], T],
    ) -> list[T]:
        """A column: a block's own (no Message made), else each message's accessor.
        Both call the object's own method (``MessageBlock.values`` is abstract, and a Message
        subclass may override an accessor)."""
        column: list[T] = []
        for messages, start, end in self._slices:
            if isinstance(messages, MessageBlock):
                column += of_block(messages, start, end)
            else:
                column += map(of_message, messages[start:end])
        return column

    def message_ids(self) -> list[MessageId]:
        column: list[MessageId] = []
        for messages, start, end in self._slices:
            column += message_ids(messages, start, end)
        return column

    def topic_names(self) -> list[str]:
        column: list[str] = []
        for messages, start, end in self._slices:
            column += [topic_name(messages)] * (end - start)
        return column
