"""Consume a topic: ``python examples/consume.py pulsar://localhost:6650 my-topic my-sub``.

Prints and acknowledges messages on a Shared subscription until none arrives for
``--idle-ms`` milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio

import msgclient


async def main(service_url: str, topic: str, subscription: str, idle_ms: int) -> None:
    async with msgclient.Client(service_url) as client:
        consumer = await client.subscribe(
            topic,
            subscription,
            consumer_type=msgclient.ConsumerType.Shared,
            initial_position=msgclient.InitialPosition.Earliest,
        )
        received = 0
        while True:
            try:
                message = await consumer.receive(timeout_millis=idle_ms)
            except msgclient.ReceiveTimeoutError:
                break
            print(message.message_id(), message.data())
            consumer.acknowledge(message)
            received += 1
        print(f"received {received} messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("service_url")
    parser.add_argument("topic")
    parser.add_argument("subscription")
    parser.add_argument("--idle-ms", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.service_url, args.topic, args.subscription, args.idle_ms))
