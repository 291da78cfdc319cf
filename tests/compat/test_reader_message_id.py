"""MessageId (earliest, latest, serialize, deserialize(data, topic=...), accessors,
comparisons), readers from earliest / latest / an id, get_last_message_id, partitions."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.compat.conftest import RECEIVE_MS


def test_message_ids(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    pulsar = pulsar_module
    producer = client.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(3)]
    data = ids[1].serialize()
    again = pulsar.MessageId.deserialize(data, topic=topic)
    assert (again.ledger_id(), again.entry_id(), again.partition(), again.batch_index()) == (
        ids[1].ledger_id(),
        ids[1].entry_id(),
        -1,
        -1,
    )
    assert str(again) == str(ids[1])
    assert ids[0] < ids[1] <= ids[1] < ids[2]
    assert ids[2] > ids[0] and ids[2] >= ids[2] and ids[0] != ids[1]
    assert str(pulsar.MessageId.earliest) == "(-1,-1,-1,-1)"
    assert str(pulsar.MessageId.latest) == "(9223372036854775807,9223372036854775807,-1,-1)"
    made = pulsar.MessageId(2, 10, 20, 3)  # partition, ledger, entry, batch index
    assert str(made) == "(10,20,2,3)"
    assert str(pulsar.MessageId.wrap(ids[1])) == str(ids[1])  # wrap takes what send returned
    producer.close()


def test_readers(pulsar_module: ModuleType, client: Any, topic: str) -> None:
    pulsar = pulsar_module
    producer = client.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(3)]

    from_earliest = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [from_earliest.read_next(RECEIVE_MS).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    assert not from_earliest.has_message_available()
    assert from_earliest.topic() == f"persistent://public/default/{topic}"
    assert from_earliest.is_connected()

    after_first = client.create_reader(topic, ids[0])
    assert after_first.read_next(RECEIVE_MS).data() == b"m1"

    restored = pulsar.MessageId.deserialize(ids[0].serialize())
    inclusive = client.create_reader(topic, restored, start_message_id_inclusive=True)
    assert inclusive.read_next(RECEIVE_MS).data() == b"m0"

    from_latest = client.create_reader(topic, pulsar.MessageId.latest)
    producer.send(b"new")
    assert from_latest.read_next(RECEIVE_MS).data() == b"new"
    for reader in (from_earliest, after_first, inclusive, from_latest):
        reader.close()

    consumer = client.subscribe(topic, "sub")
    assert str(consumer.get_last_message_id()).startswith(f"({ids[0].ledger_id()},3,")
    consumer.close()
    producer.close()


def test_topic_partitions(client: Any, topic: str) -> None:
    assert client.get_topic_partitions(topic) == [f"persistent://public/default/{topic}"]


def test_ids_acknowledged_on_a_consumer_of_several_topics(
    pulsar_module: ModuleType, client: Any, topic: str
) -> None:
    """A multi-topic consumer acknowledges a received message's id, and an id deserialized
    with its topic; a plain id (as ``send`` returns it) names no topic and is refused."""
    pulsar = pulsar_module
    first, second = f"{topic}-a", f"{topic}-b"
    consumer = client.subscribe([first, second], "sub")
    producers = [client.create_producer(t) for t in (first, second)]
    sent = producers[0].send(b"a-0")
    producers[1].send(b"b-0")
    received = {}
    for _ in range(2):
        message = consumer.receive(RECEIVE_MS)
        received[message.topic_name()] = message
    with pytest.raises(pulsar.OperationNotSupported):
        consumer.acknowledge(sent)
    by_topic = sorted(received)
    consumer.acknowledge(received[by_topic[0]].message_id())
    serialized = received[by_topic[1]].message_id().serialize()
    consumer.acknowledge_cumulative(pulsar.MessageId.deserialize(serialized, topic=by_topic[1]))
    consumer.close()

    consumer = client.subscribe([first, second], "sub")
    producers[0].send(b"a-1")
    assert consumer.receive(RECEIVE_MS).data() == b"a-1"  # nothing acknowledged came back
    consumer.close()
    for producer in producers:
        producer.close()
