"""Helpers for the Kafka integration tests: kafka-python is the reference reader and writer.

kafka-python is blocking: its calls run in a thread so that the event loop (and msgclient)
runs meanwhile. Every wait is bounded by ``TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.fetcher import ConsumerRecord

TIMEOUT = 15.0
QUIET = 0.5  # nothing more within this: no record too many


def create_topic_blocking(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    await asyncio.wait_for(
        asyncio.to_thread(create_topic_blocking, bootstrap, topic, partitions), TIMEOUT
    )


def read_blocking(
    bootstrap: str, topic: str, count: int | None, isolation_level: str = "read_uncommitted"
) -> list[ConsumerRecord]:
    """Exactly ``count`` records of ``topic`` from offset 0 (fails on fewer or more), or
    all there are with ``count=None``.

    Reads until ``count`` records came (or, with ``count=None``, until every partition's
    position reached its end offset), within ``TIMEOUT``; then until nothing more comes for
    ``QUIET`` seconds, so that a record too many shows. (tansu's end offset is the newest
    batch's base offset + 1, not the end (brokers.md): the rest of that batch comes with
    it, in the same fetch, and is read in the quiet period.)"""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        fetch_max_wait_ms=100,  # tansu: a 0 ms wait returns nothing (brokers.md)
        max_partition_fetch_bytes=8 * 1024 * 1024,
        isolation_level=isolation_level,
    )
    records: list[ConsumerRecord] = []

    def poll() -> None:
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend(batch)

    try:
        deadline = time.monotonic() + TIMEOUT
        partitions = None
        while not partitions:
            assert time.monotonic() < deadline, f"no partitions of {topic}"
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                consumer.topics()  # a metadata request
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        for partition in assigned:  # not "earliest": tansu's may skip batches (brokers.md)
            consumer.seek(partition, 0)
        ends = consumer.end_offsets(assigned)

        def done() -> bool:
            if count is not None:
                return len(records) >= count
            return all(consumer.position(tp) >= ends[tp] for tp in assigned)

        while not done():
            assert time.monotonic() < deadline, (
                f"kafka-python read {len(records)} records of {count} in {TIMEOUT:g} s"
            )
            poll()
        quiet_until = time.monotonic() + QUIET
        while time.monotonic() < quiet_until:
            before = len(records)
            poll()
            if len(records) > before:
                assert time.monotonic() < deadline + TIMEOUT, "records kept coming"
                quiet_until = time.monotonic() + QUIET
    finally:
        consumer.close()
    if count is not None:
        assert len(records) == count, f"kafka-python read {len(records)} records, not {count}"
    return records


async def read(
    bootstrap: str, topic: str, count: int | None, isolation_level: str = "read_uncommitted"
) -> list[ConsumerRecord]:
    return await asyncio.wait_for(
        asyncio.to_thread(read_blocking, bootstrap, topic, count, isolation_level), 60
    )


def produce_blocking(
    bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any
) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        for record in records:
            producer.send(topic, **record)
        producer.flush(timeout=TIMEOUT)
    finally:
        producer.close()


async def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any) -> None:
    await asyncio.wait_for(
        asyncio.to_thread(produce_blocking, bootstrap, topic, records, **config), 60
    )
