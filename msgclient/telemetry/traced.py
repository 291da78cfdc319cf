"""The producer and consumer of a client with a ``tracer_provider``: each send and each
receive has its span (msgclient/telemetry/tracing.py). A client without one makes the
plain classes, whose methods have no tracing check at all."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Unpack, overload

from msgclient.consumer import Consumer
from msgclient.message import Message, MessageId, SendCallback
from msgclient.message_batch import MessageBatch
from msgclient.producer import MessageOptions, Producer
from msgclient.sent_messages import SentMessages
from msgclient.telemetry.tracing import Tracing, end, now_ns
from msgclient.validators import check_properties


class TracedProducer(Producer):
    """A send span per ``send_async`` (and per ``send_many`` call), its context in the
    message's properties."""

    def __init__(self, *args: Any, tracing: Tracing, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tracing = tracing

    @overload
    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: None = None,
        **options: Unpack[MessageOptions],
    ) -> asyncio.Future[MessageId]: ...

    @overload
    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback,
        **options: Unpack[MessageOptions],
    ) -> None: ...

    async def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback | None = None,
        **options: Unpack[MessageOptions],
    ) -> asyncio.Future[MessageId] | None:
        properties = options.get("properties")
        check_properties("properties", properties)  # as the plain send: before any span
        span, carrier = self._tracing.start_send(self.topic)
        options["properties"] = {**properties, **carrier} if properties else carrier
        if callback is not None:  # no future then: the callback ends the span
            callback = self._tracing.ending_with(span, callback)
        try:
            future = await super().send_async(value, callback, **options)
        except BaseException as error:
            end(span, error)
            raise
        if future is not None:
            self._tracing.end_when_done(span, future)
        return future

    async def send_many_async(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_timestamps: Sequence[int | None] | None = None,
        partition: int | None = None,
    ) -> asyncio.Future[SentMessages]:
        span, carrier = self._tracing.start_send(self.topic, len(values))
        column: Sequence[Mapping[str, str] | None] | None = properties
        if properties is None:
            column = [carrier] * len(values)
        elif all(p is None or isinstance(p, Mapping) for p in properties):
            column = [{**p, **carrier} if p else carrier for p in properties]
        try:  # (another column is left as it is: the plain send refuses it)
            future = await super().send_many_async(
                values,
                keys=keys,
                properties=column,
                event_timestamps=event_timestamps,
                partition=partition,
            )
        except BaseException as error:
            end(span, error)
            raise
        self._tracing.end_when_done(span, future)
        return future


class TracedConsumer(Consumer):
    """A receive span per ``receive`` (the message's context its parent), and per
    ``batch_receive`` and ``receive_many`` (linked to each message's context)."""

    def __init__(self, *args: Any, tracing: Tracing, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tracing = tracing

    async def receive(self, timeout_millis: int | None = None) -> Message:
        started = now_ns()
        message = await super().receive(timeout_millis)
        self._traced([message], started)
        return message

    async def batch_receive(self) -> list[Message]:
        started = now_ns()
        messages = await super().batch_receive()
        if messages:
            self._traced(messages, started)
        return messages

    async def receive_many(
        self, max_messages: int | None = None, timeout_millis: int | None = None
    ) -> MessageBatch:
        started = now_ns()
        batch = await super().receive_many(max_messages, timeout_millis)
        if len(batch):
            self._traced(batch, started)
        return batch

    def _traced(self, messages: Sequence[Message], started: int) -> None:
        topic = self.topic if len(self.topics) == 1 else messages[0].topic_name()
        self._tracing.received(topic, self.subscription_name, messages, started)
