"""``GroupClock``: the CPU a process group spends, as the benchmark runner shows an embedded
broker's; a child of a session of its own burns a known amount of CPU while it runs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from msgclient.perf.stopwatch import GroupClock

BURN_SECONDS = 0.2
TICK = 0.05  # /proc counts CPU in clock ticks (10 ms): a margin for the rounding
BURNER = f"""
import sys, time
sys.stdin.readline()  # the test's go, once its clock runs
start = time.process_time()
while time.process_time() - start < {BURN_SECONDS}:
    pass
print("burnt", flush=True)
sys.stdin.read()  # alive, idle, until the test closes its stdin
"""

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="GroupClock reads /proc")


def test_the_group_clock_counts_the_cpu_of_its_group_only() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,  # a group of its own, as an embedded broker
    )
    try:
        clock = GroupClock(child.pid)
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        assert child.stdout.readline() == b"burnt\n"  # the pipe's read waits for the burn
        ours = time.process_time()
        while time.process_time() - ours < BURN_SECONDS:  # this process's CPU: not counted
            pass
        measured = clock.stop()
    finally:
        child.communicate(timeout=10)
    assert measured is not None
    cpu, wall = measured
    # Above the burn's end: the test's own burn (as long again) is not in it.
    assert BURN_SECONDS - TICK <= cpu < BURN_SECONDS + 3 * TICK
    assert wall >= cpu - TICK  # one thread spends no more CPU than wall time


def test_a_group_that_is_gone_has_spent_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    child.wait(timeout=10)
    measured = GroupClock(child.pid).stop()
    assert measured is not None
    assert measured[0] == 0.0
