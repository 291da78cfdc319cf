"""Consume a topic on Pulsar or Kafka, acknowledging each message.

    python examples/consume.py pulsar://localhost:6650 my-topic my-subscription
    python examples/consume.py kafka://localhost:9092 my-topic my-group

Pulsar uses a Shared subscription; Kafka a consumer group (Failover: Kafka has no Shared).
Prints each message (or, with ``--quiet``, progress once a second) until none arrives for
``--idle-ms`` milliseconds; Ctrl-C stops cleanly, committing what was acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import msgclient


async def main(args: argparse.Namespace) -> None:
    kafka = args.service_url.lower().startswith("kafka")
    async with msgclient.Client(args.service_url) as client:
        consumer = await client.subscribe(
            args.topic,
            args.subscription,
            consumer_type=msgclient.ConsumerType.Failover
            if kafka
            else msgclient.ConsumerType.Shared,
            initial_position=msgclient.InitialPosition.Earliest,
            # Kafka only: a dead member's partitions move on after 10 s (default 45 s;
            # some brokers also hold a group's first join for part of it)
            session_timeout_ms=10_000,
        )
        received = 0
        started = last_report = time.monotonic()
        try:
            while True:
                try:
                    message = await consumer.receive(timeout_millis=args.idle_ms)
                except msgclient.ReceiveTimeoutError:
                    break
                if not args.quiet:
                    print(message.message_id(), message.partition_key(), message.data())
                consumer.acknowledge(message)
                received += 1
                if args.quiet and time.monotonic() - last_report >= 1:
                    last_report = time.monotonic()
                    print(f"  received {received:,}")
        except asyncio.CancelledError:
            print("interrupted")
        await consumer.close()  # commits (Kafka) or flushes (Pulsar) the acknowledgments
        print(f"received {received:,} messages in {time.monotonic() - started:.2f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("service_url", help="pulsar://host:port or kafka://host:port,...")
    parser.add_argument("topic")
    parser.add_argument("subscription", help="Pulsar subscription or Kafka consumer group")
    parser.add_argument("--idle-ms", type=int, default=2000)
    parser.add_argument("--quiet", action="store_true", help="progress instead of messages")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(parser.parse_args()))
