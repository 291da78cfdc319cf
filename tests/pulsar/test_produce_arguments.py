"""Bad arguments fail at the call, and nothing a batch carries is lost to a failure inside it.

The regression these guard: a bytes or int ``partition_key`` used to be accepted and then
raise inside the batch timer's callback, leaving every future of that batch pending forever
while ``flush()`` returned.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

import msgclient
from msgclient.core.send.partition_producer import PartitionProducer
from msgclient.embedded import PulsarBroker
from tests.pulsar.helpers import official_client, receive, settle, subscribe, within

BATCHED: dict[str, Any] = {"batching_enabled": True, "batching_max_publish_delay_ms": 5}


async def test_bytes_partition_key_is_sent_as_javas_key_bytes(
    pulsar_broker: PulsarBroker, topic: str
) -> None:
    with official_client(pulsar_broker.service_url) as official:
        reader = subscribe(official, topic)
        async with msgclient.Client(pulsar_broker.service_url) as client:
            producer = await client.create_producer(topic, **BATCHED)
            futures = [
                await producer.send_async(b"str-key", partition_key="k"),
                await producer.send_async(b"bytes-key", partition_key=b"\x00\xffkey"),
                await producer.send_async(b"no-key"),
            ]
            await within(producer.flush())
            await settle(futures)
        received = await receive(reader, 3)
    keys = {m.data(): m.partition_key() for m in received}
    # Java's keyBytes travel base64-encoded with partition_key_b64_encoded set; the official
    # Python client returns the key string as stored.
    assert keys == {
        b"str-key": "k",
        b"bytes-key": base64.b64encode(b"\x00\xffkey").decode(),
        b"no-key": "",
    }


@pytest.mark.parametrize("options", [BATCHED, {"batching_enabled": False}])
async def test_a_bytes_partition_key_is_received_as_its_bytes(
    pulsar_broker: PulsarBroker, topic: str, options: dict[str, Any]
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        consumer = await client.subscribe(topic, "keys")
        producer = await client.create_producer(topic, **options)
        await within(producer.send(b"bytes", partition_key=b"\x00\xffkey"))
        await within(producer.send(b"text", partition_key="k\u00e9"))
        received = [await within(consumer.receive()) for _ in range(2)]
    assert [m.key_bytes() for m in received] == [b"\x00\xffkey", "k\u00e9".encode()]
    assert received[1].partition_key() == "k\u00e9"


@pytest.mark.parametrize(
    ("argument", "value", "named"),
    [
        ("partition_key", 123, "partition_key must be str or bytes, not int"),
        ("ordering_key", 1.5, "ordering_key must be str or bytes, not float"),
        ("callback", "nope", "callback must be callable, not str"),
        ("properties", {"k": 1}, "properties"),
        ("event_timestamp", "now", "event_timestamp"),
        ("no_such_option", 1, "unexpected keyword argument 'no_such_option'"),
    ],
)
async def test_bad_argument_fails_at_the_call_and_the_batch_around_it_is_sent(
    pulsar_broker: PulsarBroker, topic: str, argument: str, value: object, named: str
) -> None:
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(topic, **BATCHED)
        before = await producer.send_async(b"before")
        with pytest.raises((TypeError, msgclient.InvalidConfigurationError), match=named):
            await producer.send_async(b"bad", **{argument: value})
        after = await producer.send_async(b"after")
        await within(producer.flush())
        ids = await settle([before, after])
        assert ids[0] < ids[1]
        assert producer.pending_count == 0


async def test_an_encoding_failure_fails_exactly_its_batch_with_a_typed_error(
    pulsar_broker: PulsarBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong while a batch is encoded (here: the encoder itself raises) fails
    that batch's futures and callbacks with MessageEncodingError, in the timer's callback,
    and the loop's exception handler never sees it; later batches are unaffected."""
    loop_errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: loop_errors.append(context))
    callback_errors: list[BaseException | None] = []
    try:
        async with msgclient.Client(pulsar_broker.service_url) as client:
            producer = await client.create_producer(topic, **BATCHED)
            partition: PartitionProducer = producer._partitions[0]
            transport = partition._transport
            real_encode = transport.encode

            def broken_encode(op: Any) -> bytes:
                raise AttributeError("boom")

            monkeypatch.setattr(transport, "encode", broken_encode)
            # One batch of both kinds: three futures, then three callbacks (no future).
            doomed = [await producer.send_async(b"x%d" % i) for i in range(3)]
            for i in range(3):
                await producer.send_async(b"y%d" % i, lambda e, _: callback_errors.append(e))
            _, pending = await within(asyncio.wait(doomed, timeout=5))
            await within(producer.flush())
            assert not pending, "a batch whose encoding failed left futures pending"
            for future in doomed:
                error = future.exception()
                assert isinstance(error, msgclient.MessageEncodingError)
                assert isinstance(error.__cause__, AttributeError)
            assert [type(e) for e in callback_errors] == [msgclient.MessageEncodingError] * 3
            assert producer.pending_count == 0

            monkeypatch.setattr(transport, "encode", real_encode)
            await within(producer.send(b"later"))
    finally:
        loop.set_exception_handler(previous_handler)
    assert loop_errors == []
