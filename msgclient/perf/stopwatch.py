"""The clock of a throughput run: wall time and the CPU time the client's process spent.

CPU time is ``time.process_time()``: user and system time of every thread of this process,
so a client that works in threads of its own (librdkafka's) is charged for them too. The
broker runs in a process of its own and is not counted. ``MachineClock`` counts every
process's CPU time instead (Linux ``/proc/stat``): a Spark job's JVM, its Python workers
and the broker together. ``GroupClock`` counts one process group's (an embedded broker's):
how busy the broker was while a client sent.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


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


class MachineClock:
    """Started when made; ``stop(count)`` gives the CPU microseconds every process of the
    machine spent a message since (user, nice, system, irq and softirq time of all cores),
    or None where ``/proc/stat`` is not there."""

    _STAT = Path("/proc/stat")

    def __init__(self) -> None:
        self._busy = self._busy_seconds()

    def stop(self, count: int) -> float | None:
        busy = self._busy_seconds()
        if busy is None or self._busy is None:
            return None
        return (busy - self._busy) / count * 1e6

    @classmethod
    def _busy_seconds(cls) -> float | None:
        try:
            fields = cls._STAT.read_text().split("\n", 1)[0].split()
        except OSError:
            return None
        user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class GroupClock:
    """Started when made; ``stop()`` gives the CPU seconds (user and system) the live
    processes of process group ``group`` spent since, and the wall seconds, or None where
    ``/proc`` is not there. An embedded broker is a group of its own (its process and
    whatever it starts)."""

    _PROC = Path("/proc")

    def __init__(self, group: int) -> None:
        self._group = group
        self._wall = time.perf_counter()
        self._cpu = self._cpu_seconds()

    def stop(self) -> tuple[float, float] | None:
        cpu = self._cpu_seconds()
        if cpu is None or self._cpu is None:
            return None
        return cpu - self._cpu, time.perf_counter() - self._wall

    def _cpu_seconds(self) -> float | None:
        if not self._PROC.is_dir():
            return None
        ticks = 0
        for stat in self._PROC.glob("[0-9]*/stat"):
            try:
                # After the command's closing parenthesis: state, ppid, pgrp, ... utime and
                # stime are the 12th and 13th (proc(5): fields 14 and 15).
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # exited meanwhile
            if int(fields[2]) == self._group:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")
