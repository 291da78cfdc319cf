"""Pulsar topic names: ``{persistent|non-persistent}://tenant/namespace/topic``."""

from __future__ import annotations

from msgclient.errors import InvalidTopicNameError

DOMAINS = ("persistent", "non-persistent")
PARTITION_SUFFIX = "-partition-"


def normalize_topic(topic: str) -> str:
    """Expand short names the way every Pulsar client does.

    ``my-topic`` -> ``persistent://public/default/my-topic``;
    ``tenant/ns/topic`` -> ``persistent://tenant/ns/topic``.
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicNameError(f"topic name must be a non-empty string, got {topic!r}")
    domain, sep, rest = topic.partition("://")
    if not sep:
        domain, rest = "persistent", topic
        parts = rest.split("/")
        if len(parts) == 1:
            parts = ["public", "default", rest]
        elif len(parts) != 3:
            raise InvalidTopicNameError(
                f"invalid topic name {topic!r}: expected 'topic', 'tenant/namespace/topic' "
                "or 'persistent://tenant/namespace/topic'"
            )
    else:
        parts = rest.split("/")
        if domain not in DOMAINS:
            raise InvalidTopicNameError(
                f"invalid topic name {topic!r}: domain must be one of {', '.join(DOMAINS)}"
            )
        if len(parts) != 3:
            raise InvalidTopicNameError(
                f"invalid topic name {topic!r}: expected {domain}://tenant/namespace/topic"
            )
    if not all(parts):
        raise InvalidTopicNameError(f"invalid topic name {topic!r}: empty name component")
    return f"{domain}://{'/'.join(parts)}"


def partition_name(topic: str, partition: int) -> str:
    return f"{topic}{PARTITION_SUFFIX}{partition}"


def partitioned_topic(name: str) -> str:
    """A partition's topic (``t-partition-3`` -> ``t``); other names as they are. Only a
    numeric suffix names a partition, as in the Java client's TopicName."""
    base, suffix, index = name.rpartition(PARTITION_SUFFIX)
    return base if suffix and index.isascii() and index.isdigit() else name
