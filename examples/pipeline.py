"""The example pipeline: produce with msgclient to an embedded Pulsar broker, read it back.

Starts a real pulsar-lite on loopback, produces keyed messages with properties through
msgclient (batched and compressed), reads them back with the official pulsar-client on a
Shared subscription, and checks that every message arrived intact.

    python examples/pipeline.py [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time

import pulsar

import msgclient
from msgclient.embedded import PulsarBroker

TOPIC = "example-pipeline"


async def produce(service_url: str, count: int) -> list[msgclient.MessageId]:
    async with msgclient.Client(service_url) as client:
        producer = await client.create_producer(
            TOPIC, compression_type=msgclient.CompressionType.ZSTD
        )
        futures = [
            await producer.send_async(
                f"order {i}".encode(),
                partition_key=f"customer-{i % 10}",
                properties={"index": str(i)},
                event_timestamp=int(time.time() * 1000),
            )
            for i in range(count)
        ]
        await producer.flush()
        return [await future for future in futures]


def read_back(consumer: pulsar.Consumer, count: int) -> dict[int, bytes]:
    received: dict[int, bytes] = {}
    while len(received) < count:
        message = consumer.receive(timeout_millis=10_000)
        received[int(message.properties()["index"])] = message.data()
        consumer.acknowledge(message)
    return received


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    with PulsarBroker() as broker:
        print(f"pulsar-lite at {broker.service_url}")
        quiet = logging.getLogger("pulsar-client")
        quiet.setLevel(logging.WARNING)
        reader = pulsar.Client(broker.service_url, logger=quiet)
        consumer = reader.subscribe(TOPIC, "pipeline", consumer_type=pulsar.ConsumerType.Shared)
        started = time.perf_counter()
        ids = asyncio.run(produce(broker.service_url, args.messages))
        produced = time.perf_counter() - started
        print(f"produced {len(ids)} messages in {produced:.2f}s, last id {ids[-1]}")
        received = read_back(consumer, args.messages)
        reader.close()
    expected = {i: f"order {i}".encode() for i in range(args.messages)}
    if received != expected:
        missing = sorted(set(expected) - set(received))[:5]
        print(f"FAILED: {len(received)} of {args.messages} read back; missing e.g. {missing}")
        return 1
    print(f"read back all {len(received)} messages with pulsar-client: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
