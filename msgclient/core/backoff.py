"""Exponential backoff with jitter for reconnects (the Java client's Backoff)."""

from __future__ import annotations

import random

DEFAULT_INITIAL_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 60.0


class Backoff:
    """Delays that double from ``initial`` up to ``maximum``, each shortened by up to 10%.

    The jitter keeps many clients that lost the same broker from reconnecting in lockstep.
    """

    def __init__(
        self,
        initial: float = DEFAULT_INITIAL_BACKOFF,
        maximum: float = DEFAULT_MAX_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 < initial <= maximum, got {initial}, {maximum}")
        self._initial = initial
        self._maximum = maximum
        self._next = initial
        self._random = rng or random.Random()

    def next(self) -> float:
        """The delay before the next attempt; each call doubles the following one."""
        delay = self._next
        self._next = min(self._next * 2, self._maximum)
        return delay - delay * 0.1 * self._random.random()

    def reset(self) -> None:
        """Start over from ``initial`` (after a successful attempt)."""
        self._next = self._initial
