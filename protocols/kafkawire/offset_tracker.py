"""OffsetTracker: individual acks on a log that only remembers one position per partition.

Kafka stores a consumer group's position as one offset per partition: everything before it
counts as consumed. Pulsar semantics allow acking messages one by one, out of order. The
tracker keeps the offsets delivered and not yet acknowledged, in delivery order (which is
offset order: a partition delivers increasing offsets, and redeliveries are of offsets
still outstanding), and the position to commit is the first of them: an out-of-order ack
never commits past an unacknowledged message.
"""

from __future__ import annotations

from collections import deque
from itertools import islice


class OffsetTracker:
    """Per partition. ``commit_position`` is the next offset a restarted consumer reads."""

    __slots__ = ("_acked", "_next", "_outstanding")

    def __init__(self, position: int) -> None:
        self._outstanding: deque[int] = deque()  # delivered, increasing
        self._acked: set[int] = set()  # acknowledged, still behind an unacked one
        self._next = position  # one past the last offset delivered (or the start)

    def delivered(self, offset: int) -> None:
        """``offset`` went to the application (offsets before it that never did, such as
        gaps or control records, are consumed with it)."""
        if offset >= self._next:
            self._outstanding.append(offset)
            self._next = offset + 1

    def delivered_run(self, first: int, count: int) -> None:
        """Offsets ``first`` to ``first + count - 1`` went to the application."""
        start, end = max(first, self._next), first + count
        if start < end:
            self._outstanding.extend(range(start, end))
            self._next = end

    def skip_to(self, position: int) -> None:
        """Nothing below ``position`` will be delivered (gaps, control records at the end
        of a fetch): a commit may pass them once everything delivered is acked."""
        self._next = max(self._next, position)

    def ack(self, offset: int) -> None:
        outstanding = self._outstanding
        if outstanding and outstanding[0] == offset:
            outstanding.popleft()
            self._pass_acked()
        elif outstanding and outstanding[0] < offset < self._next:
            self._acked.add(offset)

    def ack_all(self, offsets: list[int]) -> None:
        """``ack`` of each offset. When they are the first outstanding offsets, in order (a
        consumer acknowledging what it received, as it received it), one comparison finds
        that and they are dropped without an ``ack`` call each."""
        outstanding = self._outstanding
        count = len(offsets)
        if not count:
            return
        if count > len(outstanding) or list(islice(outstanding, count)) != offsets:
            for offset in offsets:
                self.ack(offset)
            return
        for _ in range(count):
            outstanding.popleft()
        if self._acked:
            self._acked.difference_update(offsets)  # acked before, out of order, and again
            self._pass_acked()

    def _pass_acked(self) -> None:
        """Drop the offsets acknowledged out of order that now lead the outstanding ones."""
        outstanding, acked = self._outstanding, self._acked
        while acked and outstanding and outstanding[0] in acked:
            acked.discard(outstanding.popleft())

    def ack_cumulative(self, offset: int) -> None:
        """Every offset up to and including ``offset`` is acknowledged."""
        outstanding = self._outstanding
        acked = self._acked
        while outstanding and (outstanding[0] <= offset or outstanding[0] in acked):
            acked.discard(outstanding.popleft())

    def position_with(self, offsets: list[int]) -> int:
        """The commit position if ``offsets`` were acknowledged too (a transaction's acks,
        before it commits); nothing changes."""
        extra = set(offsets)
        acked = self._acked
        for offset in self._outstanding:
            if offset not in acked and offset not in extra:
                return offset
        return self._next

    @property
    def commit_position(self) -> int:
        return self._outstanding[0] if self._outstanding else self._next

    @property
    def unacked(self) -> int:
        return len(self._outstanding) - len(self._acked)
