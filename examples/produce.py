"""Produce messages to a topic: ``python examples/produce.py pulsar://localhost:6650 my-topic``.

Sends ``--count`` messages (pipelined with ``send_async``) and prints the last message id.
"""

from __future__ import annotations

import argparse
import asyncio

import msgclient


async def main(service_url: str, topic: str, count: int) -> None:
    async with (
        msgclient.Client(service_url) as client,
        await client.create_producer(topic) as producer,
    ):
        futures = [await producer.send_async(b"message %d" % i) for i in range(count)]
        await producer.flush()
        print(f"sent {count} messages to {topic}; last id {await futures[-1]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("service_url")
    parser.add_argument("topic")
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.service_url, args.topic, args.count))
