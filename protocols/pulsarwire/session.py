"""PulsarSession: the Pulsar half of one connection.

Bytes go through the sans-IO FrameDecoder; each frame is routed by command type: answers
to requests complete the connection's request futures, receipts go to producers by
producer id, dispatched messages and consumer events to consumers by consumer id, pings
are answered. Everything here runs on the event loop, no awaits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from msgclient.core.network.connection import Connection
from msgclient.core.network.sender import NodeSender, ReadyBatch
from msgclient.errors import (
    AuthenticationError,
    BrokerError,
    ConnectionClosedError,
    ConsumerBusyError,
    MsgClientError,
    ProducerBusyError,
    ProducerFencedError,
    TooManyRequestsError,
    TopicNotFoundError,
)
from protocols.pulsarwire.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MESSAGE_SIZE_FRAME_PADDING,
    Frame,
    FrameDecoder,
    encode_command,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

# Builds the AUTH_RESPONSE frame that answers an AUTH_CHALLENGE (the adapter's credentials).
AuthResponder = Callable[[], Awaitable[bytes]]

Type = pb.BaseCommand.Type
PING = encode_command(pb.BaseCommand(type=Type.PING, ping=pb.CommandPing()))
PONG = encode_command(pb.BaseCommand(type=Type.PONG, pong=pb.CommandPong()))

_ERRORS: dict[str, type[BrokerError]] = {
    "TopicNotFound": TopicNotFoundError,
    "ProducerBusy": ProducerBusyError,
    "ConsumerBusy": ConsumerBusyError,
    "ProducerFenced": ProducerFencedError,
}


def broker_error(code: int, message: str) -> MsgClientError:
    """The typed exception for a ServerError code from the broker."""
    name = (
        pb.ServerError.Name(code)  # type: ignore[arg-type]
        if code in pb.ServerError.values()
        else f"ServerError{code}"
    )
    if name == "AuthenticationError":
        return AuthenticationError(f"{name}: {message}")
    if name == "TooManyRequests":
        return TooManyRequestsError(f"{name}: {message}")
    return _ERRORS.get(name, BrokerError)(name, message)


class ProducerHandler(Protocol):
    """What a producer registered on a session receives."""

    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None: ...

    def on_send_error(self, error: pb.CommandSendError) -> None: ...

    def on_closed(self, error: ConnectionClosedError) -> None:
        """The connection died or the broker closed the producer."""


class ConsumerHandler(Protocol):
    """What a consumer registered on a session receives."""

    def on_message(self, frame: Frame) -> None:
        """A MESSAGE frame (one ledger entry) for this consumer."""

    def on_closed(self, error: ConnectionClosedError) -> None:
        """The connection died or the broker closed the consumer."""

    def on_active_consumer_change(self, is_active: bool) -> None: ...

    def on_reached_end_of_topic(self) -> None: ...


class SendFrame(ReadyBatch):
    """One SEND frame of a producer (its partition), waiting for the connection's drain."""

    __slots__ = ("frame",)

    def __init__(self, producer_id: int, frame: bytes) -> None:
        super().__init__(producer_id, len(frame))
        self.frame = frame


class PulsarSession:
    """Decodes frames and routes them; one per connection."""

    connection: PulsarConnection

    def __init__(
        self, connection: PulsarConnection, auth_responder: AuthResponder | None = None
    ) -> None:
        self.connection = connection
        self._auth_responder = auth_responder
        self._auth_answer: asyncio.Task[None] | None = None
        self._decoder = FrameDecoder()
        self.connected: asyncio.Future[pb.CommandConnected] = (
            asyncio.get_running_loop().create_future()
        )
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        # SEND frames of every producer on this connection, written in the order they were
        # ready: one partition's batch per frame, no answer awaited at this level.
        self.sender: NodeSender[SendFrame] = NodeSender(
            lambda frames: connection.write(frames[0].frame),
            on_failure=lambda _, error: connection.abort(error),  # resent on reconnect
            max_in_flight=None,
            max_request_bytes=None,
            one_batch_per_request=True,
            writable=lambda: connection.writable,
        )
        connection.on_writable(self.sender.wake)
        self.producers: dict[int, ProducerHandler] = {}
        self.consumers: dict[int, ConsumerHandler] = {}
        self._handlers: dict[int, Callable[[Frame], None]] = {
            Type.CONNECTED: self._on_connected,
            Type.AUTH_CHALLENGE: self._on_auth_challenge,
            Type.PING: self._on_ping,
            Type.PONG: _ignore,
            Type.SUCCESS: lambda f: self._resolve(f.command.success.request_id, f.command.success),
            Type.ERROR: self._on_error,
            Type.PRODUCER_SUCCESS: self._on_producer_success,
            Type.LOOKUP_RESPONSE: self._on_lookup_response,
            Type.PARTITIONED_METADATA_RESPONSE: self._on_partitioned_metadata_response,
            Type.SEND_RECEIPT: self._on_send_receipt,
            Type.SEND_ERROR: self._on_send_error,
            Type.CLOSE_PRODUCER: self._on_close_producer,
            Type.MESSAGE: self._on_message,
            Type.CLOSE_CONSUMER: self._on_close_consumer,
            Type.ACTIVE_CONSUMER_CHANGE: self._on_active_consumer_change,
            Type.REACHED_END_OF_TOPIC: self._on_reached_end_of_topic,
            Type.ACK_RESPONSE: self._on_ack_response,
            Type.GET_LAST_MESSAGE_ID_RESPONSE: lambda f: self._resolve(
                f.command.getLastMessageIdResponse.request_id, f.command.getLastMessageIdResponse
            ),
        }

    # -- ProtocolSession ----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        handlers = self._handlers
        for frame in self._decoder.feed(data):
            handler = handlers.get(frame.command.type)
            if handler is None:
                log.debug(
                    "ignoring %s from %s", Type.Name(frame.command.type), self.connection.address
                )
            else:
                handler(frame)

    def eof_received(self) -> None:
        self._decoder.eof()

    def keepalive_probe(self) -> bytes:
        return PING

    def connection_lost(self, error: ConnectionClosedError) -> None:
        if not self.connected.done():
            self.connected.set_exception(error)
        if self._auth_answer is not None:
            self._auth_answer.cancel()
        producers, self.producers = self.producers, {}
        for producer in producers.values():
            producer.on_closed(error)
        consumers, self.consumers = self.consumers, {}
        for consumer in consumers.values():
            consumer.on_closed(error)

    # -- requests -----------------------------------------------------------------------

    def request(self, request_id: int, command: pb.BaseCommand) -> asyncio.Future[object]:
        return self.connection.request(request_id, encode_command(command))

    def _resolve(self, request_id: int, answer: object) -> None:
        if not self.connection.resolve(request_id, answer):
            log.debug("late or unknown answer to request %d", request_id)

    # -- handlers -----------------------------------------------------------------------

    def _on_connected(self, frame: Frame) -> None:
        connected = frame.command.connected
        if connected.HasField("max_message_size"):
            self.max_message_size = connected.max_message_size
            self._decoder.max_frame_size = connected.max_message_size + MESSAGE_SIZE_FRAME_PADDING
        if not self.connected.done():
            self.connected.set_result(connected)

    def _on_auth_challenge(self, _: Frame) -> None:
        # Before CONNECTED (a multi-step handshake) or after it (the broker's "refresh"
        # when the credentials expire), the answer is the same: the current credentials.
        if self._auth_responder is None:
            self._fail_handshake(
                AuthenticationError(
                    f"{self.connection.address} asks for authentication and the client has "
                    "none (option authentication)"
                )
            )
            return
        if self._auth_answer is not None and not self._auth_answer.done():
            return  # the answer under way carries the current credentials already
        self._auth_answer = asyncio.ensure_future(self._answer_challenge(self._auth_responder))

    async def _answer_challenge(self, responder: AuthResponder) -> None:
        try:
            response = await responder()
        except Exception as error:
            # Our own errors' text is free of secrets; a custom provider's may not be.
            reason = str(error) if isinstance(error, MsgClientError) else type(error).__name__
            log.warning(
                "cannot answer the authentication challenge of %s: %s",
                self.connection.address,
                reason,
            )
            self._fail_handshake(error)
            return
        log.debug("answered the authentication challenge of %s", self.connection.address)
        self.connection.write(response)

    def _fail_handshake(self, error: Exception) -> None:
        """Fail the handshake if it is still under way (after it, the broker decides)."""
        if not self.connected.done():
            self.connected.set_exception(error)
            self.connection.close()

    def _on_ping(self, _: Frame) -> None:
        self.connection.write(PONG)

    def _on_error(self, frame: Frame) -> None:
        error = frame.command.error
        exception = broker_error(error.error, error.message)
        if not self.connected.done():  # refused during the handshake (e.g. authentication)
            self.connected.set_exception(exception)
            return
        self.connection.reject(error.request_id, exception)

    def _on_producer_success(self, frame: Frame) -> None:
        success = frame.command.producer_success
        # A producer that waits for exclusive access (WaitForExclusive) gets
        # producer_ready=false first and a second answer once it has it: it may wait longer
        # than the operation timeout.
        if success.producer_ready:
            self._resolve(success.request_id, success)
        else:
            log.info("producer %s waits for exclusive access", success.producer_name)
            self.connection.hold(success.request_id)

    def _on_lookup_response(self, frame: Frame) -> None:
        response = frame.command.lookupTopicResponse
        if response.response == pb.CommandLookupTopicResponse.Failed:
            self.connection.reject(
                response.request_id, broker_error(response.error, response.message)
            )
        else:
            self._resolve(response.request_id, response)

    def _on_partitioned_metadata_response(self, frame: Frame) -> None:
        response = frame.command.partitionMetadataResponse
        if response.response == pb.CommandPartitionedTopicMetadataResponse.Failed:
            self.connection.reject(
                response.request_id, broker_error(response.error, response.message)
            )
        else:
            self._resolve(response.request_id, response)

    def _on_send_receipt(self, frame: Frame) -> None:
        receipt = frame.command.send_receipt
        producer = self.producers.get(receipt.producer_id)
        if producer is not None:
            producer.on_send_receipt(receipt)

    def _on_send_error(self, frame: Frame) -> None:
        error = frame.command.send_error
        producer = self.producers.get(error.producer_id)
        if producer is not None:
            producer.on_send_error(error)

    def _on_close_producer(self, frame: Frame) -> None:
        close = frame.command.close_producer
        producer = self.producers.pop(close.producer_id, None)
        if producer is not None:
            producer.on_closed(
                ConnectionClosedError(
                    f"{self.connection.address} closed producer {close.producer_id}"
                )
            )

    def _on_message(self, frame: Frame) -> None:
        # The consume hot path: one dict lookup, no logging.
        consumer = self.consumers.get(frame.command.message.consumer_id)
        if consumer is not None:
            consumer.on_message(frame)

    def _on_close_consumer(self, frame: Frame) -> None:
        close = frame.command.close_consumer
        consumer = self.consumers.pop(close.consumer_id, None)
        if consumer is not None:
            consumer.on_closed(
                ConnectionClosedError(
                    f"{self.connection.address} closed consumer {close.consumer_id}"
                )
            )

    def _on_active_consumer_change(self, frame: Frame) -> None:
        change = frame.command.active_consumer_change
        consumer = self.consumers.get(change.consumer_id)
        if consumer is not None:
            consumer.on_active_consumer_change(change.is_active)

    def _on_reached_end_of_topic(self, frame: Frame) -> None:
        consumer = self.consumers.get(frame.command.reachedEndOfTopic.consumer_id)
        if consumer is not None:
            consumer.on_reached_end_of_topic()

    def _on_ack_response(self, frame: Frame) -> None:
        response = frame.command.ackResponse
        if response.HasField("error"):
            self.connection.reject(
                response.request_id, broker_error(response.error, response.message)
            )
        else:
            self._resolve(response.request_id, response)


def _ignore(_: Frame) -> None:
    pass


PulsarConnection = Connection[PulsarSession]
