"""Exactly once through crashes: a consume-transform-produce process (txn_pipeline.py)
killed with SIGKILL in the middle of its transactions, several times, and restarted: the
output, read read_committed, holds each input exactly once.

Each restart registers the same transactional id (a new epoch of the same producer id);
the killed incarnation's open transaction has no end on tansu, which writes no abort marker
for it (../shared/brokers.md): msgclient's reader takes it as aborted because a newer epoch
of its producer id wrote after it (records/reader.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import msgclient
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic
from tests.kafka.test_transactions import read_all, within

INPUTS = 300
KILLS = 3
ROOT = Path(__file__).resolve().parents[2]


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.kafka.txn_pipeline",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def commits(process: asyncio.subprocess.Process, count: int) -> list[str]:
    """The process's lines until it reported ``count`` more commits (or finished)."""
    assert process.stdout is not None
    lines: list[str] = []
    while sum(line.startswith("committed") for line in lines) < count:
        line = (await process.stdout.readline()).decode().strip()
        if not line:
            raise AssertionError(f"the pipeline ended early: {lines}")
        lines.append(line)
        if line == "done":
            break
    return lines


async def test_sigkill_mid_transaction_keeps_every_input_exactly_once(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    await create_topic(kafka_broker.bootstrap_servers, source, 2)
    await create_topic(kafka_broker.bootstrap_servers, sink, 2)
    url = kafka_broker.service_url
    async with msgclient.Client(url) as client:
        feeder = await client.create_producer(source)
        for i in range(INPUTS):
            await feeder.send_async(b"%d" % i)
        await feeder.flush()
    args = (url, source, sink, f"g-{topic}", f"tx-{topic}", "7")
    for _ in range(KILLS):
        process = await start(*args)
        try:
            # Killed after a few commits, while it sends the next transaction's outputs.
            lines = await within(commits(process, 3), 60)
            assert "done" not in lines, "the pipeline finished before it could be killed"
        finally:
            process.send_signal(signal.SIGKILL)
            await process.wait()
    process = await start(*args)
    lines = await within(commits(process, INPUTS), 120)
    assert lines[-1] == "done"
    assert await within(process.wait(), 30) == 0
    outputs = await within(read_all(url, sink, INPUTS), 60)
    assert sorted(outputs) == sorted(b"%d-out" % i for i in range(INPUTS))
