"""redeliver_unacknowledged_messages on Kafka: refused, since the broker keeps no set of
delivered-and-unacked messages to send again (queued messages would be dropped for good)."""

from __future__ import annotations

import pytest

import msgclient
from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic
from tests.kafka.test_transactions import GROUP


async def test_redeliver_everything_is_refused_naming_the_alternative(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    await create_topic(kafka_broker.bootstrap_servers, topic, 1)
    async with msgclient.Client(kafka_broker.service_url) as client:
        consumer = await client.subscribe(topic, "g-" + topic, **GROUP)
        with pytest.raises(msgclient.InvalidConfigurationError, match="negative_acknowledge"):
            consumer.redeliver_unacknowledged_messages()
        await consumer.close()
