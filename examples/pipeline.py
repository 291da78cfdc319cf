"""The example pipeline: produce and consume with msgclient on an embedded Pulsar broker.

Starts a real pulsar-lite on loopback; a producer sends keyed, compressed messages with
properties, while a consumer on a Shared subscription receives and acknowledges them; then
it checks that every message arrived exactly once, intact.

    python examples/pipeline.py [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import msgclient
from msgclient.embedded import PulsarBroker

TOPIC = "example-pipeline"


async def produce(client: msgclient.Client, count: int) -> None:
    async with await client.create_producer(
        TOPIC, compression_type=msgclient.CompressionType.ZSTD
    ) as producer:
        for i in range(count):
            await producer.send_async(
                f"order {i}".encode(),
                partition_key=f"customer-{i % 10}",
                properties={"index": str(i)},
                event_timestamp=int(time.time() * 1000),
            )
        await producer.flush()


async def consume(consumer: msgclient.Consumer, count: int) -> dict[int, bytes]:
    received: dict[int, bytes] = {}
    duplicates = 0
    while len(received) < count:
        message = await consumer.receive(timeout_millis=10_000)
        index = int(message.properties()["index"])
        duplicates += index in received
        received[index] = message.data()
        consumer.acknowledge(message)
    if duplicates:
        print(f"warning: {duplicates} duplicates")
    return received


async def pipeline(service_url: str, count: int) -> dict[int, bytes]:
    async with msgclient.Client(service_url) as client:
        consumer = await client.subscribe(
            TOPIC, "pipeline", consumer_type=msgclient.ConsumerType.Shared
        )
        started = time.perf_counter()
        received, _ = await asyncio.gather(consume(consumer, count), produce(client, count))
        elapsed = time.perf_counter() - started
        print(f"produced and consumed {count} messages in {elapsed:.2f}s; {consumer.stats()}")
        await consumer.close()
        return received


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    with PulsarBroker() as broker:
        print(f"pulsar-lite at {broker.service_url}")
        received = asyncio.run(pipeline(broker.service_url, args.messages))
    expected = {i: f"order {i}".encode() for i in range(args.messages)}
    if received != expected:
        missing = sorted(set(expected) - set(received))[:5]
        print(f"FAILED: {len(received)} of {args.messages} received; missing e.g. {missing}")
        return 1
    print(f"all {len(received)} messages arrived intact: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
