"""Reassembling chunked messages on the consumer side (sans-IO).

A message sent in chunks arrives as entries of its own, each with the message's uuid, its
chunk id, the chunk count and the whole size. Chunks of several messages may interleave
(several producers) and a message may never complete (its producer died). As the Java
client's ConsumerImpl: at most ``max_pending`` incomplete messages are kept (the oldest
goes beyond it), and one whose first chunk is older than ``expire_ms`` goes. What goes is
handed to ``discard`` with the ids of the chunks received, which the consumer acks or
leaves for redelivery. Each chunk may carry a note of the caller's (the consumer's: how a
chunk it could not decrypt was encrypted), handed back with the whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from msgclient.errors import MalformedFrameError
from protocols.pulsarwire.message_id import PulsarMessageId

N = TypeVar("N")

Discard = Callable[[list[PulsarMessageId], bool], None]
"""``discard(chunk_ids, expired)``: an incomplete message dropped, by expiry or bound."""


class Assembled(NamedTuple, Generic[N]):
    """A chunked message complete: its payload, its chunk ids and the chunks' notes."""

    payload: bytes
    ids: list[PulsarMessageId]
    notes: list[N | None]


@dataclass(slots=True)
class _Pending(Generic[N]):
    count: int
    total_size: int
    started_at: float
    parts: list[bytes] = field(default_factory=list)
    ids: list[PulsarMessageId] = field(default_factory=list)
    notes: list[N | None] = field(default_factory=list)
    size: int = 0


class ChunkAssembler(Generic[N]):
    """The incomplete chunked messages of one consumer, by uuid, oldest first."""

    def __init__(self, max_pending: int, expire_ms: int, discard: Discard) -> None:
        self._max_pending = max_pending  # 0: no bound
        self._expire_s = expire_ms / 1000  # 0: never
        self._discard = discard
        self._pending: dict[str, _Pending[N]] = {}  # insertion order: oldest first

    def __len__(self) -> int:
        return len(self._pending)

    def add(
        self,
        uuid: str,
        chunk_id: int,
        count: int,
        total_size: int,
        payload: bytes,
        message_id: PulsarMessageId,
        now: float,
        note: N | None = None,
        size: int | None = None,
    ) -> Assembled[N] | None:
        """One chunk; the whole payload, all chunk ids and notes once it completes the
        message. Memory follows the bytes received, never a size the metadata declares.
        ``size``: the chunk's share of ``total_size`` when it is not ``len(payload)`` (a
        chunk kept encrypted, whose tag the total does not count).

        A chunk out of order (not the next one of its message) is dropped: a duplicate
        (a redelivery) is ignored, anything else discards the message so far, since its
        missing chunk will not come before this one (the broker keeps order)."""
        if not 0 <= chunk_id < count:
            raise MalformedFrameError(f"chunk {chunk_id} of {count} of message {uuid!r}")
        pending = self._pending.get(uuid)
        if pending is None:
            if chunk_id != 0:  # its start was dropped already: nothing to join it to
                self._discard([message_id], False)
                return None
            pending = _Pending(count, total_size, now)
            self._make_room()
            self._pending[uuid] = pending
        elif chunk_id != len(pending.ids):
            if chunk_id < len(pending.ids):
                return None  # a duplicate of a chunk we have
            del self._pending[uuid]
            self._discard([*pending.ids, message_id], False)
            return None
        pending.size += len(payload) if size is None else size
        if pending.size > pending.total_size or count != pending.count:
            del self._pending[uuid]
            raise MalformedFrameError(
                f"chunks of message {uuid!r} disagree: {pending.size} bytes of "
                f"{pending.total_size}, {count} chunks of {pending.count}"
            )
        pending.parts.append(payload)
        pending.ids.append(message_id)
        pending.notes.append(note)
        if len(pending.ids) < pending.count:
            return None
        del self._pending[uuid]
        return Assembled(b"".join(pending.parts), pending.ids, pending.notes)

    def expire(self, now: float) -> None:
        """Discard the incomplete messages started more than ``expire_ms`` ago."""
        if not self._expire_s:
            return
        while self._pending:
            uuid, oldest = next(iter(self._pending.items()))
            if now - oldest.started_at < self._expire_s:
                return
            del self._pending[uuid]
            self._discard(oldest.ids, True)

    def clear(self) -> None:
        """Forget everything (a reconnect: the broker sends the unacked chunks again)."""
        self._pending.clear()

    def _make_room(self) -> None:
        if self._max_pending and len(self._pending) >= self._max_pending:
            uuid = next(iter(self._pending))
            self._discard(self._pending.pop(uuid).ids, False)
