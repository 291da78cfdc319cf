"""Reader: the official client's reader over msgclient's blocking one."""

from __future__ import annotations

from msgclient import blocking
from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.exceptions import pulsar_errors
from msgclient.pulsar_compat.message import Message, PayloadSchema
from msgclient.pulsar_compat.message_id import MessageId, seek_position


class Reader:
    """Reads a topic from a position; made by ``Client.create_reader``."""

    def __init__(self, reader: blocking.Reader, schema: PayloadSchema) -> None:
        self._reader = reader
        self._schema = schema

    def topic(self) -> str:
        return self._reader.topic

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` if none comes within ``timeout_millis``."""
        if timeout_millis is not None:
            check_type(int, timeout_millis, "timeout_millis")
        with pulsar_errors():
            return Message(self._reader.read_next(timeout_millis), self._schema)

    def has_message_available(self) -> bool:
        with pulsar_errors():
            return self._reader.has_message_available()

    def seek(self, messageid: MessageId | int) -> None:
        """Read on from a message id, or from a publish time in ms since the epoch."""
        position = seek_position(messageid)
        with pulsar_errors():
            self._reader.seek(position)

    def is_connected(self) -> bool:
        return self._reader.is_connected()

    def close(self) -> None:
        with pulsar_errors():
            self._reader.close()
