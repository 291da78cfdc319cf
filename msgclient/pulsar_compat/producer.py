"""Producer: the official client's producer over msgclient's blocking one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from msgclient import blocking
from msgclient.errors import MsgClientError
from msgclient.message import MessageId as CoreMessageId
from msgclient.message import OutgoingMessage
from msgclient.producer import MessageOptions
from msgclient.pulsar_compat.arguments import check_type, check_type_or_none
from msgclient.pulsar_compat.enums import Result
from msgclient.pulsar_compat.exceptions import pulsar_errors, result_of
from msgclient.pulsar_compat.message import PayloadSchema
from msgclient.pulsar_compat.message_id import MessageId

SendCallback = Callable[[Result, MessageId | None], None]


class Producer:
    """Publishes to one topic; made by ``Client.create_producer``."""

    def __init__(self, producer: blocking.Producer, schema: PayloadSchema) -> None:
        self._producer = producer
        self._schema = schema

    def topic(self) -> str:
        return self._producer.topic

    def producer_name(self) -> str:
        return self._producer.producer_name

    def last_sequence_id(self) -> int:
        """The sequence id of the last message the broker confirmed (-1 before any)."""
        return self._producer.last_sequence_id

    def is_connected(self) -> bool:
        return self._producer.is_connected()

    def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> MessageId:
        """Publish and wait for the broker to store it; ``content`` None sends a null value
        (a tombstone)."""
        value, options = message_options(
            self._schema,
            content,
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            disable_replication,
            event_timestamp,
            deliver_at,
            deliver_after,
        )
        with pulsar_errors():
            return MessageId.wrap(self._producer.send(value, **options))

    def send_async(
        self,
        content: Any,
        callback: SendCallback | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> None:
        """Queue a message; ``callback(result, message_id)`` is called once the broker
        stored it (``Result.Ok``) or it failed (the error's ``Result``, message id None).
        A full queue without ``block_if_queue_full`` calls it at once with
        ``Result.ProducerQueueIsFull``, as the official client does. ``callback`` None:
        nobody is told (the official client takes None too)."""
        value, options = message_options(
            self._schema,
            content,
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            disable_replication,
            event_timestamp,
            deliver_at,
            deliver_after,
        )

        def done(error: BaseException | None, message_id: CoreMessageId | None) -> None:
            assert callback is not None
            callback(result_of(error), None if message_id is None else MessageId.wrap(message_id))

        try:
            self._producer.send_async(value, None if callback is None else done, **options)
        except MsgClientError as error:
            if callback is not None:
                callback(result_of(error), None)

    def flush(self) -> None:
        with pulsar_errors():
            self._producer.flush()

    def close(self) -> None:
        with pulsar_errors():
            self._producer.close()


def message_options(
    schema: PayloadSchema,
    content: Any,
    properties: dict[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: str | None = None,
    sequence_id: int | None = None,
    replication_clusters: list[str] | None = None,
    disable_replication: bool = False,
    event_timestamp: int | None = None,
    deliver_at: int | None = None,
    deliver_after: timedelta | None = None,
) -> tuple[bytes | None, MessageOptions]:
    """The payload and msgclient's per-message options for the official ``send``
    arguments (checked as the official client checks them)."""
    value = None if content is None else schema.encode(content)
    check_type_or_none(bytes, value, "data")
    check_type_or_none(dict, properties, "properties")
    check_type_or_none(str, partition_key, "partition_key")
    check_type_or_none(str, ordering_key, "ordering_key")
    check_type_or_none(int, sequence_id, "sequence_id")
    check_type_or_none(list, replication_clusters, "replication_clusters")
    check_type(bool, disable_replication, "disable_replication")
    check_type_or_none(int, event_timestamp, "event_timestamp")
    check_type_or_none(int, deliver_at, "deliver_at")
    check_type_or_none(timedelta, deliver_after, "deliver_after")
    # As the official client: empty and zero values are "not set".
    options: MessageOptions = {}
    if properties:
        options["properties"] = properties
    if partition_key:
        options["partition_key"] = partition_key
    if ordering_key:
        options["ordering_key"] = ordering_key
    if sequence_id:
        options["sequence_id"] = sequence_id
    if replication_clusters:
        options["replication_clusters"] = replication_clusters
    if disable_replication:
        options["disable_replication"] = True
    if event_timestamp:
        options["event_timestamp"] = event_timestamp
    if deliver_at:
        options["deliver_at"] = deliver_at
    if deliver_after:
        options["deliver_after"] = int(deliver_after.total_seconds() * 1000)
    return value, options


class RoutedMessage:
    """What a custom ``message_router(message, num_partitions)`` sees of an outgoing
    message: the official Message accessors that make sense before it is sent."""

    __slots__ = ("_message",)

    def __init__(self, message: OutgoingMessage) -> None:
        self._message = message

    def data(self) -> bytes:
        return self._message.value

    def partition_key(self) -> str:
        key = self._message.partition_key
        return key.decode() if isinstance(key, bytes) else key or ""

    def ordering_key(self) -> str:
        key = self._message.ordering_key
        return "" if key is None else key.decode("utf-8", "surrogateescape")

    def properties(self) -> dict[str, str]:
        return dict(self._message.properties or {})

    def event_timestamp(self) -> int:
        return self._message.event_timestamp or 0
