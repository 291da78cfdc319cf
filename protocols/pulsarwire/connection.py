"""PulsarConnection: the I/O half of a Pulsar connection.

The core Connection writes, times requests out and completes their futures from the
session's events; this class adds what is Pulsar's alone: requests built from commands,
the handshake future that CONNECTED completes, the answer to an AUTH_CHALLENGE (the
credentials come from an async provider, so it runs as a task). SEND frames need nothing
of their own: producers write them to the connection, which keeps their order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from msgclient.core.network.connection import Connection
from msgclient.errors import ConnectionClosedError, MsgClientError
from protocols.pulsarwire.framing import encode_command
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.session import AuthChallenge, Connected, HandshakeFailed, PulsarSession

log = logging.getLogger(__name__)

# Builds the AUTH_RESPONSE frame that answers an AUTH_CHALLENGE (the adapter's credentials).
AuthResponder = Callable[[], Awaitable[bytes]]


class PulsarConnection(Connection[PulsarSession]):
    """One socket to a broker (or a proxy) and its PulsarSession."""

    def __init__(
        self,
        *,
        address: str,
        operation_timeout: float,
        keepalive_interval: float,
        auth_responder: AuthResponder | None = None,
    ) -> None:
        super().__init__(
            PulsarSession(address, authenticates=auth_responder is not None),
            address=address,
            operation_timeout=operation_timeout,
            keepalive_interval=keepalive_interval,
        )
        self._auth_responder = auth_responder
        self._auth_answer: asyncio.Task[None] | None = None
        self.connected: asyncio.Future[pb.CommandConnected] = self._loop.create_future()

    def request(self, request_id: int, command: pb.BaseCommand) -> asyncio.Future[Any]:
        """Send ``command``, which carries ``request_id``; a future of the broker's answer
        (see ``send_request``)."""
        return self.send_request(request_id, encode_command(command))

    # -- the session's events -----------------------------------------------------------

    def _on_event(self, event: object) -> None:
        if isinstance(event, Connected):
            if not self.connected.done():
                self.connected.set_result(event.command)
        elif isinstance(event, AuthChallenge):
            self._on_auth_challenge()
        elif isinstance(event, HandshakeFailed):
            self._fail_handshake(event.error)
        else:
            super()._on_event(event)

    def _on_closed(self, error: ConnectionClosedError) -> None:
        if not self.connected.done():
            self.connected.set_exception(error)
        if self._auth_answer is not None:
            self._auth_answer.cancel()
        super()._on_closed(error)

    def _on_auth_challenge(self) -> None:
        if self._auth_answer is not None and not self._auth_answer.done():
            return  # the answer under way carries the current credentials already
        assert self._auth_responder is not None, "the session asks only a client that has one"
        self._auth_answer = asyncio.ensure_future(self._answer_challenge(self._auth_responder))

    async def _answer_challenge(self, responder: AuthResponder) -> None:
        try:
            response = await responder()
        except Exception as error:
            # Our own errors' text is free of secrets; a custom provider's may not be.
            reason = str(error) if isinstance(error, MsgClientError) else type(error).__name__
            log.warning(
                "cannot answer the authentication challenge of %s: %s", self.address, reason
            )
            self._fail_handshake(error)
            return
        log.debug("answered the authentication challenge of %s", self.address)
        self.write(response)

    def _fail_handshake(self, error: Exception) -> None:
        """Fail the handshake if it is still under way (after it, the broker decides)."""
        if not self.connected.done():
            self.connected.set_exception(error)
            self.close()
