"""What a sans-IO protocol session hands its Connection, protocol-neutral.

A session turns received bytes into events and the Connection acts on them: it owns the
request futures and the socket, the session only knows what the bytes said. A protocol's
own events (a handshake, an authentication challenge) are defined beside its session and
handled by its connection class.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Answer:
    """The peer answered request ``request_id``: its future completes with ``result``."""

    request_id: int
    result: object


@dataclass(slots=True)
class Refusal:
    """The peer refused request ``request_id``: its future fails with ``error``."""

    request_id: int
    error: Exception


@dataclass(slots=True)
class Hold:
    """The peer holds request ``request_id`` on purpose (a Pulsar producer waiting for
    exclusive access): it is no longer subject to the operation timeout."""

    request_id: int


@dataclass(slots=True)
class Write:
    """Bytes the protocol answers with by itself (a PONG to a PING)."""

    data: bytes
