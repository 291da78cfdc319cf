"""The admin API: ``client.admin()`` (async) or ``msgclient.blocking.Client.admin()``."""

from msgclient.admin.admin import Admin
from msgclient.admin.types import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ItemResults,
    ListedOffset,
    MemberDescription,
    NewTopic,
    OffsetSpec,
    PartitionInfo,
    TopicDescription,
    TopicPartition,
)

__all__ = [
    "Admin",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ItemResults",
    "ListedOffset",
    "MemberDescription",
    "NewTopic",
    "OffsetSpec",
    "PartitionInfo",
    "TopicDescription",
    "TopicPartition",
]
