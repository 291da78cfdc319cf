"""SentMessages: the ids of a ``send_many`` call's messages, made when they are read."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from msgclient.message import MessageId

# One batch of the call: where its messages stand in the call's input, and the function
# that makes their ids (what the broker's receipt gave).
SentBatch = tuple[Sequence[int] | range, Callable[[], list[MessageId]]]


class SentMessages(Sequence[MessageId]):
    """The messages' ids in the order of the values given to ``send_many``. No id is made
    until one is read: a call that does not look at them pays for none."""

    __slots__ = ("_batches", "_count", "_ids")

    def __init__(self, count: int, batches: list[SentBatch]) -> None:
        self._count = count
        self._batches = batches
        self._ids: list[MessageId] | None = None

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> MessageId: ...

    @overload
    def __getitem__(self, index: slice) -> list[MessageId]: ...

    def __getitem__(self, index: int | slice) -> MessageId | list[MessageId]:
        return self._all()[index]

    def __iter__(self) -> Iterator[MessageId]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"<SentMessages of {self._count} messages>"

    def _all(self) -> list[MessageId]:
        if self._ids is not None:
            return self._ids
        ids: list[MessageId]
        if all(isinstance(positions, range) for positions, _ in self._batches):
            # Unkeyed: the batches hold consecutive runs of the input, in order.
            ids = []
            for _, make in self._batches:
                ids += make()
        else:
            made: list[MessageId | None] = [None] * self._count
            for positions, make in self._batches:
                for position, message_id in zip(positions, make(), strict=True):
                    made[position] = message_id
            ids = made  # type: ignore[assignment]
        self._ids = ids
        return ids
