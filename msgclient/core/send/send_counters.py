"""The counters of one partition producer, added to once per confirmed batch.

``stats()`` snapshots read them (msgclient/stats.py); nothing here runs per message.
"""

from __future__ import annotations

from collections.abc import Callable


class SendCounters:
    """Confirmed messages, bytes and batches, the batches' send latency (sum and max),
    reconnects. ``on_batch_sent(latency, messages)``, when set (metrics on), is told of
    each confirmed batch."""

    __slots__ = (
        "batches_sent",
        "bytes_sent",
        "messages_sent",
        "on_batch_sent",
        "reconnects",
        "send_latency_max",
        "send_latency_sum",
    )

    def __init__(self) -> None:
        self.messages_sent = 0
        self.bytes_sent = 0
        self.batches_sent = 0
        self.send_latency_sum = 0.0
        self.send_latency_max = 0.0
        self.reconnects = 0
        self.on_batch_sent: Callable[[float, int], None] | None = None

    def confirmed(self, messages: int, payload_bytes: int, latency: float) -> None:
        """A batch of ``messages`` was confirmed ``latency`` seconds after it closed."""
        self.messages_sent += messages
        self.bytes_sent += payload_bytes
        self.batches_sent += 1
        self.send_latency_sum += latency
        if latency > self.send_latency_max:
            self.send_latency_max = latency
        if self.on_batch_sent is not None:
            self.on_batch_sent(latency, messages)
