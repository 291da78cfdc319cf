"""Negative acks: redeliver a message the application failed to process, after a delay.

The delay gives whatever made processing fail (a database down, a remote service
overloaded) time to recover before the message comes back. The ids whose delay ends in the
same tick go back to the broker in one ``redeliver`` call: one command, not one per message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from msgclient.core.timing_wheel import Scheduler, Timeout, TimingWheel, wheel_size_for
from msgclient.errors import InvalidConfigurationError
from msgclient.message import MessageId
from msgclient.redelivery_backoff import RedeliveryBackoff

# ConsumerConfigurationData.negativeAckRedeliveryDelayMicros: 1 minute.
DEFAULT_NEGATIVE_ACK_REDELIVERY_DELAY = 60.0
# NegativeAcksTracker.MIN_NACK_DELAY_MS: shorter delays are raised to this, so that nacks
# made one right after the other still go out in one command. (The builder itself only
# rejects negative delays.) It is also the wheel's tick: the grouping window.
MIN_NACK_DELAY = 0.1


class NegativeAcksTracker:
    """The Java client's NegativeAcksTracker.

    ``add`` schedules a redelivery after ``redelivery_delay`` (default 60 s, at least
    0.1 s), or after ``backoff.next(redelivery_count)`` when a backoff is given. Nacking an
    id again replaces its earlier schedule (the Java tracker keeps one deadline per id).
    Ids should be entry-level: the broker redelivers whole entries, batches included.
    """

    def __init__(
        self,
        redeliver: Callable[[list[MessageId]], None],
        redelivery_delay: float = DEFAULT_NEGATIVE_ACK_REDELIVERY_DELAY,
        backoff: RedeliveryBackoff | None = None,
        *,
        scheduler: Scheduler | None = None,
    ) -> None:
        if redelivery_delay < 0:
            raise InvalidConfigurationError(
                f"negative_ack_redelivery_delay must be >= 0, got {redelivery_delay}"
            )
        self._redeliver = redeliver
        self._delay = max(redelivery_delay, MIN_NACK_DELAY)
        self._backoff = backoff
        self._scheduled: dict[MessageId, Timeout] = {}
        self._due: list[MessageId] = []
        # Sized for the fixed delay; backoff delays past a revolution take extra rounds.
        self._wheel = TimingWheel(
            MIN_NACK_DELAY,
            wheel_size_for(self._delay, MIN_NACK_DELAY),
            scheduler=scheduler,
            after_expiry=self._redeliver_due,
        )

    def __len__(self) -> int:
        return len(self._scheduled)

    def add(self, message_id: MessageId, redelivery_count: int = 0) -> None:
        """Redeliver ``message_id`` after the delay; ``redelivery_count`` feeds the backoff."""
        if self._backoff is None:
            delay = self._delay
        else:
            delay = max(self._backoff.next(redelivery_count), MIN_NACK_DELAY)
        previous = self._scheduled.pop(message_id, None)
        if previous is not None:
            previous.cancel()
        expire = functools.partial(self._expire, message_id)
        self._scheduled[message_id] = self._wheel.add(delay, expire)

    def close(self) -> None:
        """Forget every pending redelivery (the broker redelivers them to the next consumer)."""
        self._scheduled.clear()
        self._wheel.clear()

    def _expire(self, message_id: MessageId) -> None:
        del self._scheduled[message_id]
        self._due.append(message_id)

    def _redeliver_due(self) -> None:
        due, self._due = self._due, []
        self._redeliver(sorted(due))
