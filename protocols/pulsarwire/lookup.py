"""Binary lookup (the Java client's BinaryProtoLookupService).

LOOKUP goes to the service URL. The broker answers Connect (it serves the topic), or
Redirect (ask that broker instead; ``authoritative`` says it knows), up to
``max_redirects`` hops. ``proxy_through_service_url`` means: keep the socket on the address
that answered (a proxy) and name the answered broker in the handshake.
"""

from __future__ import annotations

import itertools
from typing import cast

from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.core.network.lookup import BrokerAddress, LookupService
from msgclient.errors import TopicLookupError
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb


class PulsarLookupService(LookupService):
    def __init__(
        self,
        pool: ConnectionPool[PulsarConnection],
        service_addresses: list[str],
        use_tls: bool,
        max_redirects: int,
    ) -> None:
        super().__init__()
        self._pool = pool
        self._service_addresses = itertools.cycle(service_addresses)
        self._use_tls = use_tls
        self._max_redirects = max_redirects

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
                    topic=topic, request_id=request_id, authoritative=authoritative
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
