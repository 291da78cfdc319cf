"""``pulsar.asyncio``'s names on msgclient's async API (``msgclient.Client``):
``from msgclient.pulsar_compat import asyncio as pulsar_asyncio``.

As in the official module, every failure raises this module's ``PulsarException``, whose
``error()`` is the ``Result`` code; producer and consumer arguments are those of the
blocking ``Client`` (checked and mapped by the same code).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any

from msgclient import client as core_client
from msgclient import consumer as core_consumer
from msgclient import errors
from msgclient import producer as core_producer
from msgclient import reader as core_reader
from msgclient.pulsar_compat import client as blocking_compat
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.consumer import core_target
from msgclient.pulsar_compat.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from msgclient.pulsar_compat.exceptions import result_of
from msgclient.pulsar_compat.message import Message, PayloadSchema
from msgclient.pulsar_compat.message_id import MessageId, reader_start, seek_position
from msgclient.pulsar_compat.producer import message_options
from msgclient.pulsar_compat.settings import consumer_options, payload_schema, producer_options

__all__ = [
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerCryptoFailureAction",
    "InitialPosition",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "PulsarException",
    "Reader",
    "RegexSubscriptionMode",
]


class PulsarException(Exception):
    """What every call of this module raises: ``error()`` is the ``Result`` code."""

    def __init__(self, result: Result, msg: str | None = None) -> None:
        super().__init__(result, msg)
        self._result = result
        self._msg = msg

    def error(self) -> Result:
        return self._result

    def __str__(self) -> str:
        if self._msg:
            return f"{self._result.value} {self._result.name}: {self._msg}"
        return f"{self._result.value} {self._result.name}"


class _Translated:
    """Raise msgclient's errors as this module's PulsarException (the cause chained)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: Any
    ) -> None:
        if isinstance(error, errors.MsgClientError):
            raise PulsarException(result_of(error), str(error)) from error


_translated = _Translated()


def _set_future(future: asyncio.Future[Any], result: Any, value: Any) -> None:
    """Complete ``future`` with ``value``, or with the PulsarException of ``result`` if it
    is not Ok (a ``Result``, or the official extension's, by name); nothing if the future
    is done already (its caller cancelled it). The official module's helper of this name,
    which its test suite calls."""
    if future.done():
        return
    name = getattr(result, "name", result)
    if name == Result.Ok.name:
        future.set_result(value)
    else:
        future.set_exception(PulsarException(Result[str(name)]))


class Producer:
    def __init__(
        self, producer: core_producer.Producer, schema: PayloadSchema, client: Client
    ) -> None:
        self._producer = producer
        self._schema = schema
        self._client = client
        self._closed = False

    async def send(self, content: Any, **message_arguments: Any) -> MessageId:
        """Send and wait for the broker to store it (arguments as the blocking ``send``)."""
        self._client.check_open()
        value, options = message_options(self._schema, content, **message_arguments)
        with _translated:
            return MessageId.wrap(await self._producer.send(value, **options))

    async def flush(self) -> None:
        with _translated:
            await self._producer.flush()

    async def close(self) -> None:
        """Close; a second close raises AlreadyClosed, as the official module's does."""
        if self._closed:
            raise PulsarException(Result.AlreadyClosed, "the producer is closed")
        self._closed = True
        with _translated:
            await self._producer.close()

    def topic(self) -> str:
        return self._producer.topic

    def producer_name(self) -> str:
        return self._producer.producer_name

    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id

    def is_connected(self) -> bool:
        return self._producer.is_connected()


class Consumer:
    def __init__(self, consumer: core_consumer.Consumer, schema: PayloadSchema) -> None:
        self._consumer = consumer
        self._schema = schema

    async def receive(self) -> Message:
        with _translated:
            return Message(await self._consumer.receive(), self._schema)

    async def acknowledge(self, message: Message | MessageId) -> None:
        with _translated:
            await self._consumer.acknowledge(core_target(message))

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        with _translated:
            await self._consumer.acknowledge_cumulative(core_target(message))

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        with _translated:
            self._consumer.negative_acknowledge(core_target(message))

    async def unsubscribe(self) -> None:
        with _translated:
            await self._consumer.unsubscribe()

    async def seek(self, messageid: MessageId | int) -> None:
        position = seek_position(messageid)
        with _translated:
            await self._consumer.seek(position)

    async def close(self) -> None:
        with _translated:
            await self._consumer.close()

    async def get_last_message_id(self) -> MessageId | None:
        with _translated:
            last = await self._consumer.get_last_message_id()
        return None if last is None else MessageId.wrap(last)

    def redeliver_unacknowledged_messages(self) -> None:
        with _translated:
            self._consumer.redeliver_unacknowledged_messages()

    def topic(self) -> str:
        return self._consumer.topic

    def subscription_name(self) -> str:
        return self._consumer.subscription_name

    def consumer_name(self) -> str:
        return self._consumer.consumer_name


class Reader:
    def __init__(self, reader: core_reader.Reader, schema: PayloadSchema) -> None:
        self._reader = reader
        self._schema = schema

    async def read_next(self) -> Message:
        with _translated:
            return Message(await self._reader.read_next(), self._schema)

    async def has_message_available(self) -> bool:
        with _translated:
            return await self._reader.has_message_available()

    async def seek(self, messageid: MessageId | int) -> None:
        position = seek_position(messageid)
        with _translated:
            await self._reader.seek(position)

    async def close(self) -> None:
        with _translated:
            await self._reader.close()

    def topic(self) -> str:
        return self._reader.topic

    def is_connected(self) -> bool:
        return self._reader.is_connected()


class Client:
    """``Client(service_url, **kwargs)`` with the blocking ``Client``'s keywords; make it
    inside a running event loop."""

    def __init__(self, service_url: str, **kwargs: Any) -> None:
        check_type(str, service_url, "service_url")
        with _translated:
            self._client = core_client.Client(service_url, **_client_options(kwargs))
        self._closed = False  # by close() or shutdown(): what follows raises AlreadyClosed
        self._closing: asyncio.Future[None] | None = None  # shutdown()'s close

    async def create_producer(self, topic: str, *args: Any, **kwargs: Any) -> Producer:
        """Arguments as the blocking ``Client.create_producer``, except that batching is on
        unless said otherwise (the official asyncio module's default)."""
        check_type(str, topic, "topic")
        given = _PRODUCER_SIGNATURE.bind_partial(self, topic, *args, **kwargs).arguments
        if "batching_enabled" not in given:
            kwargs["batching_enabled"] = True
        options, schema = producer_options(*args, **kwargs)
        with _translated:
            return Producer(await self._client.create_producer(topic, **options), schema, self)

    async def subscribe(
        self, topic: str | list[str], subscription_name: str, *args: Any, **kwargs: Any
    ) -> Consumer:
        """Arguments as the blocking ``Client.subscribe`` (no ``message_listener``);
        ``is_pattern_topic=True`` takes ``topic`` (a str) as a regex, as the official."""
        check_type(str, subscription_name, "subscription_name")
        is_pattern_topic = kwargs.pop("is_pattern_topic", False)
        check_type(bool, is_pattern_topic, "is_pattern_topic")
        if not isinstance(topic, str | list):
            raise ValueError("Argument 'topic' is expected to be of type 'str' or 'list'")
        if is_pattern_topic and not isinstance(topic, str):
            raise ValueError(
                "Argument 'topic' must be a string when 'is_pattern_topic' is True; lists of "
                "topics do not support pattern subscriptions"
            )
        options, schema = consumer_options(*args, **kwargs)
        target: str | list[str] | re.Pattern[str] = (
            re.compile(topic) if is_pattern_topic and isinstance(topic, str) else topic
        )
        with _translated:
            consumer = await self._client.subscribe(target, subscription_name, **options)
        return Consumer(consumer, schema)

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: PayloadSchema | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        start_message_id_inclusive: bool = False,
    ) -> Reader:
        check_type(MessageId, start_message_id, "start_message_id")
        reader_schema = payload_schema(schema)
        start = reader_start(start_message_id)
        with _translated:
            reader = await self._client.create_reader(
                topic,
                start,
                reader_name=reader_name,
                receiver_queue_size=receiver_queue_size,
                start_message_id_inclusive=start_message_id_inclusive,
                schema=reader_schema.schema_info(),
            )
        return Reader(reader, reader_schema)

    async def get_topic_partitions(self, topic: str) -> list[str]:
        check_type(str, topic, "topic")
        with _translated:
            return await self._client.get_topic_partitions(topic)

    def shutdown(self) -> None:
        """Close in the background (the official call does not wait either); from now on
        sends raise AlreadyClosed."""
        self.check_open()
        self._closed = True
        self._closing = asyncio.ensure_future(self._client.close())

    async def close(self) -> None:
        """Close; after ``shutdown``, wait for its close to finish. A second close raises
        AlreadyClosed, as the official module's does."""
        closing, self._closing = self._closing, None
        if closing is not None:
            with _translated:
                await closing
            return
        self.check_open()
        self._closed = True
        with _translated:
            await self._client.close()

    def check_open(self) -> None:
        if self._closed:
            raise PulsarException(Result.AlreadyClosed, "the client is closed")


_PRODUCER_SIGNATURE = inspect.signature(blocking_compat.Client.create_producer)


def _client_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """msgclient's options for the official client keywords (unknown ones are refused;
    those with no meaning here have no effect, as on the blocking ``Client``)."""
    inspect.signature(blocking_compat.Client).bind("pulsar://", **kwargs)  # names checked
    kept = {
        "operation_timeout_seconds",
        "connection_timeout_ms",
        "tls_trust_certs_file_path",
        "tls_allow_insecure_connection",
        "tls_validate_hostname",
    }
    options = {k: v for k, v in kwargs.items() if k in kept}
    authentication = kwargs.get("authentication")
    if authentication is not None:
        options["authentication"] = authentication.auth
    return options
