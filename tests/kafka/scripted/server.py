"""A scripted Kafka server for tests: real sockets, the real wire format, scripted answers.

Requests are decoded and answers encoded with kafka-python's protocol classes (generated
from Kafka's own JSON schemas), at the version in each request's header: what crosses the
socket is what a broker reads and writes. By default it is a healthy one-broker cluster:

- ApiVersions advertises the ranges of a Kafka 3.x broker (``API_VERSIONS``); a request
  above them gets UNSUPPORTED_VERSION at v0, as Kafka answers.
- With ``mechanisms`` set, the listener requires SASL as Kafka's SaslServerAuthenticator
  does: before the handshake only ApiVersions and SaslHandshake are served, after it only
  SaslAuthenticate, until the exchange succeeds; any other request closes the connection
  unanswered. A mechanism not offered gets UNSUPPORTED_SASL_MECHANISM (33) with the list
  of those offered; bad credentials get SASL_AUTHENTICATION_FAILED (58) with Kafka's error
  message. Either failure closes the connection after the answer, which (as Kafka's
  ``connection.failed.authentication.delay.ms``) is sent ``failed_authentication_delay``
  seconds late. PLAIN and SCRAM-SHA-256/512 run server side against ``users``.
- Metadata names one broker (itself) leading every partition; unknown topics are created
  with ``default_partitions`` partitions. InitProducerId hands out producer ids. Produce
  decodes the record batches (CRC checked), stores the records per partition and answers
  each partition's base offset.

Every request is recorded (``received``) with its API key, version and decoded body, and
the connection's SASL state when it arrived. A request this server cannot decode, or at a
version it does not advertise, closes the connection (Kafka's InvalidRequestException). A
test replaces the handler of an API key to script another answer, or silence::

    server.handlers[ApiKey.Produce] = never_answer
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import re
import secrets
import ssl
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any

import attrs
from kafka.protocol.admin import CreatePartitionsRequest, DeleteRecordsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetDeleteRequest
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.record import MemoryRecords

WAIT = 2.0  # seconds: the longest a test waits for the server to see something
NODE_ID = 1

# Kafka error codes the server answers.
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
SASL_AUTHENTICATION_FAILED = 58

# Close to what a Kafka 3.7/3.8 broker advertises, for the APIs a client commonly uses.
# The server answers those it has a handler for and closes the connection on the others.
API_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.Produce: (0, 11),
    ApiKey.Fetch: (0, 16),
    ApiKey.ListOffsets: (0, 8),
    ApiKey.Metadata: (0, 12),
    ApiKey.OffsetCommit: (0, 9),
    ApiKey.OffsetFetch: (0, 9),
    ApiKey.FindCoordinator: (0, 5),
    ApiKey.JoinGroup: (0, 9),
    ApiKey.Heartbeat: (0, 4),
    ApiKey.LeaveGroup: (0, 5),
    ApiKey.SyncGroup: (0, 5),
    ApiKey.DescribeGroups: (0, 5),
    ApiKey.ListGroups: (0, 5),
    ApiKey.SaslHandshake: (0, 1),
    ApiKey.ApiVersions: (0, 3),
    ApiKey.CreateTopics: (0, 7),
    ApiKey.DeleteTopics: (0, 6),
    ApiKey.InitProducerId: (0, 4),
    ApiKey.SaslAuthenticate: (0, 2),
    ApiKey.DeleteRecords: (0, 2),
    ApiKey.CreatePartitions: (0, 3),
    ApiKey.OffsetDelete: (0, 0),
}

# The requests this server decodes: API key -> kafka-python's request class.
REQUEST_CLASSES: dict[int, Any] = {
    cls.API_KEY: cls
    for cls in (
        ApiVersionsRequest,
        SaslHandshakeRequest,
        SaslAuthenticateRequest,
        MetadataRequest,
        InitProducerIdRequest,
        ProduceRequest,
        FindCoordinatorRequest,
        CreatePartitionsRequest,
        DeleteRecordsRequest,
        OffsetDeleteRequest,
        FetchRequest,
        ListOffsetsRequest,
    )
}

# The only requests Kafka serves on a SASL listener before the handshake.
_PRE_HANDSHAKE = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake})
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE = struct.Struct(">i")
MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class SaslState(Enum):
    """Where a connection is in Kafka's SaslServerAuthenticator."""

    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate expected
    AUTHENTICATED = "authenticated"  # every API served
    FAILED = "failed"  # answering the failure, then closing


# -- SASL, server side ----------------------------------------------------------------------


class SaslFailure(Exception):
    """Authentication failed; the message is what Kafka puts in the answer's error_message."""


class SaslServer:
    """One server side of one exchange: ``step(client message)`` -> (answer, complete)."""

    mechanism: str

    def step(self, message: bytes) -> tuple[bytes, bool]:
        raise NotImplementedError


class PlainServer(SaslServer):
    """Kafka's PlainSaslServer with the default callback handler (JAAS user_<name>)."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None

    def step(self, message: bytes) -> tuple[bytes, bool]:
        tokens = message.split(b"\0")
        if len(tokens) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = (t.decode("utf-8", "replace") for t in tokens)
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = username
        return b"", True


@attrs.frozen
class ScramCredential:
    """What a broker stores for a SCRAM user: never the password."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def derive(cls, hash_name: str, password: str, iterations: int = 4096) -> ScramCredential:
        salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.new(hash_name, client_key).digest(),
            server_key=hmac.new(salted, b"Server Key", hash_name).digest(),
        )


_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_CLIENT_FIRST = re.compile(r"n,(?:a=[^,]*)?,n=([^,]*),r=([\x21-\x2b\x2d-\x7e]+)(?:,.*)?")
_CLIENT_FINAL = re.compile(r"c=([^,]*),r=([^,]*)(?:,[a-zA-Z]=[^,]*)*?,p=([A-Za-z0-9+/=]+)")


class ScramServer(SaslServer):
    """Kafka's ScramSaslServer (RFC 5802 without channel binding), two rounds."""

    def __init__(self, mechanism: str, credentials: Mapping[str, ScramCredential]) -> None:
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._credentials = credentials
        self._round = 0
        self.username: str | None = None
        # Set by the client-first message:
        self._credential: ScramCredential | None = None
        self._client_first_bare = self._server_first_text = self._nonce = ""

    def step(self, message: bytes) -> tuple[bytes, bool]:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure(self._invalid()) from None
        self._round += 1
        if self._round == 1:
            return self._server_first(text), False
        if self._round == 2:
            return self._server_final(text), True
        raise SaslFailure(self._invalid())

    def _invalid(self) -> str:
        # Kafka's answer to a SaslException from the SCRAM server, whatever its cause.
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    def _server_first(self, client_first: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(client_first)
        if match is None:
            raise SaslFailure(self._invalid())
        saslname, client_nonce = match.groups()
        username = saslname.replace("=2C", ",").replace("=3D", "=")
        credential = self._credential = self._credentials.get(username)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        self.username = username
        self._client_first_bare = client_first[client_first.index("n=", 2) :]
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first_text = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first_text.encode()

    def _server_final(self, client_final: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(client_final)
        if match is None or match.group(2) != self._nonce or match.group(1) != "biws":
            raise SaslFailure(self._invalid())
        without_proof = client_final[: client_final.rindex(",p=")]
        auth = f"{self._client_first_bare},{self._server_first_text},{without_proof}".encode()
        credential = self._credential
        assert credential is not None  # round 1 set it, or failed
        signature = hmac.new(credential.stored_key, auth, self._hash).digest()
        proof = base64.b64decode(match.group(3))
        if len(proof) != len(signature):
            raise SaslFailure(self._invalid())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise SaslFailure(self._invalid())
        server_signature = hmac.new(credential.server_key, auth, self._hash).digest()
        return b"v=" + base64.b64encode(server_signature)


# -- what the server received -----------------------------------------------------------


@attrs.define
class Received:
    """One request the server received, on which connection, in which SASL state."""

    connection: ServerConnection
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any  # kafka-python's decoded request; None for an API this server cannot decode
    state: SaslState  # the connection's SASL state when it arrived
    refused: bool = False  # the server closed the connection instead of answering

    @property
    def name(self) -> str:
        try:
            return str(ApiKey(self.api_key).name)
        except ValueError:
            return f"ApiKey{self.api_key}"

    @property
    def sasl_bytes(self) -> bytes | None:
        """The SASL token a SaslAuthenticate request carried."""
        if self.api_key != ApiKey.SaslAuthenticate or self.request is None:
            return None
        return bytes(self.request.auth_bytes)


@attrs.frozen
class StoredRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    producer_id: int
    base_sequence: int


# -- the server -------------------------------------------------------------------------

Handler = Callable[["ServerConnection", Received], None]


class ServerConnection:
    """The server's end of one client connection."""

    def __init__(
        self, server: ScriptedKafkaServer, index: int, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.index = index
        self.writer = writer
        self.state = SaslState.AUTHENTICATED if not server.mechanisms else SaslState.HANDSHAKE
        self.sasl: SaslServer | None = None
        self.principal: str | None = None  # the authenticated username
        self.closing_answer: bytes | None = None  # sent (late) before closing

    def answer(self, received: Received, response: Any, version: int | None = None) -> None:
        """Write ``response`` for ``received``, at the request's version (or ``version``)."""
        self.write(encode_response(response, received, version))

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def close(self) -> None:
        """Close after what was written (a clean end of stream)."""
        self.writer.close()

    def abort(self) -> None:
        self.writer.transport.abort()


def encode_response(response: Any, received: Received, version: int | None = None) -> bytes:
    """``response`` framed with its header, at the request's version (or ``version``)."""
    response.API_VERSION = received.version if version is None else version
    response.with_header(correlation_id=received.correlation_id)
    return bytes(response.encode(header=True, framed=True))


def never_answer(_: ServerConnection, __: Received) -> None:
    """A handler that leaves the request unanswered."""


class ScriptedKafkaServer:
    """An asyncio server on 127.0.0.1 that answers Kafka requests per ``handlers``."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None = None,
        *,
        mechanisms: Iterable[str] = (),
        users: Mapping[str, str] | None = None,
        topics: Mapping[str, int] | None = None,
        default_partitions: int = 1,
        failed_authentication_delay: float = 0.1,
        advertised_host: str = "127.0.0.1",
        api_versions: Mapping[int, tuple[int, int]] = API_VERSIONS,
    ) -> None:
        self.ssl_context = ssl_context
        self.mechanisms = tuple(mechanisms)
        self._plain_users: dict[str, str] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {}
        self.set_users(users or {})
        self.topics: dict[str, int] = dict(topics or {})
        self.default_partitions = default_partitions
        self.failed_authentication_delay = failed_authentication_delay
        self.advertised_host = advertised_host
        self.api_versions = dict(api_versions)
        self.cluster_id = "scripted-kafka"
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.logs: dict[tuple[str, int], list[StoredRecord]] = {}
        self.received: list[Received] = []
        self.errors: list[Exception] = []  # the server's own failures: a test should see none
        self.connections: list[ServerConnection] = []
        self.handlers: dict[int, Handler] = {
            ApiKey.ApiVersions: self.answer_api_versions,
            ApiKey.SaslHandshake: self.answer_sasl_handshake,
            ApiKey.SaslAuthenticate: self.answer_sasl_authenticate,
            ApiKey.Metadata: self.answer_metadata,
            ApiKey.InitProducerId: self.answer_init_producer_id,
            ApiKey.Produce: self.answer_produce,
        }
        self._producer_ids = itertools.count(1000)
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None

    def set_users(self, users: Mapping[str, str]) -> None:
        """Username -> password, for the exchanges that start from now on."""
        self._plain_users = dict(users)
        # SCRAM credentials as a broker stores them (salted, iterated): no passwords.
        self._scram = {
            mechanism: {
                name: ScramCredential.derive(_HASHES[mechanism], password)
                for name, password in users.items()
            }
            for mechanism in self.mechanisms
            if mechanism in _HASHES
        }

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> ScriptedKafkaServer:
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
        scheme = "kafka+ssl" if self.ssl_context is not None else "kafka"
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- what it received ---------------------------------------------------------------

    def requests(self, api_key: int | None = None) -> list[Received]:
        return [r for r in self.received if api_key is None or r.api_key == api_key]

    def names(self, connection: int = 0) -> list[str]:
        """The API names of the requests of one connection, in order."""
        return [r.name for r in self.received if r.connection.index == connection]

    def sasl_tokens(self) -> list[bytes]:
        """The SASL tokens of every SaslAuthenticate request, in order."""
        return [
            r.sasl_bytes for r in self.requests(ApiKey.SaslAuthenticate) if r.sasl_bytes is not None
        ]

    def values(self, topic: str, partition: int = 0) -> list[bytes | None]:
        return [r.value for r in self.logs.get((topic, partition), [])]

    async def wait_for(self, api_key: int, count: int = 1) -> list[Received]:
        """Wait until ``count`` requests of ``api_key`` arrived; return all of them."""
        async with asyncio.timeout(WAIT):
            while len(self.requests(api_key)) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.requests(api_key)

    # -- the default answers ------------------------------------------------------------

    def answer_api_versions(self, conn: ServerConnection, received: Received) -> None:
        low, high = self.api_versions[ApiKey.ApiVersions]
        keys = [
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(self.api_versions.items())
        ]
        if not low <= received.version <= high:
            # Kafka answers a version it does not know at v0, with its ranges.
            response = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=keys)
            conn.answer(received, response, version=0)
            return
        conn.answer(received, ApiVersionsResponse(error_code=NONE, api_keys=keys))

    def answer_sasl_handshake(self, conn: ServerConnection, received: Received) -> None:
        mechanism = received.request.mechanism
        if not self.mechanisms:  # a listener without SASL (KafkaApis.handleSaslHandshake)
            conn.answer(
                received, SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])
            )
            return
        if conn.state is not SaslState.HANDSHAKE:
            self._refuse(conn, received)
            return
        if mechanism not in self.mechanisms:
            response = SaslHandshakeResponse(
                error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=list(self.mechanisms)
            )
            self._fail(conn, encode_response(response, received))
            return
        # After v0 Kafka reads raw SASL tokens, which this server does not speak: without a
        # SaslServer, whatever comes next closes the connection.
        conn.sasl = None
        if received.version >= 1:
            conn.sasl = (
                PlainServer(self._plain_users)
                if mechanism == "PLAIN"
                else ScramServer(mechanism, self._scram[mechanism])
            )
        conn.state = SaslState.AUTHENTICATE
        conn.answer(
            received, SaslHandshakeResponse(error_code=NONE, mechanisms=list(self.mechanisms))
        )

    def answer_sasl_authenticate(self, conn: ServerConnection, received: Received) -> None:
        sasl = conn.sasl
        if conn.state is not SaslState.AUTHENTICATE or sasl is None:
            self._refuse(conn, received)
            return
        try:
            token, complete = sasl.step(bytes(received.request.auth_bytes))
        except SaslFailure as failure:
            response = SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED, error_message=str(failure), auth_bytes=b""
            )
            self._fail(conn, encode_response(response, received))
            return
        if complete:
            conn.state = SaslState.AUTHENTICATED
            conn.principal = getattr(sasl, "username", None)
        conn.answer(
            received,
            SaslAuthenticateResponse(
                error_code=NONE, error_message=None, auth_bytes=token, session_lifetime_ms=0
            ),
        )

    def answer_metadata(self, conn: ServerConnection, received: Received) -> None:
        request = received.request
        if request.topics is None:
            names = sorted(self.topics)
        else:
            names = [t.name for t in request.topics if t.name is not None]
        topics = []
        for name in names:
            if name not in self.topics and request.allow_auto_topic_creation:
                self.topics[name] = self.default_partitions
            topics.append(self._topic_metadata(name))
        broker = MetadataResponse.MetadataResponseBroker(
            node_id=NODE_ID, host=self.advertised_host, port=self.port, rack=None
        )
        response = MetadataResponse(
            throttle_time_ms=0,
            brokers=[broker],
            cluster_id=self.cluster_id,
            controller_id=NODE_ID,
            topics=topics,
        )
        conn.answer(received, response)

    def _topic_metadata(self, name: str) -> Any:
        Topic = MetadataResponse.MetadataResponseTopic
        partitions = self.topics.get(name)
        if partitions is None:
            return Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[])
        topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
        return Topic(
            error_code=NONE,
            name=name,
            topic_id=topic_id,
            is_internal=False,
            partitions=[
                Topic.MetadataResponsePartition(
                    error_code=NONE,
                    partition_index=index,
                    leader_id=NODE_ID,
                    leader_epoch=0,
                    replica_nodes=[NODE_ID],
                    isr_nodes=[NODE_ID],
                    offline_replicas=[],
                )
                for index in range(partitions)
            ],
        )

    def answer_init_producer_id(self, conn: ServerConnection, received: Received) -> None:
        response = InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=NONE,
            producer_id=next(self._producer_ids),
            producer_epoch=0,
        )
        conn.answer(received, response)

    def answer_produce(self, conn: ServerConnection, received: Received) -> None:
        request = received.request
        Partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
        responses = []
        for topic in request.topic_data:
            partitions = []
            for data in topic.partition_data:
                code, base_offset = self._append(topic.name, data.index, bytes(data.records or b""))
                partitions.append(
                    Partition(
                        index=data.index,
                        error_code=code,
                        base_offset=base_offset,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        record_errors=[],
                        error_message=None,
                    )
                )
            responses.append(
                ProduceResponse.TopicProduceResponse(
                    name=topic.name, partition_responses=partitions
                )
            )
        if request.acks != 0:
            conn.answer(received, ProduceResponse(responses=responses, throttle_time_ms=0))

    def _append(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        if partition >= self.topics.get(topic, 0):
            return UNKNOWN_TOPIC_OR_PARTITION, -1
        log = self.logs.setdefault((topic, partition), [])
        base_offset = len(log)
        stored: list[StoredRecord] = []
        try:
            batches = MemoryRecords(records)
            while (batch := batches.next_batch()) is not None:
                if batch.magic != 2 or not batch.validate_crc():
                    return CORRUPT_MESSAGE, -1
                for record in batch:
                    stored.append(
                        StoredRecord(
                            offset=base_offset + len(stored),
                            key=record.key,
                            value=record.value,
                            headers=tuple(record.headers),
                            producer_id=batch.producer_id,
                            base_sequence=batch.base_sequence,
                        )
                    )
        except Exception:  # kafka-python raises CorruptRecordError, struct.error...
            return CORRUPT_MESSAGE, -1
        if not stored:
            return CORRUPT_MESSAGE, -1
        log.extend(stored)
        return NONE, base_offset

    # -- SASL state ---------------------------------------------------------------------

    def _refuse(self, conn: ServerConnection, received: Received) -> None:
        """Close without answering, as Kafka does on a request out of SASL order."""
        received.refused = True
        conn.state = SaslState.FAILED
        conn.close()

    def _fail(self, conn: ServerConnection, answer: bytes) -> None:
        """Answer a failed handshake or authentication (late), then close."""
        conn.state = SaslState.FAILED
        conn.closing_answer = answer

    # -- serving ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = ServerConnection(self, len(self.connections), writer)
        self.connections.append(connection)
        try:
            while not writer.is_closing():
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                if not _HEADER.size <= size <= MAX_FRAME:
                    break  # Kafka closes on an invalid size (InvalidReceiveException)
                self._handle(connection, await reader.readexactly(size))
                if connection.closing_answer is not None:
                    await asyncio.sleep(self.failed_authentication_delay)
                    connection.write(connection.closing_answer)
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass  # the client went away: nothing to answer
        except Exception as error:  # a bug of the server (or of a test's handler)
            self.errors.append(error)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    def _handle(self, conn: ServerConnection, frame: bytes) -> None:
        api_key, version, correlation = _HEADER.unpack_from(frame)
        request_class = REQUEST_CLASSES.get(api_key)
        request = None
        if request_class is not None and 0 <= version <= request_class.max_version:
            try:
                request = request_class.decode(frame, version=version, header=True)
            except Exception:  # malformed: refused below, as Kafka closes on it
                request = None
        client_id = request.header.client_id if request is not None else None
        received = Received(conn, api_key, version, correlation, client_id, request, conn.state)
        self.received.append(received)
        self._changed.set()
        if conn.state is SaslState.FAILED:
            return
        if conn.state is SaslState.HANDSHAKE and api_key not in _PRE_HANDSHAKE:
            self._refuse(conn, received)  # "Unexpected Kafka request ... during SASL handshake"
            return
        if conn.state is SaslState.AUTHENTICATE and api_key != ApiKey.SaslAuthenticate:
            self._refuse(conn, received)  # "... during SASL authentication"
            return
        supported = self.api_versions.get(api_key)
        in_range = supported is not None and supported[0] <= version <= supported[1]
        if api_key != ApiKey.ApiVersions and (request is None or not in_range):
            self._refuse(conn, received)  # Kafka cannot parse it: InvalidRequestException
            return
        handler = self.handlers.get(api_key)
        if handler is not None:
            handler(conn, received)
