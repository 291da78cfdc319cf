"""Produce messages to a topic on Pulsar or Kafka.

    python examples/produce.py pulsar://localhost:6650 my-topic --count 100000
    python examples/produce.py kafka://localhost:9092 my-topic --key-space 10

Sends ``--count`` messages pipelined with ``send_async`` (keyed over ``--key-space`` keys
when given), prints progress once a second and the last message id. Ctrl-C stops sending,
waits for what was sent to be confirmed, and exits cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import msgclient


async def main(args: argparse.Namespace) -> None:
    async with (
        msgclient.Client(args.service_url) as client,
        await client.create_producer(args.topic, block_if_queue_full=True) as producer,
    ):
        started = last_report = time.monotonic()
        sent = 0
        last: asyncio.Future[msgclient.MessageId] | None = None
        try:
            for i in range(args.count):
                key = f"key-{i % args.key_space}" if args.key_space else None
                last = await producer.send_async(b"message %d" % i, partition_key=key)
                sent += 1
                if time.monotonic() - last_report >= 1:
                    last_report = time.monotonic()
                    print(f"  sent {sent:,} ({sent / (last_report - started):,.0f} msg/s)")
        except asyncio.CancelledError:
            print(f"interrupted after {sent:,} messages: waiting for their confirmations")
        await producer.flush()
        if last is not None:
            elapsed = time.monotonic() - started
            print(f"sent {sent:,} messages to {args.topic} in {elapsed:.2f}s; last id {await last}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("service_url", help="pulsar://host:port or kafka://host:port,...")
    parser.add_argument("topic")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--key-space", type=int, default=0, help="keys per message (0: none)")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(parser.parse_args()))
