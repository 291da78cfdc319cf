"""How long to wait before redelivering a message, by how often it was redelivered already.

Shared by negative acks and the ack timeout: a message that keeps failing comes back less
and less often, so a poison message does not crowd out the rest of the subscription.
"""

from __future__ import annotations

import math
from typing import Protocol

from msgclient.errors import InvalidConfigurationError

# MultiplierRedeliveryBackoff.MultiplierRedeliveryBackoffBuilder's defaults in the Java
# client (minDelayMs = 10 s, maxDelayMs = 10 min, multiplier = 2.0).
DEFAULT_MIN_DELAY = 10.0
DEFAULT_MAX_DELAY = 600.0
DEFAULT_MULTIPLIER = 2.0


class RedeliveryBackoff(Protocol):
    """The Java client's RedeliveryBackoff: ``next`` gives the delay in seconds."""

    def next(self, redelivery_count: int) -> float: ...


class MultiplierRedeliveryBackoff:
    """``min_delay * multiplier ** redelivery_count``, capped at ``max_delay``.

    The Java client's MultiplierRedeliveryBackoff; defaults min 10 s, max 600 s, multiplier
    2. A message not redelivered yet (count 0, or a negative count) waits ``min_delay``.
    """

    __slots__ = ("_max_exponent", "max_delay", "min_delay", "multiplier")

    def __init__(
        self,
        min_delay: float = DEFAULT_MIN_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        multiplier: float = DEFAULT_MULTIPLIER,
    ) -> None:
        if min_delay < 0:
            raise InvalidConfigurationError(f"min_delay must be >= 0, got {min_delay}")
        if max_delay < min_delay:
            raise InvalidConfigurationError(
                f"max_delay must be >= min_delay ({min_delay}), got {max_delay}"
            )
        if multiplier <= 1:
            raise InvalidConfigurationError(f"multiplier must be > 1, got {multiplier}")
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.multiplier = multiplier
        # Past this exponent the product exceeds max_delay anyway; stopping here also keeps
        # multiplier ** count from overflowing a float for a message redelivered very often.
        self._max_exponent = (
            math.floor(math.log(max_delay / min_delay, multiplier)) + 1 if min_delay > 0 else 0
        )

    def next(self, redelivery_count: int) -> float:
        if redelivery_count <= 0 or self.min_delay == 0:
            return self.min_delay
        if redelivery_count > self._max_exponent:
            return self.max_delay
        return min(self.min_delay * self.multiplier**redelivery_count, self.max_delay)
