"""What the producer, consumer and group transports of one client share of the Kafka
adapter."""

from __future__ import annotations

import attrs

from msgclient.core.network.connection_pool import ConnectionPool
from protocols.kafkawire.connection import KafkaConnection
from protocols.kafkawire.metadata import KafkaLookupService
from protocols.kafkawire.produce_sender import ProduceSenders


@attrs.frozen
class KafkaContext:
    """The client's connections, metadata, Produce request senders, client id (for names)
    and operation timeout."""

    pool: ConnectionPool[KafkaConnection]
    lookup: KafkaLookupService
    senders: ProduceSenders
    client_id: str
    operation_timeout: float
