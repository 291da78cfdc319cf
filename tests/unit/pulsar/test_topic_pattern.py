"""Pulsar pattern subscriptions: the namespace a pattern names and what it matches."""

from __future__ import annotations

import re

import pytest

from msgclient.errors import InvalidConfigurationError
from msgclient.options import RegexSubscriptionMode as Mode
from protocols.pulsarwire.topic_pattern import TopicPattern

LISTED = [
    "persistent://public/default/orders-1",
    "persistent://public/default/orders-2-partition-0",
    "persistent://public/default/orders-2-partition-1",
    "persistent://public/default/orders-x-partition-y",  # not a partition: a topic's name
    "persistent://public/default/other",
    "non-persistent://public/default/orders-np",
]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            Mode.PersistentOnly,
            [
                "persistent://public/default/orders-1",
                "persistent://public/default/orders-2",
                "persistent://public/default/orders-x-partition-y",
            ],
        ),
        (Mode.NonPersistentOnly, ["non-persistent://public/default/orders-np"]),
        (
            Mode.AllTopics,
            [
                "non-persistent://public/default/orders-np",
                "persistent://public/default/orders-1",
                "persistent://public/default/orders-2",
                "persistent://public/default/orders-x-partition-y",
            ],
        ),
    ],
)
def test_a_pattern_matches_topics_whole_in_the_modes_domains(
    mode: Mode, expected: list[str]
) -> None:
    pattern = TopicPattern(re.compile("persistent://public/default/orders-.*"))
    assert pattern.namespace == "public/default"
    assert pattern.matching(LISTED, mode) == expected


def test_the_match_is_whole_and_keeps_the_flags() -> None:
    pattern = TopicPattern(re.compile("public/default/ORDERS-1", re.IGNORECASE))
    assert pattern.matching(LISTED, Mode.PersistentOnly) == ["persistent://public/default/orders-1"]
    assert TopicPattern(re.compile("public/default/orders")).matching(LISTED, Mode.AllTopics) == []


def test_a_pattern_without_a_namespace_is_in_public_default() -> None:
    pattern = TopicPattern(re.compile("other"))
    assert pattern.namespace == "public/default"
    assert pattern.matching(LISTED, Mode.PersistentOnly) == ["persistent://public/default/other"]


@pytest.mark.parametrize(
    "text", ["persistent://public/.*/t", "persistent://pub.+/ns/t", "public/ns", "a/(b|c)/t"]
)
def test_a_pattern_must_write_out_one_namespace(text: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=re.escape(repr(text))):
        TopicPattern(re.compile(text))
