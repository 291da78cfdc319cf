"""Trace context through messages: a PRODUCER span per send whose context goes into the
message's properties (Kafka headers) as W3C ``traceparent`` / ``tracestate``, and a
CONSUMER span per receive, the child of the context its message carries (a batch
receive: one span linked to each message's context).

The propagator is OpenTelemetry's global one (W3C trace context and baggage unless the
application set another). Imported only by a client with a ``tracer_provider``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, StatusCode

from msgclient._version import __version__
from msgclient.message import Message, MessageId, SendCallback


class Tracing:
    """The spans of one client's producers and consumers (``system``: messaging.system)."""

    def __init__(self, provider: Any, system: str) -> None:
        if provider is True:
            provider = trace.get_tracer_provider()
        self._tracer = provider.get_tracer("msgclient", __version__)
        self._system = system

    # -- sending ------------------------------------------------------------------------

    def start_send(self, topic: str, messages: int = 1) -> tuple[Span, dict[str, str]]:
        """A send span (not current: the send is in flight when the caller goes on), and
        the properties that carry its context."""
        attributes: dict[str, str | int] = {
            "messaging.system": self._system,
            "messaging.destination.name": topic,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
        }
        if messages != 1:
            attributes["messaging.batch.message_count"] = messages
        span = self._tracer.start_span(
            f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes
        )
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        return span, carrier

    def end_when_done(self, span: Span, future: asyncio.Future[Any]) -> None:
        """End ``span`` when the broker confirmed or the send failed."""
        future.add_done_callback(lambda done: end(span, _error_of(done)))

    def ending_with(self, span: Span, callback: SendCallback) -> SendCallback:
        """``callback``, ending ``span`` first: for a send that has no future."""

        def ended(error: BaseException | None, message_id: MessageId | None) -> None:
            end(span, error)
            callback(error, message_id)

        return ended

    # -- receiving ----------------------------------------------------------------------

    def received(
        self, topic: str, subscription: str, messages: Sequence[Message], started_ns: int
    ) -> None:
        """A receive span from ``started_ns`` to now: for one message, the child of the
        context it carries; for several, linked to each message's context."""
        attributes: dict[str, str | int] = {
            "messaging.system": self._system,
            "messaging.destination.name": topic,
            "messaging.destination.subscription.name": subscription,
            "messaging.operation.name": "receive",
            "messaging.operation.type": "receive",
        }
        if len(messages) == 1:
            parent = propagate.extract(messages[0].properties())
            links: list[Link] = []
        else:
            attributes["messaging.batch.message_count"] = len(messages)
            parent = None
            contexts = (_span_context(m.properties()) for m in messages)
            links = [Link(context) for context in contexts if context.is_valid]
        span = self._tracer.start_span(
            f"receive {topic}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            start_time=started_ns,
        )
        span.end()


def end(span: Span, error: BaseException | None) -> None:
    if error is not None:
        span.record_exception(error)
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(StatusCode.ERROR, str(error))
    span.end()


def now_ns() -> int:
    return time.time_ns()


def _error_of(future: asyncio.Future[Any]) -> BaseException | None:
    if future.cancelled():
        return asyncio.CancelledError()
    return future.exception()


def _span_context(properties: Mapping[str, str]) -> trace.SpanContext:
    return trace.get_current_span(propagate.extract(properties)).get_span_context()
