"""A scripted Pulsar server for tests: real sockets, the real frame codec, scripted answers.

It behaves as a healthy one-broker cluster by default (CONNECTED, partition metadata,
LOOKUP -> Connect to itself, PRODUCER_SUCCESS, a SEND_RECEIPT for every SEND; SUCCESS to
SUBSCRIBE, SEEK, UNSUBSCRIBE and the closes, ACK_RESPONSE to an ACK with a request id,
``last_message_id`` to GET_LAST_MESSAGE_ID, the ``namespace_topics`` of the namespace and
domains asked to GET_TOPICS_OF_NAMESPACE, or ERROR ``namespace_topics_error``) and records
every frame it receives. Tests push dispatches and consumer events with
``consumer_connection(id).write(...)``. A test replaces the handler of a command type to
script another answer, a misbehaviour (garbage, a bad checksum, a truncated frame, an
oversized frame header, CLOSE_PRODUCER) or silence (``never_answer``)::

    server.handlers[Type.LOOKUP] = lambda conn, cmd: conn.send(
        lookup_redirect(cmd.lookupTopic.request_id, other.url, authoritative=True)
    )

Authentication: with ``server.authenticate = check``, CONNECT's (and AUTH_RESPONSE's)
``check(auth_method_name, auth_data)`` must be true, or the server answers ERROR
AuthenticationError and closes, as a broker does. ``challenge_on_connect`` answers CONNECT
with AUTH_CHALLENGE (CONNECTED follows a good AUTH_RESPONSE); ``conn.challenge()`` sends the
broker's "refresh" challenge on a connected connection.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
from collections.abc import Callable
from typing import Any

import attrs

from protocols.pulsarwire.framing import (
    FrameDecoder,
    encode_command,
    encode_payload_command,
)
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

Type = pb.BaseCommand.Type
LookupType = pb.CommandLookupTopicResponse.LookupType
WAIT = 2.0  # seconds: the longest a test waits for the server to see something


# -- answers ------------------------------------------------------------------------------


def connected() -> pb.BaseCommand:
    answer = pb.CommandConnected(server_version="scripted-pulsar", protocol_version=21)
    return pb.BaseCommand(type=Type.CONNECTED, connected=answer)


def lookup_connect(
    request_id: int, url: str, *, authoritative: bool = True, proxy: bool = False
) -> pb.BaseCommand:
    """``url`` serves the topic (it is given as both the plain and the TLS URL)."""
    return pb.BaseCommand(
        type=Type.LOOKUP_RESPONSE,
        lookupTopicResponse=pb.CommandLookupTopicResponse(
            request_id=request_id,
            response=LookupType.Connect,
            brokerServiceUrl=url,
            brokerServiceUrlTls=url,
            authoritative=authoritative,
            proxy_through_service_url=proxy,
        ),
    )


def lookup_redirect(request_id: int, url: str, *, authoritative: bool) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.LOOKUP_RESPONSE,
        lookupTopicResponse=pb.CommandLookupTopicResponse(
            request_id=request_id,
            response=LookupType.Redirect,
            brokerServiceUrl=url,
            brokerServiceUrlTls=url,
            authoritative=authoritative,
        ),
    )


def lookup_failed(request_id: int, error: pb.ServerError.ValueType, message: str) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.LOOKUP_RESPONSE,
        lookupTopicResponse=pb.CommandLookupTopicResponse(
            request_id=request_id, response=LookupType.Failed, error=error, message=message
        ),
    )


def partitioned_metadata(request_id: int, partitions: int = 0) -> pb.BaseCommand:
    # With ``response`` Success, as a broker answers (the official C++ client needs it).
    return pb.BaseCommand(
        type=Type.PARTITIONED_METADATA_RESPONSE,
        partitionMetadataResponse=pb.CommandPartitionedTopicMetadataResponse(
            request_id=request_id,
            partitions=partitions,
            response=pb.CommandPartitionedTopicMetadataResponse.Success,
        ),
    )


def topics_of_namespace_response(
    request_id: int,
    topics: list[str],
    *,
    filtered: bool = False,
    topics_hash: str | None = None,
    changed: bool = True,
) -> pb.BaseCommand:
    response = pb.CommandGetTopicsOfNamespaceResponse(
        request_id=request_id, topics=topics, filtered=filtered, changed=changed
    )
    if topics_hash is not None:
        response.topics_hash = topics_hash
    return pb.BaseCommand(
        type=Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=response
    )


def producer_success(
    request_id: int, producer_name: str, last_sequence_id: int = -1
) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.PRODUCER_SUCCESS,
        producer_success=pb.CommandProducerSuccess(
            request_id=request_id,
            producer_name=producer_name,
            last_sequence_id=last_sequence_id,
            producer_ready=True,
        ),
    )


def send_receipt(send: pb.CommandSend, ledger_id: int, entry_id: int) -> pb.BaseCommand:
    highest = send.highest_sequence_id if send.HasField("highest_sequence_id") else None
    receipt = pb.CommandSendReceipt(
        producer_id=send.producer_id,
        sequence_id=send.sequence_id,
        message_id=pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id),
    )
    if highest is not None:
        receipt.highest_sequence_id = highest
    return pb.BaseCommand(type=Type.SEND_RECEIPT, send_receipt=receipt)


def error(request_id: int, code: pb.ServerError.ValueType, message: str) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.ERROR,
        error=pb.CommandError(request_id=request_id, error=code, message=message),
    )


# The broker's request id -1 (as uint64): an ERROR that answers the handshake, no request.
NO_REQUEST_ID = 2**64 - 1


def auth_challenge(method: str, data: bytes = b"refresh") -> pb.BaseCommand:
    """AUTH_CHALLENGE; ``b"refresh"`` is the broker's request for fresh credentials."""
    return pb.BaseCommand(
        type=Type.AUTH_CHALLENGE,
        authChallenge=pb.CommandAuthChallenge(
            server_version="scripted-pulsar",
            protocol_version=21,
            challenge=pb.AuthData(auth_method_name=method, auth_data=data),
        ),
    )


def success(request_id: int) -> pb.BaseCommand:
    return pb.BaseCommand(type=Type.SUCCESS, success=pb.CommandSuccess(request_id=request_id))


def close_producer(producer_id: int, request_id: int = 0) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.CLOSE_PRODUCER,
        close_producer=pb.CommandCloseProducer(producer_id=producer_id, request_id=request_id),
    )


def close_consumer(consumer_id: int, request_id: int = 0) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.CLOSE_CONSUMER,
        close_consumer=pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=request_id),
    )


def active_consumer_change(consumer_id: int, is_active: bool) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.ACTIVE_CONSUMER_CHANGE,
        active_consumer_change=pb.CommandActiveConsumerChange(
            consumer_id=consumer_id, is_active=is_active
        ),
    )


def reached_end_of_topic(consumer_id: int) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.REACHED_END_OF_TOPIC,
        reachedEndOfTopic=pb.CommandReachedEndOfTopic(consumer_id=consumer_id),
    )


def ack_response(
    consumer_id: int,
    request_id: int,
    code: pb.ServerError.ValueType | None = None,
    message: str = "",
) -> pb.BaseCommand:
    response = pb.CommandAckResponse(consumer_id=consumer_id, request_id=request_id)
    if code is not None:
        response.error = code
        response.message = message
    return pb.BaseCommand(type=Type.ACK_RESPONSE, ackResponse=response)


def last_message_id_response(request_id: int, last: pb.MessageIdData) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=Type.GET_LAST_MESSAGE_ID_RESPONSE,
        getLastMessageIdResponse=pb.CommandGetLastMessageIdResponse(
            request_id=request_id, last_message_id=last
        ),
    )


def message_frame(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    values: list[bytes],
    *,
    batched: bool = False,
    ack_set: list[int] | None = None,
    redelivery_count: int = 0,
) -> bytes:
    """A MESSAGE frame dispatching one entry: one message (``values`` of one), or a batch."""
    command = pb.BaseCommand(
        type=Type.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=consumer_id,
            message_id=pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id),
            redelivery_count=redelivery_count,
            ack_set=ack_set or [],
        ),
    )
    metadata = pb.MessageMetadata(producer_name="scripted", sequence_id=0, publish_time=1)
    if not batched:
        (payload,) = values
        return encode_payload_command(command, metadata.SerializeToString(), payload)
    metadata.num_messages_in_batch = len(values)
    records = []
    for value in values:
        single = pb.SingleMessageMetadata(payload_size=len(value)).SerializeToString()
        records.append(struct.pack(">I", len(single)) + single + value)
    return encode_payload_command(command, metadata.SerializeToString(), b"".join(records))


# -- misbehaviours: bytes no broker should send -------------------------------------------

# total_size 8, then 8 bytes whose "command_size" (0x6e6f6e73) overflows the frame.
GARBAGE = struct.pack(">I", 8) + b"nonsense"

# A frame header announcing 2 GiB: over any frame size limit.
OVERSIZED_HEADER = struct.pack(">II", 0x7FFFFFFF, 4)


def bad_checksum(command: pb.BaseCommand) -> bytes:
    """``command`` as a payload frame whose CRC32C does not match (one payload bit flipped)."""
    frame = bytearray(encode_payload_command(command, b"", b"payload"))
    frame[-1] ^= 0x01
    return bytes(frame)


def truncated(command: pb.BaseCommand) -> bytes:
    """The first half of ``command``'s frame: the stream must not end there."""
    frame = encode_command(command)
    return frame[: len(frame) // 2]


# -- the server ---------------------------------------------------------------------------

Handler = Callable[["ServerConnection", pb.BaseCommand], None]


@attrs.define
class Received:
    """One frame the server received, and on which connection."""

    connection: ServerConnection
    command: pb.BaseCommand
    metadata: pb.MessageMetadata | None
    payload: bytes | None


class ServerConnection:
    """The server's end of one client connection."""

    def __init__(self, server: ScriptedPulsarServer, index: int, writer: asyncio.StreamWriter):
        self.server = server
        self.index = index
        self.writer = writer
        self.connect: pb.CommandConnect | None = None  # the client's handshake
        self.connected = False  # CONNECTED sent

    def challenge(self, data: bytes = b"refresh") -> None:
        """Send AUTH_CHALLENGE for the method the client's CONNECT named."""
        assert self.connect is not None, "no CONNECT on this connection yet"
        self.send(auth_challenge(self.connect.auth_method_name, data))

    def send(self, *commands: pb.BaseCommand) -> None:
        """Write commands, all in one write (so the client reads them in one chunk)."""
        self.write(b"".join(encode_command(c) for c in commands))

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def close(self) -> None:
        """Close after what was written (a clean end of stream)."""
        self.writer.close()

    def abort(self) -> None:
        self.writer.transport.abort()


class ScriptedPulsarServer:
    """An asyncio server on 127.0.0.1 that answers Pulsar frames per ``handlers``."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, name: str = "broker") -> None:
        self.name = name
        self.ssl_context = ssl_context
        self.partitions = 0  # what PARTITIONED_METADATA answers
        self.last_sequence_id = -1  # what PRODUCER_SUCCESS answers
        self.last_message_id = pb.MessageIdData(ledgerId=1, entryId=0)  # GET_LAST_MESSAGE_ID
        # What GET_TOPICS_OF_NAMESPACE lists: full names, partitions by their own (as a
        # broker stores them); it answers those of the namespace and domains asked.
        self.namespace_topics: list[str] = []
        # (code, message): GET_TOPICS_OF_NAMESPACE answers this ERROR instead.
        self.namespace_topics_error: tuple[pb.ServerError.ValueType, str] | None = None
        self.received: list[Received] = []
        # (auth_method_name, auth_data) -> accepted? None: anything goes (no authentication)
        self.authenticate: Callable[[str, bytes], bool] | None = None
        self.challenge_on_connect = False  # AUTH_CHALLENGE before CONNECTED
        self.connections: list[ServerConnection] = []
        self.handlers: dict[int, Handler] = {
            Type.CONNECT: self.answer_connect,
            Type.AUTH_RESPONSE: self.answer_auth_response,
            Type.PING: lambda conn, _: conn.send(
                pb.BaseCommand(type=Type.PONG, pong=pb.CommandPong())
            ),
            Type.PARTITIONED_METADATA: self.answer_partitioned_metadata,
            Type.LOOKUP: self.answer_lookup,
            Type.PRODUCER: self.answer_producer,
            Type.SEND: self.answer_send,
            Type.CLOSE_PRODUCER: lambda conn, cmd: conn.send(
                success(cmd.close_producer.request_id)
            ),
            Type.SUBSCRIBE: lambda conn, cmd: conn.send(success(cmd.subscribe.request_id)),
            Type.ACK: self.answer_ack,
            Type.SEEK: lambda conn, cmd: conn.send(success(cmd.seek.request_id)),
            Type.UNSUBSCRIBE: lambda conn, cmd: conn.send(success(cmd.unsubscribe.request_id)),
            Type.CLOSE_CONSUMER: lambda conn, cmd: conn.send(
                success(cmd.close_consumer.request_id)
            ),
            Type.GET_LAST_MESSAGE_ID: lambda conn, cmd: conn.send(
                last_message_id_response(cmd.getLastMessageId.request_id, self.last_message_id)
            ),
            Type.GET_TOPICS_OF_NAMESPACE: self.answer_topics_of_namespace,
        }
        self._entry_ids = itertools.count()
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> ScriptedPulsarServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in self.connections:
            connection.abort()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        scheme = "pulsar+ssl" if self.ssl_context is not None else "pulsar"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- what it received ---------------------------------------------------------------

    def commands(self, type_: int) -> list[Received]:
        return [r for r in self.received if r.command.type == type_]

    def consumer_connection(self, consumer_id: int) -> ServerConnection:
        """The connection of the latest SUBSCRIBE of ``consumer_id``: where to dispatch."""
        (*_, last) = (
            r
            for r in self.commands(Type.SUBSCRIBE)
            if r.command.subscribe.consumer_id == consumer_id
        )
        return last.connection

    async def wait_for(self, type_: int, count: int = 1) -> list[Received]:
        """Wait until ``count`` frames of ``type_`` arrived; return all of that type."""
        async with asyncio.timeout(WAIT):
            while len(self.commands(type_)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.commands(type_)

    # -- the default, healthy answers ---------------------------------------------------

    def answer_connect(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        connect = conn.connect = command.connect
        if not self._authenticated(conn, connect.auth_method_name, connect.auth_data):
            return
        if self.challenge_on_connect:
            conn.send(auth_challenge(connect.auth_method_name, b"challenge"))
            return
        conn.connected = True
        conn.send(connected())

    def answer_auth_response(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        response = command.authResponse.response
        accepted = self._authenticated(conn, response.auth_method_name, response.auth_data)
        if accepted and not conn.connected:  # the answer to challenge_on_connect
            conn.connected = True
            conn.send(connected())

    def _authenticated(self, conn: ServerConnection, method: str, data: bytes) -> bool:
        if self.authenticate is None or self.authenticate(method, data):
            return True
        conn.send(error(NO_REQUEST_ID, pb.AuthenticationError, "Unable to authenticate"))
        conn.close()
        return False

    def answer_partitioned_metadata(self, conn: ServerConnection, cmd: pb.BaseCommand) -> None:
        conn.send(partitioned_metadata(cmd.partitionMetadata.request_id, self.partitions))

    def answer_lookup(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        conn.send(lookup_connect(command.lookupTopic.request_id, self.url))

    def answer_topics_of_namespace(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        request = command.getTopicsOfNamespace
        if self.namespace_topics_error is not None:
            code, message = self.namespace_topics_error
            conn.send(error(request.request_id, code, message))
            return
        domains = {
            pb.CommandGetTopicsOfNamespace.PERSISTENT: ("persistent",),
            pb.CommandGetTopicsOfNamespace.NON_PERSISTENT: ("non-persistent",),
            pb.CommandGetTopicsOfNamespace.ALL: ("persistent", "non-persistent"),
        }[request.mode]
        listed = [
            name
            for name in self.namespace_topics
            if any(name.startswith(f"{d}://{request.namespace}/") for d in domains)
        ]
        conn.send(topics_of_namespace_response(request.request_id, listed))

    def answer_producer(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        producer = command.producer
        name = producer.producer_name or f"{self.name}-{producer.producer_id}"
        conn.send(producer_success(producer.request_id, name, self.last_sequence_id))

    def answer_send(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        conn.send(send_receipt(command.send, ledger_id=1, entry_id=next(self._entry_ids)))

    def answer_ack(self, conn: ServerConnection, command: pb.BaseCommand) -> None:
        ack = command.ack
        if ack.HasField("request_id"):  # the client asked for a receipt
            conn.send(ack_response(ack.consumer_id, ack.request_id))

    # -- serving ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = ServerConnection(self, len(self.connections), writer)
        self.connections.append(connection)
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    self.received.append(
                        Received(connection, frame.command, frame.metadata, frame.payload)
                    )
                    self._changed.set()
                    handler = self.handlers.get(frame.command.type)
                    if handler is not None:
                        handler(connection, frame.command)
        except (ConnectionError, ssl.SSLError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()


def never_answer(_: ServerConnection, __: Any) -> None:
    """A handler that leaves the request unanswered."""
