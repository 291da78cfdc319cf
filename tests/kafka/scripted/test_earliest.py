"""Earliest is the log start, even where ListOffsets says otherwise.

tansu answers ListOffsets *earliest* with the batch stored first in time, which after
concurrent produces to a partition can be offset 1 while offset 0 is still there
(docs/kafka.md). On tansu that takes racing producers (about 1 run in 50), so the scripted
server shows it every time: ListOffsets earliest answers ``listed``, while a Fetch reports
the log start as ``log_start`` and serves every record from there. A reader is shown; a
group member without a committed offset starts at the same ``initial_offset``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from kafka.record.memory_records import MemoryRecordsBuilder

import msgclient
from tests.kafka.scripted.server import (
    NONE,
    WAIT,
    Received,
    ScriptedKafkaServer,
    ServerConnection,
)

TOPIC = "racy"
VALUES = [b"zero", b"one", b"two"]
OFFSET_OUT_OF_RANGE = 1


class RacyLog:
    """ListOffsets and Fetch of one partition holding ``VALUES`` at offsets 0, 1, 2, each
    record its own batch, whose first offset a Fetch reports as ``log_start``."""

    def __init__(self, server: ScriptedKafkaServer, listed: int, log_start: int) -> None:
        self.listed = listed
        self.log_start = log_start
        self.first_served = log_start  # below it a Fetch is out of range
        server.handlers[ApiKey.ListOffsets] = self.answer_list_offsets
        server.handlers[ApiKey.Fetch] = self.answer_fetch

    def answer_list_offsets(self, conn: ServerConnection, received: Received) -> None:
        (topic,) = received.request.topics
        (partition,) = topic.partitions
        earliest = partition.timestamp == -2
        Topic = ListOffsetsResponse.ListOffsetsTopicResponse
        answer = Topic.ListOffsetsPartitionResponse(
            partition_index=0,
            error_code=NONE,
            timestamp=-1,
            offset=self.listed if earliest else len(VALUES),
            leader_epoch=-1,
        )
        conn.answer(
            received,
            ListOffsetsResponse(
                throttle_time_ms=0, topics=[Topic(name=TOPIC, partitions=[answer])]
            ),
        )

    def answer_fetch(self, conn: ServerConnection, received: Received) -> None:
        (topic,) = received.request.topics
        (partition,) = topic.partitions
        offset = partition.fetch_offset
        code, records = NONE, b""
        if offset < self.first_served or offset > len(VALUES):
            code = OFFSET_OUT_OF_RANGE
        elif offset < len(VALUES):
            records = b"".join(_batch(o, VALUES[o]) for o in range(offset, len(VALUES)))
        Topic = FetchResponse.FetchableTopicResponse
        answer = Topic.PartitionData(
            partition_index=0,
            error_code=code,
            high_watermark=len(VALUES),
            last_stable_offset=len(VALUES),
            log_start_offset=self.log_start,
            aborted_transactions=[],
            preferred_read_replica=-1,
            records=records,
        )
        response = FetchResponse(
            throttle_time_ms=0,
            error_code=NONE,
            session_id=0,
            responses=[Topic(topic=TOPIC, partitions=[answer])],
        )
        if records or code:
            conn.answer(received, response)
        else:  # at the end: answer after max_wait, as a broker with nothing new does
            delay = received.request.max_wait_ms / 1000
            asyncio.get_running_loop().call_later(delay, conn.answer, received, response)


def _batch(offset: int, value: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=0, key=None, value=value, headers=[])
    builder.close()
    data = bytearray(builder.buffer())
    data[0:8] = offset.to_bytes(8, "big")  # base offset (not under the CRC)
    return bytes(data)


@pytest.fixture
async def server() -> AsyncIterator[ScriptedKafkaServer]:
    server = await ScriptedKafkaServer(topics={TOPIC: 1}).start()
    yield server
    await server.stop()
    assert server.errors == []


async def _read_from_earliest(server: ScriptedKafkaServer) -> list[bytes | None]:
    async with msgclient.Client(server.url, operation_timeout_seconds=WAIT) as client:
        reader = await client.create_reader(TOPIC, msgclient.InitialPosition.Earliest)
        async with asyncio.timeout(WAIT):
            return [(await reader.read_next()).value() for _ in VALUES]


def _fetch_offsets(server: ScriptedKafkaServer) -> list[int]:
    return [
        p.fetch_offset
        for r in server.requests(ApiKey.Fetch)
        for t in r.request.topics
        for p in t.partitions
    ]


async def test_a_reader_at_earliest_starts_at_the_log_start_a_fetch_reports(
    server: ScriptedKafkaServer,
) -> None:
    RacyLog(server, listed=1, log_start=0)
    assert await _read_from_earliest(server) == VALUES
    # One probe at ListOffsets' answer reads the log start; reading starts there.
    assert _fetch_offsets(server)[:2] == [1, 0]


async def test_no_probe_when_listoffsets_answers_the_first_offset(
    server: ScriptedKafkaServer,
) -> None:
    RacyLog(server, listed=0, log_start=0)
    assert await _read_from_earliest(server) == VALUES
    assert _fetch_offsets(server)[0] == 0


async def test_a_log_start_out_of_range_falls_back_to_listoffsets(
    server: ScriptedKafkaServer,
) -> None:
    """A broker whose Fetch reports a log start it no longer serves: the out-of-range
    reset trusts ListOffsets alone instead of probing (and failing) again."""
    racy = RacyLog(server, listed=1, log_start=0)
    racy.first_served = 1
    async with msgclient.Client(server.url, operation_timeout_seconds=WAIT) as client:
        reader = await client.create_reader(TOPIC, msgclient.InitialPosition.Earliest)
        async with asyncio.timeout(WAIT):
            got = [(await reader.read_next()).value() for _ in VALUES[1:]]
    assert got == VALUES[1:]
    assert _fetch_offsets(server)[:3] == [1, 0, 1]
