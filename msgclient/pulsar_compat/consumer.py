"""Consumer: the official client's consumer over msgclient's blocking one."""

from __future__ import annotations

from msgclient import blocking
from msgclient import message as core
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.enums import ConsumerType
from msgclient.pulsar_compat.exceptions import (
    CumulativeAcknowledgementNotAllowedError,
    pulsar_errors,
)
from msgclient.pulsar_compat.message import Message, PayloadSchema
from msgclient.pulsar_compat.message_id import MessageId, seek_position
from protocols.pulsarwire.topic import normalize_topic


class Consumer:
    """Receives from a subscription; made by ``Client.subscribe``."""

    def __init__(
        self, consumer: blocking.Consumer, schema: PayloadSchema, consumer_type: ConsumerType
    ) -> None:
        self._consumer = consumer
        self._schema = schema
        self._type = consumer_type

    def topic(self) -> str:
        return self._consumer.topic

    def subscription_name(self) -> str:
        return self._consumer.subscription_name

    def consumer_name(self) -> str:
        return self._consumer.consumer_name

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` if none comes within ``timeout_millis``."""
        if timeout_millis is not None:
            check_type(int, timeout_millis, "timeout_millis")
        with pulsar_errors():
            return Message(self._consumer.receive(timeout_millis), self._schema)

    def batch_receive(self) -> list[Message]:
        """Messages as the subscription's ``batch_receive_policy`` says."""
        with pulsar_errors():
            return [Message(m, self._schema) for m in self._consumer.batch_receive()]

    def acknowledge(self, message: Message | MessageId) -> None:
        with pulsar_errors():
            self._consumer.acknowledge(core_target(message))

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge everything up to ``message``; not on Shared and KeyShared."""
        if self._type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError(
                f"acknowledge_cumulative is not allowed on a {self._type.name} subscription"
            )
        with pulsar_errors():
            self._consumer.acknowledge_cumulative(core_target(message))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after ``negative_ack_redelivery_delay_ms``."""
        with pulsar_errors():
            self._consumer.negative_acknowledge(core_target(message))

    def pause_message_listener(self) -> None:
        self._consumer.pause_message_listener()

    def resume_message_listener(self) -> None:
        self._consumer.resume_message_listener()

    def redeliver_unacknowledged_messages(self) -> None:
        """Have the broker send again everything it delivered to this consumer that is not
        acknowledged (pulsar-lite does so on Shared and KeyShared only: brokers.md)."""
        with pulsar_errors():
            self._consumer.redeliver_unacknowledged_messages()

    def seek(self, messageid: MessageId | int) -> None:
        """Move the subscription to a message id (or MessageId.earliest / latest), or to a
        publish time in ms since the epoch."""
        position = seek_position(messageid)
        with pulsar_errors():
            self._consumer.seek(position)

    def get_last_message_id(self) -> MessageId | None:
        """The id of the topic's last message (None when it is empty)."""
        with pulsar_errors():
            last = self._consumer.get_last_message_id()
        return None if last is None else MessageId.wrap(last)

    def unsubscribe(self) -> None:
        with pulsar_errors():
            self._consumer.unsubscribe()

    def close(self) -> None:
        with pulsar_errors():
            self._consumer.close()


def core_target(message: Message | MessageId) -> core.Message | core.MessageId:
    """What msgclient's consumer acknowledges for the official message or id."""
    if isinstance(message, Message):
        return message.msgclient_message
    if isinstance(message, MessageId):
        if message.topic is None:
            return message.msgclient_id
        # The topic deserialize(..., topic=...) or the message gave: what a consumer of
        # several topics needs to route the acknowledgment, short names included.
        return core.TopicMessageId(normalize_topic(message.topic), message.msgclient_id)
    raise TypeError(f"expected a Message or a MessageId, not {type(message).__name__}")
