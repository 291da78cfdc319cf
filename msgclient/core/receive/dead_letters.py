"""Dead-letter and retry topics (the Java client's DeadLetterPolicy handling).

A message redelivered ``max_redeliver_count`` times goes to the dead-letter topic instead
of back to the consumer, with its key and properties plus where it came from; only once
that send is confirmed is it acknowledged on the original subscription, so a crash in
between redelivers it rather than losing it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from msgclient.message import Message, MessageId
from msgclient.options import DeadLetterPolicy

# Property names of the Java client (RetryMessageUtil), so that its consumers read ours.
REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"


class Sender(Protocol):
    """What the router needs of a producer."""

    async def send(
        self,
        value: bytes | None,
        *,
        partition_key: str | None = ...,
        ordering_key: str | bytes | None = ...,
        properties: Mapping[str, str] | None = ...,
        event_timestamp: int | None = ...,
        deliver_after: int | None = ...,
    ) -> MessageId: ...


SenderFactory = Callable[[str, str | None], Awaitable[Sender]]  # topic, initial subscription


class DeadLetterRouter:
    """Sends messages to the dead-letter and retry topics of one subscription."""

    def __init__(
        self,
        policy: DeadLetterPolicy,
        topic: str,
        subscription: str,
        create_sender: SenderFactory,
    ) -> None:
        self.max_redeliver_count = policy.max_redeliver_count
        self.dead_letter_topic = policy.dead_letter_topic or f"{topic}-{subscription}-DLQ"
        self.retry_letter_topic = policy.retry_letter_topic or f"{topic}-{subscription}-RETRY"
        self._create_sender = create_sender
        self._initial_subscription = policy.initial_subscription_name
        self._senders: dict[str, Sender] = {}

    async def send_to_dead_letter(self, message: Message) -> MessageId:
        return await self._forward(self.dead_letter_topic, message, {}, None)

    async def reconsume_later(
        self, message: Message, delay_ms: int, properties: Mapping[str, str] | None
    ) -> MessageId:
        """To the retry topic, delivered after ``delay_ms``; once it was reconsumed
        ``max_redeliver_count`` times, to the dead-letter topic (the Java client's
        doReconsumeLater: both carry the new RECONSUMETIMES and DELAY_TIME)."""
        times = int(message.properties().get(RECONSUME_TIMES, "0")) + 1
        extra = {RECONSUME_TIMES: str(times), DELAY_TIME: str(delay_ms), **(properties or {})}
        if times > self.max_redeliver_count:
            return await self._forward(self.dead_letter_topic, message, extra, None)
        return await self._forward(self.retry_letter_topic, message, extra, delay_ms)

    async def _forward(
        self,
        topic: str,
        message: Message,
        extra: Mapping[str, str],
        deliver_after: int | None,
    ) -> MessageId:
        sender = self._senders.get(topic)
        if sender is None:
            sender = await self._create_sender(topic, self._initial_subscription)
            self._senders[topic] = sender
        properties = {
            **message.properties(),
            REAL_TOPIC: message.properties().get(REAL_TOPIC, message.topic_name()),
            ORIGIN_MESSAGE_ID: message.properties().get(
                ORIGIN_MESSAGE_ID, str(message.message_id())
            ),
            **extra,
        }
        return await sender.send(
            None if message.has_null_value() else message.data(),  # a tombstone stays one
            partition_key=message.partition_key(),
            ordering_key=message.ordering_key(),
            properties=properties,
            event_timestamp=message.event_timestamp() or None,
            deliver_after=deliver_after,
        )
