"""Options that only Pulsar has are refused on Kafka, naming the option, at create_producer,
subscribe and create_reader: ignoring them would let a program believe it has an exclusive
producer, or that the broker checks its schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

import msgclient
from msgclient.crypto_key_reader import CryptoKeyReader, EncryptionKeyInfo
from msgclient.embedded import KafkaBroker
from msgclient.errors import NotSupportedError
from msgclient.schema_info import SchemaInfo, SchemaType

SCHEMA = SchemaInfo(SchemaType.STRING, "text")
GROUP: dict[str, Any] = {
    "consumer_type": msgclient.ConsumerType.Failover,
    "session_timeout_ms": 4000,  # tansu holds a JoinGroup for half of it (brokers.md)
    "heartbeat_interval_ms": 300,
    "rebalance_timeout_ms": 4000,
}


@pytest.mark.parametrize(
    "mode",
    [
        msgclient.ProducerAccessMode.Exclusive,
        msgclient.ProducerAccessMode.WaitForExclusive,
        msgclient.ProducerAccessMode.ExclusiveWithFencing,
    ],
    ids=lambda m: m.name,
)
async def test_a_producer_access_mode_other_than_shared_is_refused(
    kafka_broker: KafkaBroker, topic: str, mode: msgclient.ProducerAccessMode
) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match=f"access_mode={mode.name} is Pulsar only"):
            await client.create_producer(topic, access_mode=mode)


async def test_a_producer_schema_is_refused(kafka_broker: KafkaBroker, topic: str) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="option schema is Pulsar only"):
            await client.create_producer(topic, schema=SCHEMA)


async def test_chunking_is_refused(kafka_broker: KafkaBroker, topic: str) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="option chunking_enabled is Pulsar only"):
            await client.create_producer(topic, batching_enabled=False, chunking_enabled=True)


async def test_a_consumer_schema_is_refused(kafka_broker: KafkaBroker, topic: str) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="option schema is Pulsar only"):
            await client.subscribe(topic, "g-" + topic, schema=SCHEMA, **GROUP)


async def test_a_reader_schema_is_refused(kafka_broker: KafkaBroker, topic: str) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="option schema is Pulsar only"):
            await client.create_reader(topic, msgclient.InitialPosition.Earliest, schema=SCHEMA)


async def test_the_defaults_and_explicit_shared_access_are_accepted(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        producer = await client.create_producer(
            topic, access_mode=msgclient.ProducerAccessMode.Shared, schema=None
        )
        assert producer.schema_version is None  # a Kafka broker answers no schema version
        await producer.close()
        reader = await client.create_reader(topic, msgclient.InitialPosition.Earliest)
        await reader.close()


class NoKeys(CryptoKeyReader):
    """Never asked: the options are refused before any key is read."""

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        raise AssertionError("no key should be read")

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        raise AssertionError("no key should be read")


async def test_encryption_is_refused_rather_than_sending_plaintext(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="encryption_keys and crypto_key_reader"):
            await client.create_producer(topic, encryption_keys=["app"], crypto_key_reader=NoKeys())
        with pytest.raises(NotSupportedError, match="crypto_key_reader is Pulsar only"):
            await client.subscribe(topic, "g-" + topic, crypto_key_reader=NoKeys(), **GROUP)


async def test_a_regex_subscription_mode_other_than_persistent_only_is_refused(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    mode = msgclient.RegexSubscriptionMode.AllTopics
    async with msgclient.Client(kafka_broker.service_url) as client:
        with pytest.raises(NotSupportedError, match="regex_subscription_mode=AllTopics is Pulsar"):
            await client.subscribe(
                re.compile(topic + ".*"), "g-" + topic, regex_subscription_mode=mode, **GROUP
            )
