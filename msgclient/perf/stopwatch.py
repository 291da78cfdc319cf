"""The clock of a throughput run: wall time and the CPU time the client's process spent.

CPU time is ``time.process_time()``: user and system time of every thread of this process,
so a client that works in threads of its own (librdkafka's) is charged for them too. The
broker runs in a process of its own and is not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """What one run measured: messages a second, and CPU microseconds a message."""

    rate: float
    cpu_us: float


class Stopwatch:
    """Started when made; ``stop(count)`` measures the ``count`` messages since."""

    def __init__(self) -> None:
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def stop(self, count: int) -> Measured:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        return Measured(count / wall, cpu / count * 1e6)
