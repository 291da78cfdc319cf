"""PulsarAdmin: the admin API's part that Pulsar's binary protocol can serve.

A topic's partitions (PARTITIONED_METADATA) and the broker that owns each (LOOKUP). The
rest (creating and deleting topics, configs, subscriptions' positions) is Pulsar's REST
admin API, which msgclient does not speak: no broker here serves it (docs/admin.md).
"""

from __future__ import annotations

from msgclient.admin.transport import AdminTransport
from msgclient.admin.types import ItemResults, PartitionInfo, TopicDescription
from msgclient.errors import MsgClientError, NotSupportedError
from protocols.pulsarwire import topic as topics
from protocols.pulsarwire.context import PulsarContext


class PulsarAdmin(AdminTransport):
    def __init__(self, context: PulsarContext) -> None:
        self._context = context

    def not_supported(self, operation: str) -> NotSupportedError:
        return NotSupportedError(
            f"{operation} on Pulsar needs its REST admin API, which msgclient does not "
            "speak (the binary protocol has no such command; docs/admin.md)"
        )

    async def list_topics(self, namespace: str | None, include_internal: bool) -> list[str]:
        raise self.not_supported("list_topics")

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
                owners = [(await lookup.get_broker(p)).logical for p in partitions]
            except MsgClientError as error:
                failed[name] = error
                continue
            succeeded[name] = TopicDescription(
                name,
                tuple(PartitionInfo(i, owner) for i, owner in enumerate(owners)),
                partitioned=count > 0,
            )
        return ItemResults(succeeded, failed)
