"""Ack timeout: redeliver the messages the application received but did not acknowledge.

A consumer that crashed mid-message is noticed by the broker (its connection drops); one
that is stuck or forgot to ack is not. With an ack timeout the client itself asks for the
redelivery of what it was given ``ack_timeout`` ago and still holds unacknowledged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from msgclient.core.timing_wheel import Scheduler, Timeout, TimingWheel, wheel_size_for
from msgclient.errors import InvalidConfigurationError
from msgclient.message import MessageId
from msgclient.redelivery_backoff import RedeliveryBackoff

# ConsumerBuilderImpl.MIN_ACK_TIMEOUT_MILLIS (ackTimeoutMillis defaults to 0: off).
MIN_ACK_TIMEOUT = 1.0
# ConsumerConfigurationData.tickDurationMillis, and ConsumerBuilderImpl.MIN_TICK_TIME_MILLIS.
DEFAULT_TICK_TIME = 1.0
MIN_TICK_TIME = 0.1


class UnAckedMessageTracker:
    """The Java client's UnAckedMessageTracker (and UnAckedMessageRedeliveryTracker).

    ``add`` an id when the application receives its message; ``remove`` it on ack,
    ``remove_until`` on a cumulative ack. An id still here ``ack_timeout`` seconds (at least
    1 s) after its ``add`` is redelivered within ``tick_time`` (default 1 s, at least 0.1 s,
    at most ``ack_timeout``): one ``redeliver`` call per tick for all the ids due in it.
    With a ``backoff`` the wait is ``ack_timeout + backoff.next(redelivery_count)``, as in
    the Java client. Create one only when the ack timeout is on (Java's default is off).
    """

    def __init__(
        self,
        redeliver: Callable[[list[MessageId]], None],
        ack_timeout: float,
        tick_time: float = DEFAULT_TICK_TIME,
        backoff: RedeliveryBackoff | None = None,
        *,
        scheduler: Scheduler | None = None,
    ) -> None:
        if ack_timeout < MIN_ACK_TIMEOUT:
            raise InvalidConfigurationError(
                f"ack_timeout must be >= {MIN_ACK_TIMEOUT} s, got {ack_timeout}"
            )
        if tick_time < MIN_TICK_TIME:
            raise InvalidConfigurationError(
                f"ack_timeout_tick_time must be >= {MIN_TICK_TIME} s, got {tick_time}"
            )
        self._redeliver = redeliver
        self._ack_timeout = ack_timeout
        self._backoff = backoff
        self._tracked: dict[MessageId, Timeout] = {}
        self._due: list[MessageId] = []
        tick = min(tick_time, ack_timeout)  # as ConsumerImpl does
        self._wheel = TimingWheel(
            tick,
            wheel_size_for(ack_timeout, tick),
            scheduler=scheduler,
            after_expiry=self._redeliver_due,
        )

    def __len__(self) -> int:
        return len(self._tracked)

    def __contains__(self, message_id: MessageId) -> bool:
        return message_id in self._tracked

    def add(self, message_id: MessageId, redelivery_count: int = 0) -> bool:
        """Start the timeout of ``message_id``; False if it is tracked already (kept as is)."""
        if message_id in self._tracked:
            return False
        delay = self._ack_timeout
        if self._backoff is not None:
            delay += self._backoff.next(redelivery_count)
        expire = functools.partial(self._expire, message_id)
        self._tracked[message_id] = self._wheel.add(delay, expire)
        return True

    def remove(self, message_id: MessageId) -> bool:
        """Stop tracking an acked id; False if it was not tracked."""
        timeout = self._tracked.pop(message_id, None)
        if timeout is None:
            return False
        timeout.cancel()
        return True

    def remove_until(self, message_id: MessageId) -> int:
        """Stop tracking every id <= ``message_id`` (a cumulative ack); how many there were."""
        # A scan, as in the Java client: cumulative acks are rare next to individual ones,
        # and an ordered index would cost every add and remove.
        acked = [tracked for tracked in self._tracked if tracked <= message_id]
        for tracked in acked:
            self._tracked.pop(tracked).cancel()
        return len(acked)

    def clear(self) -> None:
        """Forget every id: after a reconnect the broker redelivers them all anyway."""
        self._tracked.clear()
        self._wheel.clear()

    def close(self) -> None:
        """Stop the timeouts; the consumer is going away."""
        self.clear()

    def _expire(self, message_id: MessageId) -> None:
        del self._tracked[message_id]
        self._due.append(message_id)

    def _redeliver_due(self) -> None:
        due, self._due = self._due, []
        self._redeliver(sorted(due))
