"""``python -m msgclient.perf.instructions``: instructions per message, counted by callgrind.

Wall-clock rates on a shared 2-core machine move by 30% from run to run; the instructions
the client executes per message do not (0.1%). Each workload runs in a child process under
``valgrind --tool=callgrind`` twice, at ``--small`` and ``--large`` messages, on a running
broker (embedded ones by default); the difference divided by the difference in messages is
the cost of one message, start-up and connection set-up cancelled out:

- ``send``: ``send_async`` of 100-byte values to a fresh topic with default settings, then
  ``flush``;
- ``receive``: ``receive`` + ``acknowledge`` from a backlog of 1000-message batches written
  beforehand (outside callgrind), on a new subscription from the earliest message.

Needs valgrind (``apt-get install valgrind``). Compare two versions of the code by running
each checkout's copy of this module (``PYTHONPATH=<checkout>``) against the same brokers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid
from contextlib import ExitStack
from typing import Any

import msgclient
from msgclient.embedded import KafkaBroker, PulsarBroker

PAYLOAD = b"x" * 100


async def _workload(mode: str, url: str, topic: str, count: int) -> None:
    """One process's work, timed by nothing: callgrind counts it."""
    async with msgclient.Client(url) as client:
        if mode in ("send", "fill"):
            producer = (
                await client.create_producer(
                    topic, batching_max_messages=1000, batching_max_publish_delay_ms=10
                )
                if mode == "fill"
                else await client.create_producer(topic)
            )
            for _ in range(count):
                await producer.send_async(PAYLOAD)
            await producer.flush()
            return
        options: dict[str, Any] = {"initial_position": msgclient.InitialPosition.Earliest}
        if url.startswith("pulsar"):
            # Shared: pulsar-lite dispatches duplicates on Exclusive (shared/brokers.md)
            options["consumer_type"] = msgclient.ConsumerType.Shared
        consumer = await client.subscribe(topic, f"instructions-{uuid.uuid4().hex[:8]}", **options)
        for _ in range(count):
            consumer.acknowledge(await consumer.receive())
        await consumer.close()


def _instructions(mode: str, url: str, topic: str, count: int) -> int:
    """Instructions callgrind counted in a child process running one workload."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={os.path.join(scratch, 'out')}",
                sys.executable,
                "-m",
                "msgclient.perf.instructions",
                "--run",
                mode,
                url,
                topic,
                str(count),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise RuntimeError(f"the {mode} workload failed under callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_message(mode: str, url: str, small: int, large: int) -> float:
    """Instructions per message of ``mode`` on the broker at ``url``."""
    topic = f"instructions-{uuid.uuid4().hex[:8]}"
    if mode == "receive":
        asyncio.run(_workload("fill", url, topic, large + small))
        first, second = topic, topic
    else:
        first, second = topic + "-a", topic + "-b"
    low = _instructions(mode, url, first, small)
    high = _instructions(mode, url, second, large)
    return (high - low) / (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msgclient.perf.instructions")
    parser.add_argument("--broker", choices=["pulsar", "kafka", "both"], default="both")
    parser.add_argument("--pulsar-url", help="a running Pulsar broker (default: embedded)")
    parser.add_argument("--kafka-url", help="a running Kafka broker (default: embedded)")
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument(
        "--run", nargs=4, metavar=("MODE", "URL", "TOPIC", "COUNT"), help=argparse.SUPPRESS
    )  # the child process's workload
    args = parser.parse_args(argv)
    if args.run:
        mode, url, topic, count = args.run
        asyncio.run(_workload(mode, url, topic, int(count)))
        return 0
    if args.large <= args.small:
        parser.error("--large must be greater than --small")
    with ExitStack() as stack:
        urls = {}
        if args.broker in ("pulsar", "both"):
            urls["pulsar"] = args.pulsar_url or stack.enter_context(PulsarBroker()).service_url
        if args.broker in ("kafka", "both"):
            urls["kafka"] = args.kafka_url or stack.enter_context(KafkaBroker()).service_url
        for broker, url in urls.items():
            for mode in ("send", "receive"):
                print(
                    f"{broker} {mode}: counting ({args.small} and {args.large} messages)...",
                    file=sys.stderr,
                    flush=True,
                )
                cost = per_message(mode, url, args.small, args.large)
                print(f"{broker:7} {mode:8} {cost:10,.0f} instructions per message", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
