"""Which messages ``consume`` prints: from a time on, and up to the end (``--end``).

The end is each partition's last message when consuming starts (the admin API's
``last_message_ids``); a partition is done once its last message was printed. A Pulsar
last message id of a batched entry names the whole entry (batch index -1, pulsar-lite;
brokers.md): its end is the entry's last message.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgclient.cli.positions import AtTime, Offset, Start
from msgclient.message import Message, MessageId
from msgclient.options import InitialPosition
from protocols.kafkawire.message_id import KafkaMessageId
from protocols.pulsarwire.message_id import PulsarMessageId


def _order(message_id: MessageId, last: MessageId) -> int:
    """-1 before ``last``, 0 at it (the partition's last message), 1 after it."""
    if isinstance(message_id, KafkaMessageId) and isinstance(last, KafkaMessageId):
        return (message_id.offset > last.offset) - (message_id.offset < last.offset)
    assert isinstance(message_id, PulsarMessageId) and isinstance(last, PulsarMessageId)
    # The partition field differs with the name a partition was read by: not compared.
    entry = (message_id.ledger_id, message_id.entry_id)
    last_entry = (last.ledger_id, last.entry_id)
    if entry != last_entry:
        return -1 if entry < last_entry else 1
    if last.batch_index >= 0:
        index = message_id.batch_index
        return (index > last.batch_index) - (index < last.batch_index)
    # The whole entry: its last message ends it.
    last_in_entry = message_id.batch_index < 0 or (
        message_id.batch_index >= message_id.batch_size - 1
    )
    return 0 if last_in_entry else -1


class Ends:
    """Tracks which partitions reached their end; messages past it are not printed.

    Where the start may lie past a partition's end (a time; a group that acknowledged
    it), its last message never comes: ``on_idle`` says so, and the reading then ends
    once nothing came for a while (``give_up``).
    """

    def __init__(self, last: Mapping[str, MessageId | None], start: Start, group: bool) -> None:
        self._open = {
            name: message_id
            for name, message_id in last.items()
            if message_id is not None and not _ends_before(message_id, start)
        }
        self.on_idle = group or isinstance(start, AtTime)

    def give_up(self) -> None:
        """Nothing more comes before the end: every partition is done."""
        self._open.clear()

    @property
    def done(self) -> bool:
        return not self._open

    def admit(self, message: Message) -> bool:
        """Whether ``message`` comes at or before its partition's end."""
        name = message.topic_name()
        last = self._open.get(name)
        if last is None:
            return False  # this partition is done
        order = _order(message.message_id(), last)
        if order >= 0:
            del self._open[name]
        return order <= 0


def _ends_before(last: MessageId, start: Start) -> bool:
    """Whether a partition ending at ``last`` has nothing at or after ``start``."""
    if start is InitialPosition.Latest:
        return True
    if isinstance(start, Offset) and isinstance(last, KafkaMessageId):
        return last.offset < start.offset
    if isinstance(start, PulsarMessageId) and isinstance(last, PulsarMessageId):
        return (last.ledger_id, last.entry_id) < (start.ledger_id, start.entry_id)
    return False


class SinceTime:
    """``--from TIME``: what a partition gives before its first message at or after the
    time was fetched before the seek; it is skipped."""

    def __init__(self, ms: int) -> None:
        self._ms = ms
        self._reached: set[str] = set()

    def admit(self, message: Message) -> bool:
        name = message.topic_name()
        if name in self._reached:
            return True
        if message.publish_timestamp() < self._ms:
            return False
        self._reached.add(name)
        return True
