"""Public arguments of the consumer API are checked at the call, naming the argument."""

from __future__ import annotations

from typing import Any

import pytest

import msgclient
from msgclient.core.receive.receive_queue import ReceiveQueue
from msgclient.options import ConsumerOptions
from protocols.kafkawire.message_id import KafkaMessageId


def consumer() -> msgclient.Consumer:
    return msgclient.Consumer(["t"], "s", ConsumerOptions(), [], ReceiveQueue(), lambda _: None)


@pytest.mark.parametrize(
    ("timeout", "error", "text"),
    [
        ("5", TypeError, "timeout_millis must be an int"),
        (1.5, TypeError, "timeout_millis must be an int"),
        (True, TypeError, "timeout_millis must be an int"),
        (-1, msgclient.InvalidConfigurationError, "timeout_millis=-1"),
    ],
)
async def test_receive_timeout_is_checked(timeout: Any, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        await consumer().receive(timeout_millis=timeout)


@pytest.mark.parametrize("bad", ["not a message", None, 42])
async def test_acknowledging_something_else_is_a_type_error(bad: Any) -> None:
    c = consumer()
    for method in (c.acknowledge, c.acknowledge_cumulative, c.negative_acknowledge):
        with pytest.raises(TypeError, match="expected a Message or a MessageId"):
            method(bad)


async def test_a_message_of_another_consumer_is_named() -> None:
    message = msgclient.Message(b"x", KafkaMessageId("other", 0, 1), "other-0")
    with pytest.raises(msgclient.InvalidConfigurationError, match="not received by this"):
        consumer().acknowledge(message)


@pytest.mark.parametrize("position", ["0", -5, 1.0])
async def test_seek_position_is_checked(position: Any) -> None:
    with pytest.raises(msgclient.InvalidConfigurationError, match="position"):
        await consumer().seek(position)


@pytest.mark.parametrize("topic", [None, 42, ["a", None]])
async def test_subscribe_to_a_non_topic_names_it(topic: Any) -> None:
    async with msgclient.Client("pulsar://127.0.0.1:1") as client:
        with pytest.raises(msgclient.InvalidTopicNameError, match="topic must be a str"):
            await client.subscribe(topic, "s")
