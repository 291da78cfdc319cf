"""Binary lookup (the Java client's BinaryProtoLookupService).

LOOKUP goes to the service URL. The broker answers Connect (it serves the topic), or
Redirect (ask that broker instead; ``authoritative`` says it knows), up to
``max_redirects`` hops. ``proxy_through_service_url`` means: keep the socket on the address
that answered (a proxy) and name the answered broker in the handshake.

GET_TOPICS_OF_NAMESPACE (``topics_of_namespace``) also goes to the service URL: the topics
of a namespace, for the admin API's list_topics and for pattern subscriptions.
"""

from __future__ import annotations

import itertools
from typing import Literal, cast

import attrs

from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.core.network.lookup import BrokerAddress, LookupService
from msgclient.errors import BrokerError, MsgClientError, OperationTimeoutError, TopicLookupError
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb

# Which topics GET_TOPICS_OF_NAMESPACE lists, by domain (regex_subscription_mode's three).
TopicsMode = Literal["persistent", "non-persistent", "all"]
_MODES: dict[TopicsMode, pb.CommandGetTopicsOfNamespace.Mode.ValueType] = {
    "persistent": pb.CommandGetTopicsOfNamespace.PERSISTENT,
    "non-persistent": pb.CommandGetTopicsOfNamespace.NON_PERSISTENT,
    "all": pb.CommandGetTopicsOfNamespace.ALL,
}


@attrs.frozen
class NamespaceTopics:
    """A namespace's topics as the broker listed them.

    ``topics``: full names of non-partitioned topics and of partitions (``T-partition-N``),
    not of partitioned topics themselves. ``filtered``: the broker applied the pattern (an
    old broker, or a pattern longer than its limit, leaves it to the client).
    ``topics_hash``: the broker's hash of the filtered list (None unless filtered); sent
    back with the next request, an unchanged list answers ``changed`` False and no topics.
    """

    topics: tuple[str, ...]
    filtered: bool
    topics_hash: str | None
    changed: bool


class PulsarLookupService(LookupService):
    def __init__(
        self,
        pool: ConnectionPool[PulsarConnection],
        service_addresses: list[str],
        use_tls: bool,
        max_redirects: int,
        listener_name: str | None = None,
    ) -> None:
        super().__init__()
        self._pool = pool
        self._service_addresses = itertools.cycle(service_addresses)
        self._use_tls = use_tls
        self._max_redirects = max_redirects
        self._listener_name = listener_name

    def switch_service(self, service_addresses: list[str], use_tls: bool) -> None:
        """Look up on another cluster from now on (cluster failover)."""
        self._service_addresses = itertools.cycle(service_addresses)
        self._use_tls = use_tls
        self.forget_in_flight()

    def service_address(self) -> str:
        """The next service URL host, round robin (a cluster may list several)."""
        return next(self._service_addresses)

    async def _fetch_partition_count(self, topic: str) -> int:
        address = self.service_address()
        connection = await self._pool.get_connection(address, address)
        request_id = connection.new_request_id()
        command = pb.BaseCommand(
            type=pb.BaseCommand.PARTITIONED_METADATA,
            partitionMetadata=pb.CommandPartitionedTopicMetadata(
                topic=topic, request_id=request_id
            ),
        )
        answer = await connection.request(request_id, command)
        return cast(pb.CommandPartitionedTopicMetadataResponse, answer).partitions

    async def _fetch_broker(self, topic: str) -> BrokerAddress:
        service = self.service_address()
        target = service
        authoritative = False
        for _ in range(self._max_redirects + 1):
            connection = await self._pool.get_connection(target, target)
            request_id = connection.new_request_id()
            command = pb.BaseCommand(
                type=pb.BaseCommand.LOOKUP,
                lookupTopic=pb.CommandLookupTopic(
                    topic=topic,
                    request_id=request_id,
                    authoritative=authoritative,
                    advertised_listener_name=self._listener_name,
                ),
            )
            answer = cast(
                pb.CommandLookupTopicResponse, await connection.request(request_id, command)
            )
            broker = answer.brokerServiceUrlTls if self._use_tls else answer.brokerServiceUrl
            if not broker:
                raise TopicLookupError(f"lookup of {topic} at {target} named no broker URL")
            if answer.response == pb.CommandLookupTopicResponse.Connect:
                # Through a proxy: the socket goes where we asked, the handshake names the broker.
                physical = target if answer.proxy_through_service_url else broker
                return BrokerAddress(logical=broker, physical=physical)
            target, authoritative = broker, answer.authoritative
        raise TopicLookupError(
            f"lookup of {topic} was redirected more than {self._max_redirects} times "
            "(max_lookup_redirects)"
        )

    async def topics_of_namespace(
        self,
        namespace: str,
        mode: TopicsMode = "persistent",
        pattern: str | None = None,
        topics_hash: str | None = None,
    ) -> NamespaceTopics:
        """The topics of ``namespace`` (``tenant/namespace``) in ``mode``'s domains; with
        ``pattern`` (a regex on full names) a broker may filter them itself (see
        NamespaceTopics). Errors name the namespace; a broker that never answers fails
        after the operation timeout."""
        address = self.service_address()
        connection = await self._pool.get_connection(address, address)
        request_id = connection.new_request_id()
        request = pb.CommandGetTopicsOfNamespace(
            request_id=request_id, namespace=namespace, mode=_MODES[mode]
        )
        if pattern is not None:
            request.topics_pattern = pattern
        if topics_hash is not None:
            request.topics_hash = topics_hash
        command = pb.BaseCommand(
            type=pb.BaseCommand.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=request
        )
        what = f"topics of namespace {namespace!r}"
        try:
            answer = cast(
                pb.CommandGetTopicsOfNamespaceResponse,
                await connection.request(request_id, command),
            )
        except OperationTimeoutError as error:
            # Silence is how a broker without the command answers it (pulsar-lite does).
            raise OperationTimeoutError(
                f"{what}: {error}; a broker that does not implement GET_TOPICS_OF_NAMESPACE "
                "never answers it (pulsar-lite does not)"
            ) from error
        except MsgClientError as error:
            raise _about(what, error) from error
        return NamespaceTopics(
            topics=tuple(answer.topics),
            filtered=answer.filtered,
            topics_hash=answer.topics_hash if answer.HasField("topics_hash") else None,
            changed=answer.changed,
        )


def _about(what: str, error: MsgClientError) -> MsgClientError:
    """The same kind of error (a caller may catch TopicNotFoundError...), saying what failed."""
    if isinstance(error, BrokerError):
        return type(error)(error.code, f"{what}: {error.broker_message}", retriable=error.retriable)
    return type(error)(f"{what}: {error}")
