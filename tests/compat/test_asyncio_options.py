"""The asyncio modules (``pulsar.asyncio`` and ``pulsar_compat.asyncio``), same program:
a JSON schema, an access mode, a Sticky Key_Shared policy and
redeliver_unacknowledged_messages."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from msgclient.embedded import PulsarBroker
from tests.compat.conftest import QUIET, RECEIVE_MS
from tests.schema.test_interop import comparable, users
from tests.schema.twins import user_record


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_schema_access_mode_key_shared_and_redelivery(
    module_name: str, pulsar_broker: PulsarBroker, topic: str
) -> None:
    aio = importlib.import_module(module_name)
    pulsar = importlib.import_module(module_name.rsplit(".", 1)[0])
    schema = pulsar.schema.JsonSchema(user_record(pulsar.schema))
    written = users(pulsar.schema)[:3]
    client = aio.Client(pulsar_broker.service_url, logger=QUIET)
    consumer = await client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.KeyShared,
        initial_position=pulsar.InitialPosition.Earliest,
        schema=schema,
        key_shared_policy=pulsar.ConsumerKeySharedPolicy(
            pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 65535)]
        ),
    )
    producer = await client.create_producer(
        topic, schema=schema, access_mode=pulsar.ProducerAccessMode.Exclusive
    )
    for user in written:
        await producer.send(user, partition_key=user.name)

    async def receive_values() -> list[tuple[object, int]]:
        received = []
        for _ in written:
            message = await asyncio.wait_for(consumer.receive(), RECEIVE_MS / 1000)
            received.append((comparable(message.value()), message.redelivery_count()))
        return received

    first = await receive_values()
    consumer.redeliver_unacknowledged_messages()
    again = await receive_values()
    await client.close()
    assert first == [(comparable(u), 0) for u in written]
    assert sorted(again, key=repr) == sorted([(comparable(u), 1) for u in written], key=repr)


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_batching_by_default_and_closing(
    module_name: str, pulsar_broker: PulsarBroker, topic: str
) -> None:
    """The asyncio module's create_producer batches unless told otherwise (the blocking
    one does not); a second close, and a send after shutdown, raise AlreadyClosed; a close
    after shutdown waits for it."""
    aio = importlib.import_module(module_name)
    pulsar = importlib.import_module(module_name.rsplit(".", 1)[0])
    client = aio.Client(pulsar_broker.service_url, logger=QUIET)
    producer = await client.create_producer(topic)
    first, second = await asyncio.gather(producer.send(b"a"), producer.send(b"b"))
    assert first.entry_id() == second.entry_id()  # one batch
    assert (first.batch_index(), second.batch_index()) == (0, 1)
    unbatched = await client.create_producer(topic, batching_enabled=False)
    alone = await asyncio.gather(unbatched.send(b"c"), unbatched.send(b"d"))
    assert alone[0].entry_id() != alone[1].entry_id()
    await unbatched.close()
    with pytest.raises(aio.PulsarException) as closed:
        await unbatched.close()
    assert closed.value.error() == pulsar.Result.AlreadyClosed
    await client.close()
    with pytest.raises(aio.PulsarException) as closed:
        await client.close()
    assert closed.value.error() == pulsar.Result.AlreadyClosed

    client = aio.Client(pulsar_broker.service_url, logger=QUIET)
    producer = await client.create_producer(topic)
    client.shutdown()
    with pytest.raises(aio.PulsarException) as refused:
        await asyncio.wait_for(producer.send(b"after"), RECEIVE_MS / 1000)
    assert refused.value.error() == pulsar.Result.AlreadyClosed
    await asyncio.wait_for(client.close(), RECEIVE_MS / 1000)


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_set_future_completes_a_pending_future_only(module_name: str) -> None:
    """The official module's private ``_set_future``, which its own tests call."""
    aio = importlib.import_module(module_name)
    result = importlib.import_module("_pulsar").Result  # the official test passes these
    loop = asyncio.get_running_loop()
    cancelled, resolved, pending, failed = (loop.create_future() for _ in range(4))
    cancelled.cancel()
    resolved.set_result("first")
    aio._set_future(cancelled, result.Ok, None)
    aio._set_future(resolved, result.Ok, "late")
    aio._set_future(pending, result.Ok, "value")
    aio._set_future(failed, result.Timeout, None)
    for _ in range(3):  # the official one completes them on the loop (call_soon_threadsafe)
        await asyncio.sleep(0)
    assert cancelled.cancelled() and resolved.result() == "first"
    assert pending.result() == "value"
    assert isinstance(failed.exception(), aio.PulsarException)
    assert failed.exception().error().name == "Timeout"


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_a_token_supplier_error_keeps_its_message(
    module_name: str, pulsar_broker: PulsarBroker, topic: str
) -> None:
    aio = importlib.import_module(module_name)
    pulsar = importlib.import_module(module_name.rsplit(".", 1)[0])

    def failing_supplier() -> str:
        raise RuntimeError("token supplier failed")

    client = aio.Client(
        pulsar_broker.service_url,
        authentication=pulsar.AuthenticationToken(failing_supplier),
        operation_timeout_seconds=5,
        logger=QUIET,
    )
    try:
        with pytest.raises(aio.PulsarException) as raised:
            await asyncio.wait_for(client.create_producer(topic), 10)
        assert raised.value.error() == pulsar.Result.AuthenticationError
        assert "token supplier failed" in str(raised.value)
    finally:
        await client.close()
