"""TableView: the latest value of every key of a topic, kept up to date.

A reader reads the topic from the earliest message; ``create_table_view`` returns once it
has caught up with what the topic held, then a thread of the view applies each new message:
a message sets its key's value, a null value (a tombstone) removes the key, a message
without a key is skipped (as in the official client).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from msgclient import blocking
from msgclient import message as core
from msgclient.errors import AlreadyClosedError, ReceiveTimeoutError
from msgclient.pulsar_compat.exceptions import pulsar_errors
from msgclient.pulsar_compat.message import PayloadSchema

log = logging.getLogger(__name__)

# How long the view's thread waits for a message before it looks whether it was closed.
_POLL_MS = 200

Listener = Callable[[str, Any], None]


class TableView:
    """Made by ``Client.create_table_view(topic, subscription_name=None, schema=...)``."""

    def __init__(
        self,
        reader: blocking.Reader,
        topic: str,
        subscription: str | None,
        schema: PayloadSchema,
    ) -> None:
        self._reader = reader
        self._topic = topic
        self._subscription = subscription
        self._schema = schema
        self._values: dict[str, bytes] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        with pulsar_errors():
            while reader.has_message_available():
                self._apply(reader.read_next())
        self._thread = threading.Thread(
            target=self._follow, name=f"msgclient-tableview-{topic}", daemon=True
        )
        self._thread.start()

    def get(self, key: str) -> Any | None:
        """The key's latest value, decoded by the schema; None if the key is absent."""
        with self._lock:
            data = self._values.get(key)
        return None if data is None else self._schema.decode(data)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._values)

    def items(self) -> list[tuple[str, Any]]:
        with self._lock:
            entries = list(self._values.items())
        return [(key, self._schema.decode(data)) for key, data in entries]

    def for_each(self, callback: Listener) -> None:
        """Call ``callback(key, value)`` for every entry now in the view."""
        for key, value in self.items():
            callback(key, value)

    def for_each_and_listen(self, callback: Listener) -> None:
        """``for_each``, then call ``callback(key, value)`` for each later update (on the
        view's thread; a removed key is not reported, as in the official client)."""
        with self._lock:  # no update between the snapshot and the registration
            entries = list(self._values.items())
            self._listeners.append(callback)
        for key, data in entries:
            callback(key, self._schema.decode(data))

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=_POLL_MS / 1000 * 10)
        with pulsar_errors():
            self._reader.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __str__(self) -> str:
        if self._subscription is None:
            return f"TableView(topic={self._topic})"
        return f"TableView(topic={self._topic}, subscription={self._subscription})"

    __repr__ = __str__

    def _follow(self) -> None:
        while not self._closed.is_set():
            try:
                message = self._reader.read_next(_POLL_MS)
            except ReceiveTimeoutError:
                continue
            except AlreadyClosedError:
                return
            self._apply(message)

    def _apply(self, message: core.Message) -> None:
        key = message.partition_key()
        if not key:
            return
        with self._lock:
            if message.has_null_value():
                self._values.pop(key, None)
                return
            data = self._values[key] = message.data()
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(key, self._schema.decode(data))
            except Exception:  # a failing listener must not stop the view
                log.exception("table view listener failed on key %r", key)
