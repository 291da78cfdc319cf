"""Trace context through the brokers: the send span's context rides in the message's
properties (Kafka headers) as W3C traceparent, and the receive span continues its trace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import msgclient
from tests.metrics.helpers import BROKERS, TIMEOUT, broker_url, tracer_provider


async def within(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, TIMEOUT)


@pytest.mark.parametrize("broker", BROKERS)
async def test_the_receive_span_continues_the_trace_of_the_send_span(
    request: pytest.FixtureRequest, broker: str, topic: str
) -> None:
    url = await broker_url(request, broker, topic, partitions=1)
    provider, exporter = tracer_provider()
    async with msgclient.Client(url, tracer_provider=provider) as client:
        producer = await within(client.create_producer(topic))
        await within(producer.send(b"traced", properties={"mine": "kept"}))
        sent_many = await within(producer.send_many([b"bulk-1", b"bulk-2"]))
        assert len(sent_many) == 2
        reader = await within(client.create_reader(topic, msgclient.InitialPosition.Earliest))
        message = await within(reader.read_next(int(TIMEOUT * 1000)))
        bulk = [await within(reader.read_next(int(TIMEOUT * 1000))) for _ in range(2)]
        await reader.close()

    properties = message.properties()
    assert properties["mine"] == "kept"
    assert properties["traceparent"].startswith("00-")
    send, send_bulk, receive, *receive_bulk = exporter.get_finished_spans()
    assert (send.kind, receive.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert send.name == f"send {producer.topic}"
    assert send.attributes is not None and receive.attributes is not None
    assert send.attributes["messaging.system"] == broker
    assert send.attributes["messaging.operation.type"] == "send"
    assert receive.attributes["messaging.operation.type"] == "receive"
    assert send.context is not None and receive.context is not None
    assert receive.context.trace_id == send.context.trace_id
    assert receive.parent is not None and receive.parent.span_id == send.context.span_id
    assert send.status.status_code is StatusCode.UNSET
    # send_many: one span for the call, its context in every message
    assert send_bulk.attributes is not None
    assert send_bulk.attributes["messaging.batch.message_count"] == 2
    assert send_bulk.context is not None
    for one, span in zip(bulk, receive_bulk, strict=True):
        assert one.properties()["traceparent"].split("-")[1] == f"{send_bulk.context.trace_id:032x}"
        assert span.context is not None and span.context.trace_id == send_bulk.context.trace_id


async def test_a_failed_send_ends_its_span_with_the_error(pulsar_broker: Any, topic: str) -> None:
    provider, exporter = tracer_provider()
    async with msgclient.Client(pulsar_broker.service_url, tracer_provider=provider) as client:
        producer = await within(client.create_producer(topic))
        with pytest.raises(msgclient.InvalidConfigurationError):  # refused before a span
            await producer.send(b"x", properties={"k": 1})  # type: ignore[dict-item]
        await producer.close()
        with pytest.raises(msgclient.AlreadyClosedError):
            await producer.send(b"too late")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "AlreadyClosedError"


async def test_a_send_with_a_callback_ends_its_span_when_the_callback_runs(
    pulsar_broker: Any, topic: str
) -> None:
    """A send_async with a callback has no future: the callback ends the span, first."""
    provider, exporter = tracer_provider()
    ended_before: list[int] = []
    async with msgclient.Client(pulsar_broker.service_url, tracer_provider=provider) as client:
        producer = await within(client.create_producer(topic))
        confirmed: asyncio.Future[msgclient.MessageId | None] = asyncio.Future()

        def callback(error: BaseException | None, message_id: msgclient.MessageId | None) -> None:
            ended_before.append(len(exporter.get_finished_spans()))
            confirmed.set_result(message_id)

        assert await within(producer.send_async(b"called back", callback)) is None
        assert await within(confirmed) is not None
    (span,) = exporter.get_finished_spans()
    assert ended_before == [1]
    assert span.name == f"send {producer.topic}"
    assert span.status.status_code is StatusCode.UNSET
