"""Pattern subscriptions on Pulsar: which namespace a pattern names, and which of the
namespace's topics (GET_TOPICS_OF_NAMESPACE) it matches.

As the Java client (TopicList.filterTopics), a pattern covers one namespace, and is
matched whole against ``tenant/namespace/topic``: the domain is left out on both sides (the
regex subscription mode picks the domains) and a partition counts as its topic. A pattern
without a namespace (``my-.*``) is in ``public/default``, as a short topic name is.
"""

from __future__ import annotations

import re

from msgclient.errors import InvalidConfigurationError
from msgclient.options import RegexSubscriptionMode
from protocols.pulsarwire import topic as topics
from protocols.pulsarwire.lookup import TopicsMode

LOOKUP_MODES: dict[RegexSubscriptionMode, TopicsMode] = {
    RegexSubscriptionMode.PersistentOnly: "persistent",
    RegexSubscriptionMode.NonPersistentOnly: "non-persistent",
    RegexSubscriptionMode.AllTopics: "all",
}
_DOMAINS: dict[RegexSubscriptionMode, tuple[str, ...]] = {
    RegexSubscriptionMode.PersistentOnly: ("persistent",),
    RegexSubscriptionMode.NonPersistentOnly: ("non-persistent",),
    RegexSubscriptionMode.AllTopics: topics.DOMAINS,
}
_LITERAL = re.compile(r"[-=:.\w]+", re.ASCII)


class TopicPattern:
    """A subscription's pattern: its namespace and what it matches there."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        text = pattern.pattern
        for domain in topics.DOMAINS:
            text = text.removeprefix(f"{domain}://")
        parts = text.split("/", 2)
        if len(parts) == 1:
            parts = ["public", "default", text]
        if len(parts) != 3 or not all(_LITERAL.fullmatch(part) for part in parts[:2]):
            raise InvalidConfigurationError(
                f"topic pattern {pattern.pattern!r} is invalid: it must name one namespace, "
                "as in 'persistent://tenant/namespace/regex' (the tenant and namespace "
                "written out, not as a regex)"
            )
        self.namespace = f"{parts[0]}/{parts[1]}"
        self.broker_pattern = pattern.pattern
        self._match = re.compile("/".join(parts), pattern.flags)

    def matching(
        self, listed: tuple[str, ...] | list[str], mode: RegexSubscriptionMode
    ) -> list[str]:
        """The topics of ``listed`` (full names, partitions too) the pattern matches in
        ``mode``'s domains, each once, by its topic's name."""
        domains = _DOMAINS[mode]
        found = set()
        for name in map(topics.partitioned_topic, listed):
            domain, _, rest = name.partition("://")
            if domain in domains and self._match.fullmatch(rest):
                found.add(name)
        return sorted(found)
