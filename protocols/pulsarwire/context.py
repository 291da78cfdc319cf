"""What the producer and consumer transports of one client share of the Pulsar adapter."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from msgclient.core.network.connection_pool import ConnectionPool
from protocols.pulsarwire.connection import PulsarConnection
from protocols.pulsarwire.lookup import PulsarLookupService


@attrs.frozen
class PulsarContext:
    """The client's connections and lookups, and its producer and consumer ids (unique per
    client: see ``PulsarBackend`` for why not per connection)."""

    pool: ConnectionPool[PulsarConnection]
    lookup: PulsarLookupService
    new_producer_id: Callable[[], int]
    new_consumer_id: Callable[[], int]
