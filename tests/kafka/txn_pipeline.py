"""A consume-transform-produce process for the crash test (test_transactions_crash.py):
reads ``source`` in group ``group``, writes ``value + b"-out"`` to ``sink`` for each input
and acknowledges the inputs in the same transaction, ``batch`` inputs per transaction.
Prints ``committed N`` after each commit and ``done`` once the source stays empty.

    python -m tests.kafka.txn_pipeline URL SOURCE SINK GROUP TRANSACTIONAL_ID BATCH
"""

from __future__ import annotations

import asyncio
import sys

import msgclient

IDLE_MS = 3000  # no input for this long: the source is drained


async def main(url: str, source: str, sink: str, group: str, tid: str, batch: int) -> None:
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            source,
            group,
            consumer_type=msgclient.ConsumerType.Failover,
            initial_position=msgclient.InitialPosition.Earliest,
            session_timeout_ms=4000,
            heartbeat_interval_ms=300,
            rebalance_timeout_ms=4000,
            fetch_max_wait_ms=100,
        )
        producer = await client.create_producer(sink, transactional_id=tid)
        committed = 0
        while True:
            try:
                first = await consumer.receive(timeout_millis=IDLE_MS)
            except msgclient.ReceiveTimeoutError:
                break
            messages = [first]
            while len(messages) < batch:
                try:
                    messages.append(await consumer.receive(timeout_millis=200))
                except msgclient.ReceiveTimeoutError:
                    break
            async with producer.transaction() as txn:
                for message in messages:
                    await producer.send_async(message.data() + b"-out")
                    consumer.acknowledge(message, transaction=txn)
            committed += len(messages)
            print(f"committed {committed}", flush=True)
        print("done", flush=True)


if __name__ == "__main__":
    url, source, sink, group, tid, batch = sys.argv[1:]
    asyncio.run(main(url, source, sink, group, tid, int(batch)))
