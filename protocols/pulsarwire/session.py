"""PulsarSession: the Pulsar half of one connection, sans-IO (as h11 is).

Bytes in (``receive_data``), events out: no socket, no loop, no futures. Frames come out
of the FrameDecoder and are routed by command type. What concerns the connection becomes
an event for it: answers and refusals to requests by request id, a request the broker
holds, the PONG to write back, and the handshake's end (CONNECTED, or a refusal) or an
AUTH_CHALLENGE to answer. What concerns one producer or consumer goes straight to the
handler registered under its id (receipts, dispatched messages, closes): a MESSAGE costs
one dict lookup and a call, no event. ``PulsarConnection`` (connection.py) does the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from msgclient.core.network.events import Answer, Hold, Refusal, Write
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


@dataclass(slots=True)
class Connected:
    """CONNECTED ended the handshake (the first one only)."""

    command: pb.CommandConnected


@dataclass(slots=True)
class HandshakeFailed:
    """The broker refused the handshake (an ERROR before CONNECTED), or challenged a client
    that has no credentials: the connection is of no use."""

    error: MsgClientError


@dataclass(slots=True)
class AuthChallenge:
    """AUTH_CHALLENGE: answer with the current credentials. Before CONNECTED it is a step of
    the handshake, after it the broker's refresh when the credentials expire; the answer is
    the same."""


PulsarEvent = Answer | Refusal | Hold | Write | Connected | HandshakeFailed | AuthChallenge
Handler = Callable[[Frame], PulsarEvent | None]


class PulsarSession:
    """Decodes frames and routes them; one per connection (``connection.session``)."""

    def __init__(self, address: str, *, authenticates: bool = False) -> None:
        self.address = address  # for the messages only
        self._authenticates = authenticates  # whether the client can answer a challenge
        self._handshaking = True  # until CONNECTED or a HandshakeFailed
        self._decoder = FrameDecoder()
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.producers: dict[int, ProducerHandler] = {}
        self.consumers: dict[int, ConsumerHandler] = {}
        self._handlers: dict[int, Handler] = {
            Type.CONNECTED: self._on_connected,
            Type.AUTH_CHALLENGE: self._on_auth_challenge,
            Type.PING: lambda _: Write(PONG),
            Type.PONG: _ignore,
            Type.SUCCESS: lambda f: Answer(f.command.success.request_id, f.command.success),
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
            Type.GET_LAST_MESSAGE_ID_RESPONSE: lambda f: Answer(
                f.command.getLastMessageIdResponse.request_id, f.command.getLastMessageIdResponse
            ),
            # A refusal comes as ERROR with the request id (``_on_error``): no failed variant.
            Type.GET_TOPICS_OF_NAMESPACE_RESPONSE: lambda f: Answer(
                f.command.getTopicsOfNamespaceResponse.request_id,
                f.command.getTopicsOfNamespaceResponse,
            ),
        }

    # -- ProtocolSession ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> Iterator[PulsarEvent]:
        """Route the frames ``data`` completes; yield the events for the connection as it
        goes, so each is acted on before the next frame is routed."""
        handlers = self._handlers
        for frame in self._decoder.feed(data):
            handler = handlers.get(frame.command.type)
            if handler is None:
                log.debug("ignoring %s from %s", Type.Name(frame.command.type), self.address)
                continue
            event = handler(frame)
            if event is not None:
                yield event

    def receive_eof(self) -> None:
        self._decoder.eof()

    def keepalive_probe(self) -> bytes:
        return PING

    def connection_lost(self, error: ConnectionClosedError) -> None:
        producers, self.producers = self.producers, {}
        for producer in producers.values():
            producer.on_closed(error)
        consumers, self.consumers = self.consumers, {}
        for consumer in consumers.values():
            consumer.on_closed(error)

    # -- handlers: the connection's frames ----------------------------------------------

    def _on_connected(self, frame: Frame) -> Connected | None:
        connected = frame.command.connected
        if connected.HasField("max_message_size"):
            self.max_message_size = connected.max_message_size
            self._decoder.max_frame_size = connected.max_message_size + MESSAGE_SIZE_FRAME_PADDING
        if not self._handshaking:
            return None
        self._handshaking = False
        return Connected(connected)

    def _on_auth_challenge(self, _: Frame) -> AuthChallenge | HandshakeFailed | None:
        if self._authenticates:
            return AuthChallenge()
        return self._fail_handshake(
            AuthenticationError(
                f"{self.address} asks for authentication and the client has none "
                "(option authentication)"
            )
        )

    def _fail_handshake(self, error: MsgClientError) -> HandshakeFailed | None:
        """Fail the handshake if it is still under way (after it, the broker decides)."""
        if not self._handshaking:
            return None
        self._handshaking = False
        return HandshakeFailed(error)

    def _on_error(self, frame: Frame) -> Refusal | HandshakeFailed | None:
        error = frame.command.error
        exception = broker_error(error.error, error.message)
        if self._handshaking:  # refused during the handshake (e.g. authentication)
            return self._fail_handshake(exception)
        return Refusal(error.request_id, exception)

    def _on_producer_success(self, frame: Frame) -> Answer | Hold:
        success = frame.command.producer_success
        # A producer that waits for exclusive access (WaitForExclusive) gets
        # producer_ready=false first and a second answer once it has it: it may wait longer
        # than the operation timeout.
        if success.producer_ready:
            return Answer(success.request_id, success)
        log.info("producer %s waits for exclusive access", success.producer_name)
        return Hold(success.request_id)

    def _on_lookup_response(self, frame: Frame) -> Answer | Refusal:
        response = frame.command.lookupTopicResponse
        if response.response == pb.CommandLookupTopicResponse.Failed:
            return Refusal(response.request_id, broker_error(response.error, response.message))
        return Answer(response.request_id, response)

    def _on_partitioned_metadata_response(self, frame: Frame) -> Answer | Refusal:
        response = frame.command.partitionMetadataResponse
        if response.response == pb.CommandPartitionedTopicMetadataResponse.Failed:
            return Refusal(response.request_id, broker_error(response.error, response.message))
        return Answer(response.request_id, response)

    def _on_ack_response(self, frame: Frame) -> Answer | Refusal:
        response = frame.command.ackResponse
        if response.HasField("error"):
            return Refusal(response.request_id, broker_error(response.error, response.message))
        return Answer(response.request_id, response)

    # -- handlers: a producer's or a consumer's frames ----------------------------------

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
                ConnectionClosedError(f"{self.address} closed producer {close.producer_id}")
            )

    def _on_message(self, frame: Frame) -> None:
        # The consume hot path: one dict lookup, no logging, no event.
        consumer = self.consumers.get(frame.command.message.consumer_id)
        if consumer is not None:
            consumer.on_message(frame)

    def _on_close_consumer(self, frame: Frame) -> None:
        close = frame.command.close_consumer
        consumer = self.consumers.pop(close.consumer_id, None)
        if consumer is not None:
            consumer.on_closed(
                ConnectionClosedError(f"{self.address} closed consumer {close.consumer_id}")
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


def _ignore(_: Frame) -> None:
    return None
