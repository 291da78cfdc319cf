"""Acknowledgments on the wire: AckBatch -> CommandAck, the per-entry batch acker, and
the negative side, REDELIVER_UNACKNOWLEDGED_MESSAGES.

A batched entry holds several messages but the broker tracks acknowledgments per entry
(unless batch-index acks are on, and even then pulsar-lite ignores the index: brokers.md).
Acking an entry as soon as one of its messages is acked would lose the others on a
redelivery, so ``BatchAckers`` (the Java client's BatchMessageAcker) remembers which
messages of each entry the application has not acked yet, and the entry is acked when
the last one is. Pure code, no sockets: the tests drive it with AckBatch objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

from msgclient.contract import AckBatch
from msgclient.message import MessageId
from protocols.pulsarwire.message_id import UINT64_MASK, ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

INDIVIDUAL = pb.CommandAck.Individual
CUMULATIVE = pb.CommandAck.Cumulative

# ConsumerImpl.MAX_REDELIVER_UNACKNOWLEDGED: ids per REDELIVER_UNACKNOWLEDGED_MESSAGES.
MAX_REDELIVER_IDS = 1000

EntryKey = tuple[int, int]  # (ledger id, entry id)


# An ack set names every index of its entry: one is sent for entries of up to this many
# messages (more than any producer batches), so an id claiming 2**31 costs nothing. A
# bigger entry is acked when it completes, as without batch-index acks.
MAX_ACK_SET_INDEXES = 1 << 16


class _UnseenEntry:
    """The unacked indexes of a batched entry met first at an ack (after a seek, or an id
    from elsewhere): ``range(size)`` less what was acked, stored as what was acked, so that
    its cost follows the acks made, not the batch size the id claims."""

    __slots__ = ("acked", "acked_below", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.acked_below = 0  # a cumulative ack covered every index below this
        self.acked: set[int] = set()  # indexes acked individually, at or above acked_below

    def __len__(self) -> int:
        return max(0, self.size - self.acked_below - len(self.acked))

    def __iter__(self) -> Iterator[int]:
        acked = self.acked
        return (i for i in range(self.acked_below, self.size) if i not in acked)

    def difference_update(self, indexes: list[int]) -> None:
        low, size = self.acked_below, self.size
        self.acked.update(i for i in indexes if low <= i < size)

    def ack_below(self, end: int) -> None:
        self.acked_below = max(self.acked_below, end)
        self.acked = {i for i in self.acked if i >= end}

    def still_unacked(self, indexes: set[int]) -> set[int]:
        return {i for i in indexes if i >= self.acked_below and i not in self.acked}


Unacked = set[int] | _UnseenEntry


class BatchAckers:
    """For each batched entry: the batch indexes the application has not acked yet.

    An entry gets its acker when it is dispatched (``delivered``), or at its first ack if
    it was not seen (acked after a seek, or an id from elsewhere: then all of the entry
    counts as unacked). The acker goes when the whole entry is acked. Entries never acked
    keep theirs until ``clear``, as the broker keeps them unacked.
    """

    __slots__ = ("_unacked",)

    def __init__(self) -> None:
        self._unacked: dict[EntryKey, Unacked] = {}

    def __len__(self) -> int:
        return len(self._unacked)

    def delivered(self, ledger_id: int, entry_id: int, indexes: set[int]) -> None:
        """The broker dispatched these indexes of a batched entry (the ones it holds unacked)."""
        key = (ledger_id, entry_id)
        known = self._unacked.get(key)
        if known is None:
            self._unacked[key] = indexes
        elif isinstance(known, _UnseenEntry):
            self._unacked[key] = known.still_unacked(indexes)
        else:
            # A redelivery: what the application acked meanwhile stays acked, and what the
            # broker no longer sends (acked by batch index) is acked too.
            known &= indexes

    def ack(self, message_id: PulsarMessageId, indexes: list[int]) -> Unacked:
        """Record the acks of ``indexes`` of ``message_id``'s batched entry; the entry's
        indexes still unacked.

        Empty means the entry is complete: ack it, and its acker is forgotten. An unknown
        batch size (0, an id built by hand) completes the entry at once, as in the Java
        client (BatchMessageAckerDisabled).
        """
        key = (message_id.ledger_id, message_id.entry_id)
        unacked = self._unacked.get(key)
        if unacked is None:
            unacked = self._unacked[key] = _UnseenEntry(message_id.batch_size)
        unacked.difference_update(indexes)
        if not unacked:
            del self._unacked[key]
        return unacked

    def ack_cumulative(self, message_id: PulsarMessageId) -> Unacked:
        """Everything up to ``message_id`` is acked; the indexes of its entry still unacked."""
        key = (message_id.ledger_id, message_id.entry_id)
        for earlier in [k for k in self._unacked if k < key]:
            del self._unacked[earlier]
        if message_id.batch_index < 0:
            self._unacked.pop(key, None)
            return set()
        unacked = self._unacked.get(key)
        if unacked is None:
            unacked = self._unacked[key] = _UnseenEntry(message_id.batch_size)
        if isinstance(unacked, _UnseenEntry):
            unacked.ack_below(message_id.batch_index + 1)
        else:
            unacked.difference_update(range(message_id.batch_index + 1))
        if not unacked:
            del self._unacked[key]
        return unacked

    def forget(self, ledger_id: int, entry_id: int) -> None:
        """The whole entry is acked."""
        self._unacked.pop((ledger_id, entry_id), None)

    def clear(self) -> None:
        self._unacked.clear()


def ack_set(indexes: Iterable[int]) -> list[int]:
    """A java.util.BitSet as CommandAck carries it: 64-bit words, low bit first, signed."""
    words: list[int] = []
    for index in indexes:
        word, bit = divmod(index, 64)
        if word >= len(words):
            words.extend([0] * (word + 1 - len(words)))
        words[word] |= 1 << bit
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]


def _entry(message_id: PulsarMessageId, unacked: Iterable[int] = ()) -> pb.MessageIdData:
    # Ledger and entry only, as the Java client's newMultiMessageAck: the broker acks
    # entries, and reads the batch indexes from the ack set.
    data = pb.MessageIdData(
        ledgerId=message_id.ledger_id & UINT64_MASK, entryId=message_id.entry_id & UINT64_MASK
    )
    data.ack_set.extend(ack_set(unacked))
    return data


def ack_commands(
    consumer_id: int, batch: AckBatch, ackers: BatchAckers, batch_index_ack: bool
) -> list[pb.CommandAck]:
    """The ACK commands for one flush (cumulative first, as the Java client flushes).

    Individual acks go in one command, one MessageIdData per entry. A batched message
    whose entry still has unacked messages sends nothing, or with ``batch_index_ack`` its
    entry with the ack set of the indexes still unacked.
    """
    entries: dict[EntryKey, pb.MessageIdData] = {}

    def ack_run(last: PulsarMessageId, indexes: list[int]) -> None:
        unacked = ackers.ack(last, indexes)
        if not unacked:
            entries[last.ledger_id, last.entry_id] = _entry(last)
        elif batch_index_ack and last.batch_size <= MAX_ACK_SET_INDEXES:
            # A later run of the same entry replaces it, with fewer bits.
            entries[last.ledger_id, last.entry_id] = _entry(last, unacked)

    # Acks come in runs of one entry (messages are taken in order): the acker is updated
    # once per run, not once per message. One cast for the batch (typing.cast is a call).
    run: list[int] = []
    last: PulsarMessageId | None = None
    for message_id in cast(tuple[PulsarMessageId, ...], batch.individual):
        index = message_id.batch_index
        if last is not None and (
            index < 0
            or message_id.entry_id != last.entry_id
            or message_id.ledger_id != last.ledger_id
        ):
            ack_run(last, run)
            run, last = [], None
        if index < 0:  # a whole entry (unbatched, or all of a batch at once)
            ackers.forget(message_id.ledger_id, message_id.entry_id)
            entries[message_id.ledger_id, message_id.entry_id] = _entry(message_id)
            if type(message_id) is ChunkMessageId:  # and the entries of its other chunks
                for chunk in message_id.chunk_ids:
                    entries[chunk.ledger_id, chunk.entry_id] = _entry(chunk)
        else:
            run.append(index)
            last = message_id
    if last is not None:
        ack_run(last, run)
    commands = []
    # After the individual acks: it forgets the ackers of the entries it covers.
    if batch.cumulative is not None:
        position = _cumulative_position(
            cast(PulsarMessageId, batch.cumulative), ackers, batch_index_ack
        )
        if position is not None:
            commands.append(
                pb.CommandAck(consumer_id=consumer_id, ack_type=CUMULATIVE, message_id=[position])
            )
    if entries:
        commands.append(
            pb.CommandAck(
                consumer_id=consumer_id, ack_type=INDIVIDUAL, message_id=list(entries.values())
            )
        )
    return commands


def _cumulative_position(
    message_id: PulsarMessageId, ackers: BatchAckers, batch_index_ack: bool
) -> pb.MessageIdData | None:
    """Where a cumulative ack of ``message_id`` may move the subscription, if anywhere."""
    unacked = ackers.ack_cumulative(message_id)
    if not unacked:
        return _entry(message_id)
    if batch_index_ack and message_id.batch_size <= MAX_ACK_SET_INDEXES:
        # As the Java client: the indexes after this one are still to come.
        return _entry(message_id, range(message_id.batch_index + 1, message_id.batch_size))
    # Part of the entry is unacked: acking it would ack all of it. Everything before the
    # entry is acked, though (the Java client's prevBatchMessageId). The first entry of a
    # ledger has no previous entry to name: the Java client sends entry -1, which travels
    # as 2**64 - 1 and a broker reading it as unsigned would take for the whole ledger;
    # nothing is sent, and a later cumulative ack covers it.
    if message_id.entry_id <= 0:
        return None
    previous = PulsarMessageId(message_id.ledger_id, message_id.entry_id - 1, message_id.partition)
    return _entry(previous)


def redeliver_commands(
    consumer_id: int, message_ids: list[MessageId] | None
) -> list[pb.CommandRedeliverUnacknowledgedMessages]:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES for ``message_ids``: entries (the broker redelivers
    whole entries), each once, at most MAX_REDELIVER_IDS per command; None: everything."""
    if message_ids is None:
        return [pb.CommandRedeliverUnacknowledgedMessages(consumer_id=consumer_id)]
    entries = list(
        dict.fromkeys(
            (i.ledger_id, i.entry_id, i.partition)
            for m in cast(list[PulsarMessageId], message_ids)
            for i in (m.chunk_ids if type(m) is ChunkMessageId else (m,))
        )
    )
    commands = []
    for start in range(0, len(entries), MAX_REDELIVER_IDS):
        command = pb.CommandRedeliverUnacknowledgedMessages(consumer_id=consumer_id)
        for ledger_id, entry_id, partition in entries[start : start + MAX_REDELIVER_IDS]:
            data = command.message_ids.add(
                ledgerId=ledger_id & UINT64_MASK, entryId=entry_id & UINT64_MASK
            )
            if partition >= 0:
                data.partition = partition
        commands.append(command)
    return commands
