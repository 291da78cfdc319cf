"""``pulsar.schema`` names (``from msgclient.pulsar_compat import schema``)."""

from __future__ import annotations

from typing import Any


class BytesSchema:
    """Payloads as bytes, unchanged."""

    def encode(self, data: Any) -> bytes:
        if not isinstance(data, bytes):
            raise TypeError(f"Invalid type: {type(data)}: expected bytes")
        return data

    def decode(self, data: bytes) -> bytes:
        return data
