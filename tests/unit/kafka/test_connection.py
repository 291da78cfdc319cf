"""KafkaConnection, the I/O half: what the session encodes is written, answers complete the
request futures; driven by bytes over a transport that keeps what is written (no socket)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from protocols.kafkawire.api import ApiVersionTable
from protocols.kafkawire.connection import KafkaConnection
from tests.unit.fake_transport import FakeTransport, attach
from tests.unit.kafka.test_session import CLIENT_ID, api_versions, header, produced

WAIT = 2.0


@pytest.fixture
async def opened() -> AsyncIterator[tuple[KafkaConnection, FakeTransport]]:
    connection = KafkaConnection(
        address="broker-1:9092",
        operation_timeout=WAIT,
        keepalive_interval=30.0,
        client_id=CLIENT_ID,
    )
    connection.session.versions = ApiVersionTable(
        {ApiVersionsRequest.API_KEY: (0, 3), ProduceRequest.API_KEY: (3, 9)}, "broker-1:9092"
    )
    yield connection, attach(connection)
    connection.close()
    async with asyncio.timeout(WAIT):
        await connection.closed


async def test_a_request_is_written_and_its_answer_completes_it(
    opened: tuple[KafkaConnection, FakeTransport],
) -> None:
    connection, transport = opened
    answer = connection.request(ApiVersionsRequest(), 0)
    (data,) = transport.written
    api_key, version, correlation = header(data)
    assert (api_key, version) == (ApiVersionsRequest.API_KEY, 0)
    assert not answer.done()
    connection.data_received(api_versions(0, correlation))
    assert answer.result().error_code == 0


async def test_produce_awaits_the_answer_unless_acks_is_0(
    opened: tuple[KafkaConnection, FakeTransport],
) -> None:
    connection, transport = opened
    assert connection.produce(0, 1000, [("t", [(0, b"batch")])]) is None
    unanswered = b"".join(transport.written)
    assert header(unanswered)[:2] == (ProduceRequest.API_KEY, 9)
    assert b"batch" in unanswered
    transport.written.clear()
    answer = connection.produce(1, 1000, [("t", [(0, b"batch")])])
    assert answer is not None
    api_key, version, correlation = header(b"".join(transport.written))
    assert (api_key, version) == (ProduceRequest.API_KEY, 9)
    connection.data_received(produced(9, correlation, base_offset=7))
    (topic,) = answer.result().responses
    assert topic.partition_responses[0].base_offset == 7
    assert connection.is_open
