"""TableView (latest value per key, null values delete, listener), the asyncio module and
the positional policies on both modules; the loggers mapped onto Python logging."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker
from tests.compat.conftest import QUIET, RECEIVE_MS


def wait_until(condition: Any, seconds: float = RECEIVE_MS / 1000) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_table_view(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"1", partition_key="a")
    producer.send(b"2", partition_key="b")
    producer.send(b"3", partition_key="a")
    producer.send(None, partition_key="b")  # deletes b
    view = client.create_table_view(topic)
    assert len(view) == 1 and view.get("a") == b"3" and view.get("b") is None
    seen: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def listener(key: str, value: bytes) -> None:
        with lock:
            seen.append((key, value))

    view.for_each_and_listen(listener)
    producer.send(b"4", partition_key="c")
    wait_until(lambda: len(view) == 2)
    wait_until(lambda: ("c", b"4") in seen)
    entries: list[tuple[str, bytes]] = []
    view.for_each(lambda k, v: entries.append((k, v)))
    assert sorted(entries) == [("a", b"3"), ("c", b"4")]
    assert seen[0] == ("a", b"3")
    view.close()
    producer.close()


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_asyncio_module(module_name: str, pulsar_broker: PulsarBroker, topic: str) -> None:
    aio = importlib.import_module(module_name)
    blocking_module = importlib.import_module(module_name.rsplit(".", 1)[0])
    client = aio.Client(pulsar_broker.service_url, logger=QUIET)
    consumer = await client.subscribe(
        topic, "sub", initial_position=blocking_module.InitialPosition.Earliest
    )
    producer = await client.create_producer(topic)
    message_id = await producer.send(b"async", partition_key="k")
    message = await asyncio.wait_for(consumer.receive(), RECEIVE_MS / 1000)
    assert (message.data(), message.partition_key()) == (b"async", "k")
    assert str(message.message_id()) == str(message_id)
    await consumer.acknowledge(message)
    assert producer.topic() == consumer.topic()
    assert await client.get_topic_partitions(topic) == [f"persistent://public/default/{topic}"]
    reader = await client.create_reader(topic, blocking_module.MessageId.earliest)
    assert (await reader.read_next()).data() == b"async"
    await reader.close()
    await producer.close()
    await consumer.close()
    with pytest.raises(aio.PulsarException) as closed:
        await producer.send(b"late")
    assert closed.value.error() == blocking_module.Result.AlreadyClosed
    await client.close()


# The loggers on pulsar_compat only: the official client's log destination is set once per
# process (by its first client), so it cannot be compared within one test session.


def test_python_logger_receives_msgclient_logs(pulsar_broker: PulsarBroker) -> None:
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    target = logging.getLogger("tests.compat.collect")
    target.setLevel(logging.INFO)
    target.propagate = False
    target.addHandler(Collect())
    try:
        client = pulsar_compat.Client(pulsar_broker.service_url, logger=target)
        logging.getLogger("protocols.pulsarwire.session").info("probe %d", 1)
        logging.getLogger("msgclient.core").debug("below the logger's level")
        client.close()
    finally:
        restore_logging()
    assert [r.getMessage() for r in records] == ["probe 1"]


def test_file_logger_writes_from_its_level(pulsar_broker: PulsarBroker, tmp_path: Any) -> None:
    log_file = tmp_path / "client.log"
    assert pulsar_compat.ConsoleLogger().log_level == pulsar_compat.LoggerLevel.Info
    file_logger = pulsar_compat.FileLogger(pulsar_compat.LoggerLevel.Warn, str(log_file))
    try:
        client = pulsar_compat.Client(pulsar_broker.service_url, logger=file_logger)
        logging.getLogger("msgclient.core").warning("written")
        logging.getLogger("msgclient.core").info("not written")
        client.close()
    finally:
        restore_logging()
    lines = log_file.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith("msgclient.core | written")
    with pytest.raises(ValueError):
        pulsar_compat.ConsoleLogger("INFO")  # type: ignore[arg-type]


def restore_logging() -> None:
    for name in ("msgclient", "protocols"):
        source = logging.getLogger(name)
        for handler in list(source.handlers):
            source.removeHandler(handler)
            handler.close()
        source.propagate = True
        source.setLevel(logging.NOTSET)


def test_positional_policies(pulsar_module: ModuleType) -> None:
    pulsar = pulsar_module
    policy = pulsar.ConsumerDeadLetterPolicy(5, "dlq-topic")
    assert (policy.max_redeliver_count, policy.dead_letter_topic) == (5, "dlq-topic")
    assert policy.initial_subscription_name == ""
    with pytest.raises(ValueError):
        pulsar.ConsumerDeadLetterPolicy(0)
    batch = pulsar.BatchReceivePolicy(10, -1, 100)
    assert (batch.getMaxNumMessages(), batch.getMaxNumBytes(), batch.getTimeoutMs()) == (
        10,
        -1,
        100,
    )
    with pytest.raises(ValueError):
        pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky)
    sticky = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, True, [(0, 100)])
    assert sticky.sticky_ranges == [(0, 100)] and sticky.allow_out_of_order_delivery
    token = pulsar.AuthenticationToken("secret")
    assert isinstance(token, pulsar.Authentication)
    with pytest.raises(ValueError):
        pulsar.AuthenticationToken(42)
