"""PulsarSession as byte conversations: frames in, events and handler calls out, no socket.

Every frame is built with the real encoders and fed as the broker's bytes; the session
answers with events for the connection (answers, refusals, holds, bytes to write, the
handshake's end) or calls the producer or consumer registered under the frame's id.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest

from msgclient.core.network.events import Answer, Hold, Refusal, Write
from msgclient.errors import (
    AuthenticationError,
    BrokerError,
    ConnectionClosedError,
    FrameTooLargeError,
    TopicNotFoundError,
    TruncatedFrameError,
)
from protocols.pulsarwire.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MESSAGE_SIZE_FRAME_PADDING,
    Frame,
    FrameDecoder,
    encode_command,
    encode_payload_command,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.session import (
    AuthChallenge,
    Connected,
    HandshakeFailed,
    PulsarSession,
)

ADDRESS = "broker-1:6650"
Type = pb.BaseCommand.Type


def wire(type_: int, **fields: Any) -> bytes:
    """The bytes of a command the broker sends (``fields``: the BaseCommand's fields)."""
    return encode_command(pb.BaseCommand(type=type_, **fields))  # type: ignore[arg-type]


def decoded(data: bytes) -> pb.BaseCommand:
    (frame,) = FrameDecoder().feed(data)
    return frame.command


def connected(max_message_size: int | None = None) -> bytes:
    command = pb.CommandConnected(server_version="test", protocol_version=21)
    if max_message_size is not None:
        command.max_message_size = max_message_size
    return wire(Type.CONNECTED, connected=command)


def message(consumer_id: int, payload: bytes, entry_id: int = 0) -> bytes:
    command = pb.BaseCommand(
        type=Type.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=consumer_id, message_id=pb.MessageIdData(ledgerId=1, entryId=entry_id)
        ),
    )
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=entry_id, publish_time=1)
    return encode_payload_command(command, metadata.SerializeToString(), payload)


def error(request_id: int, code: pb.ServerError.ValueType, text: str = "no") -> bytes:
    return wire(Type.ERROR, error=pb.CommandError(request_id=request_id, error=code, message=text))


class Producer:
    """A ProducerHandler that records what reaches it."""

    def __init__(self) -> None:
        self.receipts: list[pb.CommandSendReceipt] = []
        self.errors: list[pb.CommandSendError] = []
        self.closed: list[ConnectionClosedError] = []

    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        self.receipts.append(receipt)

    def on_send_error(self, error: pb.CommandSendError) -> None:
        self.errors.append(error)

    def on_closed(self, error: ConnectionClosedError) -> None:
        self.closed.append(error)


class Consumer:
    """A ConsumerHandler that records what reaches it."""

    def __init__(self) -> None:
        self.messages: list[Frame] = []
        self.closed: list[ConnectionClosedError] = []
        self.active: list[bool] = []
        self.ended = 0

    def on_message(self, frame: Frame) -> None:
        self.messages.append(frame)

    def on_closed(self, error: ConnectionClosedError) -> None:
        self.closed.append(error)

    def on_active_consumer_change(self, is_active: bool) -> None:
        self.active.append(is_active)

    def on_reached_end_of_topic(self) -> None:
        self.ended += 1


def receive(session: PulsarSession, data: bytes) -> list[object]:
    return list(session.receive_data(data))


@pytest.fixture
def session() -> PulsarSession:
    """A session past its handshake."""
    session = PulsarSession(ADDRESS)
    assert receive(session, connected()) == [Connected(decoded(connected()).connected)]
    return session


# -- the handshake ---------------------------------------------------------------------------


def test_connected_ends_the_handshake_once() -> None:
    session = PulsarSession(ADDRESS)
    (event,) = receive(session, connected())
    assert isinstance(event, Connected)
    assert event.command.server_version == "test"
    assert receive(session, connected()) == []  # a second CONNECTED is no news


def test_max_message_size_sets_the_frame_limit() -> None:
    session = PulsarSession(ADDRESS)
    assert session.max_message_size == DEFAULT_MAX_MESSAGE_SIZE
    receive(session, connected(max_message_size=1024))
    assert session.max_message_size == 1024
    limit = 1024 + MESSAGE_SIZE_FRAME_PADDING
    assert receive(session, struct.pack(">I", limit)) == []  # the start of a frame at the limit
    refused = PulsarSession(ADDRESS)
    receive(refused, connected(max_message_size=1024))
    with pytest.raises(FrameTooLargeError, match=f"maximum frame size {limit}"):
        receive(refused, struct.pack(">I", limit + 1))


def test_connected_without_max_message_size_keeps_the_default() -> None:
    session = PulsarSession(ADDRESS)
    receive(session, connected())
    assert session.max_message_size == DEFAULT_MAX_MESSAGE_SIZE
    limit = DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING
    with pytest.raises(FrameTooLargeError, match=f"maximum frame size {limit}"):
        receive(session, struct.pack(">I", limit + 1))


def test_auth_challenge_before_connected_is_for_the_client_to_answer() -> None:
    session = PulsarSession(ADDRESS, authenticates=True)
    challenge = wire(Type.AUTH_CHALLENGE, authChallenge=pb.CommandAuthChallenge())
    assert receive(session, challenge) == [AuthChallenge()]
    (event,) = receive(session, connected())
    assert isinstance(event, Connected)  # the handshake goes on after the answer


def test_auth_challenge_after_connected_is_a_refresh_to_answer() -> None:
    session = PulsarSession(ADDRESS, authenticates=True)
    receive(session, connected())
    challenge = wire(Type.AUTH_CHALLENGE, authChallenge=pb.CommandAuthChallenge())
    assert receive(session, challenge) == [AuthChallenge()]
    assert receive(session, challenge) == [AuthChallenge()]  # each refresh is answered


def test_auth_challenge_without_credentials_fails_the_handshake() -> None:
    session = PulsarSession(ADDRESS)
    challenge = wire(Type.AUTH_CHALLENGE, authChallenge=pb.CommandAuthChallenge())
    (event,) = receive(session, challenge)
    assert isinstance(event, HandshakeFailed)
    assert isinstance(event.error, AuthenticationError)
    assert ADDRESS in str(event.error)
    assert "option authentication" in str(event.error)
    assert receive(session, challenge) == []  # failed once is enough


def test_auth_challenge_without_credentials_after_connected_is_left_to_the_broker(
    session: PulsarSession,
) -> None:
    challenge = wire(Type.AUTH_CHALLENGE, authChallenge=pb.CommandAuthChallenge())
    assert receive(session, challenge) == []


def test_error_during_the_handshake_fails_it() -> None:
    session = PulsarSession(ADDRESS)
    (event,) = receive(session, error(0, pb.AuthenticationError, "bad token"))
    assert isinstance(event, HandshakeFailed)
    assert isinstance(event.error, AuthenticationError)
    assert "bad token" in str(event.error)


def test_error_after_the_handshake_refuses_its_request(session: PulsarSession) -> None:
    (event,) = receive(session, error(5, pb.TopicNotFound, "no such topic"))
    assert isinstance(event, Refusal)
    assert event.request_id == 5
    assert isinstance(event.error, TopicNotFoundError)
    assert "no such topic" in str(event.error)
    (event,) = receive(session, error(6, pb.ServiceNotReady))
    assert isinstance(event, Refusal) and type(event.error) is BrokerError


# -- the connection's frames -----------------------------------------------------------------


def test_ping_is_answered_with_pong(session: PulsarSession) -> None:
    (event,) = receive(session, wire(Type.PING, ping=pb.CommandPing()))
    assert isinstance(event, Write)
    assert decoded(event.data).type == Type.PONG
    assert receive(session, wire(Type.PONG, pong=pb.CommandPong())) == []


def test_the_keepalive_probe_is_a_ping(session: PulsarSession) -> None:
    assert decoded(session.keepalive_probe()).type == Type.PING


def test_success_answers_its_request(session: PulsarSession) -> None:
    success = pb.CommandSuccess(request_id=7)
    assert receive(session, wire(Type.SUCCESS, success=success)) == [Answer(7, success)]


def test_producer_success_answers_or_holds(
    session: PulsarSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="protocols.pulsarwire.session")
    waiting = pb.CommandProducerSuccess(request_id=3, producer_name="p-1", producer_ready=False)
    assert receive(session, wire(Type.PRODUCER_SUCCESS, producer_success=waiting)) == [Hold(3)]
    assert "producer p-1 waits for exclusive access" in caplog.text
    ready = pb.CommandProducerSuccess(request_id=3, producer_name="p-1", last_sequence_id=9)
    (event,) = receive(session, wire(Type.PRODUCER_SUCCESS, producer_success=ready))
    assert event == Answer(3, ready)  # producer_ready defaults to true


def test_lookup_answers_or_refuses(session: PulsarSession) -> None:
    found = pb.CommandLookupTopicResponse(
        request_id=1,
        response=pb.CommandLookupTopicResponse.Connect,
        brokerServiceUrl="pulsar://b:6650",
    )
    assert receive(session, wire(Type.LOOKUP_RESPONSE, lookupTopicResponse=found)) == [
        Answer(1, found)
    ]
    failed = pb.CommandLookupTopicResponse(
        request_id=2,
        response=pb.CommandLookupTopicResponse.Failed,
        error=pb.TopicNotFound,
        message="gone",
    )
    (event,) = receive(session, wire(Type.LOOKUP_RESPONSE, lookupTopicResponse=failed))
    assert isinstance(event, Refusal) and event.request_id == 2
    assert isinstance(event.error, TopicNotFoundError) and "gone" in str(event.error)


def test_partitioned_metadata_answers_or_refuses(session: PulsarSession) -> None:
    Response = pb.CommandPartitionedTopicMetadataResponse
    found = Response(request_id=1, partitions=4, response=Response.Success)
    assert receive(
        session, wire(Type.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=found)
    ) == [Answer(1, found)]
    failed = Response(
        request_id=2, response=Response.Failed, error=pb.AuthorizationError, message="denied"
    )
    (event,) = receive(
        session, wire(Type.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=failed)
    )
    assert isinstance(event, Refusal) and event.request_id == 2
    assert type(event.error) is BrokerError and "AuthorizationError" in str(event.error)


def test_ack_response_answers_or_refuses(session: PulsarSession) -> None:
    ok = pb.CommandAckResponse(consumer_id=1, request_id=4)
    assert receive(session, wire(Type.ACK_RESPONSE, ackResponse=ok)) == [Answer(4, ok)]
    refused = pb.CommandAckResponse(
        consumer_id=1, request_id=5, error=pb.MetadataError, message="bad ack"
    )
    (event,) = receive(session, wire(Type.ACK_RESPONSE, ackResponse=refused))
    assert isinstance(event, Refusal) and event.request_id == 5
    assert "bad ack" in str(event.error)


def test_last_message_id_answers_its_request(session: PulsarSession) -> None:
    response = pb.CommandGetLastMessageIdResponse(
        last_message_id=pb.MessageIdData(ledgerId=3, entryId=9), request_id=8
    )
    data = wire(Type.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response)
    assert receive(session, data) == [Answer(8, response)]


def test_an_unknown_command_is_logged_and_ignored(
    session: PulsarSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="protocols.pulsarwire.session")
    # A command this client has no handler for (it does not follow migrations).
    migrated = pb.CommandTopicMigrated(
        resource_id=1, resource_type=pb.CommandTopicMigrated.Producer
    )
    data = wire(Type.TOPIC_MIGRATED, topicMigrated=migrated)
    success = pb.CommandSuccess(request_id=1)
    assert receive(session, data + wire(Type.SUCCESS, success=success)) == [Answer(1, success)]
    assert f"ignoring TOPIC_MIGRATED from {ADDRESS}" in caplog.text


# -- a producer's frames ---------------------------------------------------------------------


def test_receipts_and_send_errors_go_to_their_producer(session: PulsarSession) -> None:
    one, two = Producer(), Producer()
    session.producers.update({1: one, 2: two})
    receipt = pb.CommandSendReceipt(
        producer_id=2, sequence_id=5, message_id=pb.MessageIdData(ledgerId=1, entryId=2)
    )
    failure = pb.CommandSendError(
        producer_id=1, sequence_id=6, error=pb.ChecksumError, message="corrupt"
    )
    data = wire(Type.SEND_RECEIPT, send_receipt=receipt) + wire(Type.SEND_ERROR, send_error=failure)
    assert receive(session, data) == []
    assert (one.receipts, one.errors) == ([], [failure])
    assert (two.receipts, two.errors) == ([receipt], [])


def test_frames_for_an_unknown_producer_are_dropped(session: PulsarSession) -> None:
    receipt = pb.CommandSendReceipt(producer_id=9, sequence_id=5)
    assert receive(session, wire(Type.SEND_RECEIPT, send_receipt=receipt)) == []


def test_close_producer_unregisters_and_tells_it(session: PulsarSession) -> None:
    producer = Producer()
    session.producers[1] = producer
    close = pb.CommandCloseProducer(producer_id=1, request_id=0)
    receipt = pb.CommandSendReceipt(producer_id=1, sequence_id=5)
    data = wire(Type.CLOSE_PRODUCER, close_producer=close) + wire(
        Type.SEND_RECEIPT, send_receipt=receipt
    )
    assert receive(session, data) == []
    (closed,) = producer.closed
    assert str(closed) == f"{ADDRESS} closed producer 1"
    assert session.producers == {}
    assert producer.receipts == []  # unregistered: later frames do not reach it


# -- a consumer's frames ---------------------------------------------------------------------


def test_messages_go_to_their_consumer(session: PulsarSession) -> None:
    one, two = Consumer(), Consumer()
    session.consumers.update({1: one, 2: two})
    assert receive(session, message(2, b"a") + message(1, b"b") + message(3, b"x")) == []
    assert [f.payload for f in one.messages] == [b"b"]
    assert [f.payload for f in two.messages] == [b"a"]
    (frame,) = two.messages
    assert frame.command.message.consumer_id == 2
    assert frame.metadata is not None and frame.metadata.producer_name == "p"


def test_close_consumer_unregisters_and_tells_it(session: PulsarSession) -> None:
    consumer = Consumer()
    session.consumers[4] = consumer
    close = pb.CommandCloseConsumer(consumer_id=4, request_id=0)
    data = wire(Type.CLOSE_CONSUMER, close_consumer=close) + message(4, b"a")
    assert receive(session, data) == []
    (closed,) = consumer.closed
    assert str(closed) == f"{ADDRESS} closed consumer 4"
    assert session.consumers == {}
    assert consumer.messages == []


def test_active_consumer_change_and_end_of_topic_reach_the_consumer(
    session: PulsarSession,
) -> None:
    consumer = Consumer()
    session.consumers[4] = consumer
    change = pb.CommandActiveConsumerChange
    data = (
        wire(
            Type.ACTIVE_CONSUMER_CHANGE,
            active_consumer_change=change(consumer_id=4, is_active=True),
        )
        + wire(
            Type.ACTIVE_CONSUMER_CHANGE,
            active_consumer_change=change(consumer_id=4, is_active=False),
        )
        + wire(Type.ACTIVE_CONSUMER_CHANGE, active_consumer_change=change(consumer_id=5))
        + wire(
            Type.REACHED_END_OF_TOPIC,
            reachedEndOfTopic=pb.CommandReachedEndOfTopic(consumer_id=4),
        )
    )
    assert receive(session, data) == []
    assert consumer.active == [True, False]
    assert consumer.ended == 1


# -- the stream ------------------------------------------------------------------------------


def test_frames_split_across_reads(session: PulsarSession) -> None:
    consumer = Consumer()
    session.consumers[1] = consumer
    success = pb.CommandSuccess(request_id=2)
    stream = message(1, b"first") + wire(Type.SUCCESS, success=success) + message(1, b"last")
    events: list[object] = []
    for i in range(len(stream)):
        events += receive(session, stream[i : i + 1])
        if i < len(message(1, b"first")) - 1:
            assert consumer.messages == []  # not a whole frame yet
    assert events == [Answer(2, success)]
    assert [f.payload for f in consumer.messages] == [b"first", b"last"]
    session.receive_eof()  # nothing left over


def test_events_come_as_the_frames_are_routed(session: PulsarSession) -> None:
    """The connection acts on each event before the next frame is routed: an answer then
    a dispatch in one read reach the request before the consumer."""
    consumer = Consumer()
    session.consumers[1] = consumer
    success = pb.CommandSuccess(request_id=2)
    events = session.receive_data(wire(Type.SUCCESS, success=success) + message(1, b"m"))
    assert next(events) == Answer(2, success)
    assert consumer.messages == []
    assert list(events) == []
    assert len(consumer.messages) == 1


def test_eof_inside_a_frame_is_a_truncated_frame(session: PulsarSession) -> None:
    data = wire(Type.SUCCESS, success=pb.CommandSuccess(request_id=2))
    assert receive(session, data[:-1]) == []
    with pytest.raises(TruncatedFrameError, match=f"stream ended after {len(data) - 1} bytes"):
        session.receive_eof()


def test_connection_lost_tells_every_producer_and_consumer(session: PulsarSession) -> None:
    producer, consumer = Producer(), Consumer()
    session.producers[1] = producer
    session.consumers[1] = consumer
    error = ConnectionClosedError("gone")
    session.connection_lost(error)
    assert producer.closed == [error]
    assert consumer.closed == [error]
    assert (session.producers, session.consumers) == ({}, {})
