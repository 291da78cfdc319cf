"""PulsarAdmin: the admin API's part that Pulsar's binary protocol can serve.

A namespace's topics (GET_TOPICS_OF_NAMESPACE), a topic's partitions (PARTITIONED_METADATA)
and the broker that owns each (LOOKUP). The rest (creating and deleting topics, configs,
subscriptions' positions) is Pulsar's REST admin API, which msgclient does not speak: no
broker here serves it (docs/admin.md).
"""

from __future__ import annotations

import re

from msgclient.admin.transport import AdminTransport
from msgclient.admin.types import ItemResults, PartitionInfo, TopicDescription
from msgclient.errors import InvalidConfigurationError, MsgClientError, NotSupportedError
from msgclient.url import parse_service_url
from protocols.pulsarwire import topic as topics
from protocols.pulsarwire.context import PulsarContext

DEFAULT_NAMESPACE = "public/default"
# Pulsar's tenant and namespace names (the Java client's NamedEntity: [-=:.\w], ASCII).
_NAMESPACE = re.compile(r"[-=:.\w]+/[-=:.\w]+", re.ASCII)


class PulsarAdmin(AdminTransport):
    def __init__(self, context: PulsarContext) -> None:
        self._context = context

    def not_supported(self, operation: str) -> NotSupportedError:
        return NotSupportedError(
            f"{operation} on Pulsar needs its REST admin API, which msgclient does not "
            "speak (the binary protocol has no such command; docs/admin.md)"
        )

    async def list_topics(self, namespace: str | None, include_internal: bool) -> list[str]:
        """The topics of ``namespace`` (``tenant/namespace``, default ``public/default``),
        persistent and non-persistent, by full name (``persistent://tenant/ns/t``); a
        partitioned topic once, by its own name, not its partitions'.

        ``include_internal`` changes nothing on Pulsar: it has no internal topics in
        Kafka's sense, and the broker leaves its system topics (``__change_events``...) out
        of this listing whatever the client asks.
        """
        checked = _namespace(DEFAULT_NAMESPACE if namespace is None else namespace)
        listed = await self._context.lookup.topics_of_namespace(checked, "all")
        return sorted({topics.partitioned_topic(name) for name in listed.topics})

    async def describe_topics(self, names: list[str]) -> ItemResults[str, TopicDescription]:
        succeeded: dict[str, TopicDescription] = {}
        failed: dict[str, MsgClientError] = {}
        lookup = self._context.lookup
        for name in names:
            try:
                count = await lookup.get_partition_count(name)
                partitions = [
                    topics.partition_name(name, i) if count else name for i in range(count or 1)
                ]
                owners = [_host_port((await lookup.get_broker(p)).logical) for p in partitions]
            except MsgClientError as error:
                failed[name] = error
                continue
            succeeded[name] = TopicDescription(
                name,
                tuple(PartitionInfo(i, owner) for i, owner in enumerate(owners)),
                partitioned=count > 0,
            )
        return ItemResults(succeeded, failed)


def _namespace(namespace: object) -> str:
    """``namespace`` if it is ``tenant/namespace``; refused before anything is sent."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise InvalidConfigurationError(
            f"invalid namespace {namespace!r}: expected 'tenant/namespace' (letters, digits "
            "and -=:._), e.g. 'public/default'"
        )
    return namespace


def _host_port(url: str) -> str:
    """``pulsar://host:6650`` -> ``host:6650``: the admin API names brokers by address, as
    Kafka's does (PartitionInfo), not by the URL a lookup answers."""
    (host, port), *_ = parse_service_url(url).hosts  # a lookup answer names its port
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
