"""End-to-end encryption, the same programs on the official client and on pulsar_compat:
each module's producer encrypts for the other module's consumer (batched and not, LZ4); a
consumer that cannot decrypt does what its crypto_failure_action says, and with CONSUME
both deliver the same entries with the same encryption_context(); the arguments are
checked alike, a half-configured producer sends plaintext in both, a missing key file is a
CryptoError in both.

Keys are made here (RSA 2048, PEM files in a temporary directory); none is committed.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pulsar
import pytest

from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker
from tests.compat.conftest import QUIET, RECEIVE_MS
from tests.pulsar.test_encryption import KeyPair, right_and_wrong_keys

KEY_NAME = "e2e-key"
SENT = [
    (b"first secret", "k1", {"p": "1"}),
    (b"second " * 200, "", {}),  # compressible
    (b"third", "", {}),
]
QUIET_MS = 500  # no message for this long: the consumer has nothing more to give
DRAIN_SECONDS = 15.0  # the bound of a drain
MODULES = {"official": pulsar, "compat": pulsar_compat}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[KeyPair, KeyPair]:
    return right_and_wrong_keys(tmp_path_factory.mktemp("keys"))


def key_reader(module: ModuleType, pair: KeyPair) -> Any:
    return module.CryptoKeyReader(str(pair.public), str(pair.private))


def new_client(module: ModuleType, broker: PulsarBroker) -> Any:
    return module.Client(broker.service_url, operation_timeout_seconds=10, logger=QUIET)


def produce(module: ModuleType, broker: PulsarBroker, topic: str, **options: Any) -> None:
    """SENT with send_async and a flush: one entry when ``batching_enabled``."""
    client = new_client(module, broker)
    try:
        producer = client.create_producer(
            topic,
            compression_type=module.CompressionType.LZ4,
            batching_max_publish_delay_ms=60_000,  # the flush sends the batch
            **options,
        )
        results: list[Any] = []
        sent = threading.Event()

        def callback(result: Any, _message_id: Any) -> None:
            results.append(result)
            if len(results) == len(SENT):
                sent.set()

        for value, key, properties in SENT:
            producer.send_async(value, callback, partition_key=key or None, properties=properties)
        producer.flush()
        assert sent.wait(RECEIVE_MS / 1000)
        assert results == [module.Result.Ok] * len(SENT)
    finally:
        client.close()


def drain(consumer: Any, module: ModuleType, at_least: int) -> list[Any]:
    """``at_least`` messages (each waited for, within DRAIN_SECONDS in all), then every
    message until none comes for QUIET_MS; each acknowledged. The quiet period shows that
    nothing more comes; it never cuts short what is expected."""
    received: list[Any] = []
    deadline = time.monotonic() + DRAIN_SECONDS
    while time.monotonic() < deadline:
        expecting = len(received) < at_least
        wait_ms = int((deadline - time.monotonic()) * 1000) if expecting else QUIET_MS
        try:
            message = consumer.receive(max(1, wait_ms))
        except module.Timeout:
            if expecting:
                break
            return received
        consumer.acknowledge(message)
        received.append(message)
    if len(received) < at_least:
        raise AssertionError(f"{len(received)} messages in {DRAIN_SECONDS:g} s, not {at_least}")
    raise AssertionError(f"messages kept coming for {DRAIN_SECONDS:g} s")


def subscribe(client: Any, module: ModuleType, topic: str, name: str, **options: Any) -> Any:
    return client.subscribe(
        topic,
        name,
        consumer_type=module.ConsumerType.Shared,
        initial_position=module.InitialPosition.Earliest,
        **options,
    )


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize(
    ("producing", "consuming"), [("official", "compat"), ("compat", "official")]
)
def test_each_decrypts_the_others_messages(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    producing: str,
    consuming: str,
    batching: bool,
) -> None:
    right, _ = keys
    producer_module, consumer_module = MODULES[producing], MODULES[consuming]
    produce(
        producer_module,
        pulsar_broker,
        topic,
        batching_enabled=batching,
        encryption_key=KEY_NAME,
        crypto_key_reader=key_reader(producer_module, right),
    )
    client = new_client(consumer_module, pulsar_broker)
    try:
        consumer = subscribe(
            client,
            consumer_module,
            topic,
            "sub",
            crypto_key_reader=key_reader(consumer_module, right),
        )
        received = [consumer.receive(RECEIVE_MS) for _ in SENT]
        contexts = [m.encryption_context() for m in received]
        # The entries as stored: encrypted.
        raw = subscribe(
            client,
            consumer_module,
            topic,
            "raw",
            crypto_failure_action=consumer_module.ConsumerCryptoFailureAction.CONSUME,
        )
        stored = drain(raw, consumer_module, 1 if batching else len(SENT))
    finally:
        client.close()

    assert [(m.data(), m.partition_key(), m.properties()) for m in received] == SENT
    assert len(stored) == (1 if batching else len(SENT))
    assert not any(value in m.data() for value, _, _ in SENT for m in stored)
    # A decrypted message has its context too, as the official client gives it.
    described = [Context.of(consumer_module, c) for c in contexts]
    assert all(not c.is_decryption_failed for c in described)
    assert [[name for name, _, _ in c.keys] for c in described] == [[KEY_NAME]] * len(SENT)
    assert {(c.compression_type, c.batch_size) for c in described} == {
        ("LZ4", len(SENT) if batching else -1)
    }


@attrs.frozen
class Context:
    """An encryption_context()'s contents."""

    keys: list[tuple[str, bytes, dict[str, str]]]
    param: bytes
    algorithm: str
    compression_type: str
    uncompressed_message_size: int
    batch_size: int
    is_decryption_failed: bool

    @classmethod
    def of(cls, module: ModuleType, context: Any) -> Context:
        assert isinstance(context.compression_type(), module.CompressionType)
        keys = context.keys()  # a method of the official EncryptionContext
        return cls(
            [(k.key, k.value, k.metadata) for k in keys],
            context.param(),
            context.algorithm(),
            context.compression_type().name,
            context.uncompressed_message_size(),
            context.batch_size(),
            context.is_decryption_failed(),
        )


@attrs.frozen
class Delivered:
    data: bytes
    entry: tuple[int, int, int]  # ledger, entry, batch index
    context: Context | None


@attrs.frozen
class Outcome:
    delivered: list[Delivered]  # what the consumer that cannot decrypt gets
    left: list[bytes]  # what a consumer with the right key then finds on the subscription


def outcome(
    module: ModuleType,
    broker: PulsarBroker,
    topic: str,
    action: str,
    wrong: KeyPair | None,
    right: KeyPair,
    expected: tuple[int, int],
) -> Outcome:
    """``expected``: how many messages the consumer that cannot decrypt gets, and how many
    are left (waited for by count, not taken from a quiet period)."""
    client = new_client(module, broker)
    try:
        failing = subscribe(
            client,
            module,
            topic,
            module.__name__,
            crypto_key_reader=None if wrong is None else key_reader(module, wrong),
            crypto_failure_action=module.ConsumerCryptoFailureAction.__members__[action],
        )
        delivered = [
            Delivered(
                m.data(),
                (
                    m.message_id().ledger_id(),
                    m.message_id().entry_id(),
                    m.message_id().batch_index(),
                ),
                None
                if m.encryption_context() is None
                else Context.of(module, m.encryption_context()),
            )
            for m in drain(failing, module, expected[0])
        ]
        failing.close()
        then = subscribe(
            client, module, topic, module.__name__, crypto_key_reader=key_reader(module, right)
        )
        return Outcome(delivered, [m.data() for m in drain(then, module, expected[1])])
    finally:
        client.close()


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("cause", ["no-reader", "wrong-key"])
@pytest.mark.parametrize("action", ["FAIL", "DISCARD", "CONSUME"])
def test_a_consumer_that_cannot_decrypt_acts_as_the_official_one(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    action: str,
    cause: str,
    batching: bool,
) -> None:
    """FAIL: nothing delivered, everything left for a consumer with the key. DISCARD:
    nothing delivered, nothing left. CONSUME: each entry delivered as stored (a batch as
    one message), with the same data and encryption_context() in both modules."""
    right, wrong = keys
    produce(
        pulsar,
        pulsar_broker,
        topic,
        batching_enabled=batching,
        encryption_key=KEY_NAME,
        crypto_key_reader=key_reader(pulsar, right),
    )
    reader = None if cause == "no-reader" else wrong
    entries = 1 if batching else len(SENT)
    expected = {"FAIL": (0, len(SENT)), "DISCARD": (0, 0), "CONSUME": (entries, 0)}[action]
    theirs = outcome(pulsar, pulsar_broker, topic, action, reader, right, expected)
    ours = outcome(pulsar_compat, pulsar_broker, topic, action, reader, right, expected)

    assert ours == theirs
    plain = [value for value, _, _ in SENT]
    if action == "FAIL":
        assert ours == Outcome([], plain)
    elif action == "DISCARD":
        assert ours == Outcome([], [])
    else:
        assert ours.left == []
        assert len(ours.delivered) == (1 if batching else len(SENT))
        for delivered in ours.delivered:
            context = delivered.context
            assert context is not None and context.is_decryption_failed
            assert [name for name, _, _ in context.keys] == [KEY_NAME]
            assert len(context.param) == 12 and context.algorithm == ""
            assert context.compression_type == "LZ4"
            assert context.batch_size == (len(SENT) if batching else -1)


def test_crypto_arguments_are_checked_alike(
    pulsar_module: ModuleType, client: Any, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    pulsar = pulsar_module
    right, _ = keys
    with pytest.raises(ValueError, match="public_key_path"):
        pulsar.CryptoKeyReader(right.public, str(right.private))  # a Path, not a str
    with pytest.raises(ValueError, match="private_key_path"):
        pulsar.CryptoKeyReader(str(right.public), None)
    with pytest.raises(ValueError, match="crypto_key_reader"):
        client.create_producer(topic, encryption_key=KEY_NAME, crypto_key_reader=object())
    with pytest.raises(ValueError, match="encryption_key"):
        client.create_producer(topic, encryption_key=[KEY_NAME])
    with pytest.raises(ValueError, match="crypto_key_reader"):
        client.subscribe(topic, "sub", crypto_key_reader=str(right.private))
    with pytest.raises(ValueError, match="crypto_failure_action"):
        client.subscribe(topic, "sub", crypto_failure_action="CONSUME")


@pytest.mark.parametrize("half", ["key-only", "reader-only", "empty-key"])
def test_a_producer_without_both_a_key_and_a_reader_sends_plaintext(
    pulsar_module: ModuleType,
    client: Any,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    half: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As the official client: encryption needs both a key name and a key reader; with
    one of them ('' is no key name) the messages go unencrypted, without an error
    (pulsar_compat logs a warning)."""
    pulsar = pulsar_module
    right, _ = keys
    options: dict[str, Any] = {
        "key-only": {"encryption_key": KEY_NAME},
        "reader-only": {"crypto_key_reader": key_reader(pulsar, right)},
        "empty-key": {"encryption_key": "", "crypto_key_reader": key_reader(pulsar, right)},
    }[half]
    consumer = subscribe(client, pulsar, topic, "plain")  # no key reader: FAIL if encrypted
    producer = client.create_producer(topic, **options)
    producer.send(b"in the clear")
    message = consumer.receive(RECEIVE_MS)
    assert message.data() == b"in the clear"
    assert message.encryption_context() is None
    if pulsar is pulsar_compat:
        assert "messages are sent unencrypted" in caplog.text


def test_an_unreadable_public_key_is_a_crypto_error(
    pulsar_module: ModuleType, client: Any, topic: str, tmp_path: Path
) -> None:
    """pulsar_compat fails the producer's creation, the official client its sends: the
    same program catches CryptoError (a PulsarException) either way."""
    pulsar = pulsar_module
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(pulsar.CryptoError) as error:
        producer = client.create_producer(
            topic,
            encryption_key=KEY_NAME,
            crypto_key_reader=pulsar.CryptoKeyReader(missing, missing),
        )
        producer.send(b"secret")
    assert isinstance(error.value, pulsar.PulsarException)


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "msgclient.pulsar_compat.asyncio"])
async def test_the_asyncio_module_encrypts_and_decrypts(
    module_name: str, pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    right, _ = keys
    aio = importlib.import_module(module_name)
    pulsar = importlib.import_module(module_name.rsplit(".", 1)[0])
    client = aio.Client(pulsar_broker.service_url, logger=QUIET)
    try:
        consumer = await client.subscribe(
            topic,
            "sub",
            initial_position=pulsar.InitialPosition.Earliest,
            crypto_key_reader=key_reader(pulsar, right),
        )
        raw = await client.subscribe(
            topic,
            "raw",
            initial_position=pulsar.InitialPosition.Earliest,
            crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME,
        )
        producer = await client.create_producer(
            topic, encryption_key=KEY_NAME, crypto_key_reader=key_reader(pulsar, right)
        )
        await producer.send(b"secret")
        message = await asyncio.wait_for(consumer.receive(), RECEIVE_MS / 1000)
        stored = await asyncio.wait_for(raw.receive(), RECEIVE_MS / 1000)
    finally:
        await client.close()
    assert message.data() == b"secret"
    assert b"secret" not in stored.data()
    assert stored.encryption_context().is_decryption_failed()


@pytest.mark.parametrize("module", MODULES.values(), ids=MODULES.keys())
def test_a_reader_decrypts_with_its_key_reader(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair], module: ModuleType
) -> None:
    right, _ = keys
    produce(
        pulsar,
        pulsar_broker,
        topic,
        batching_enabled=True,
        encryption_key=KEY_NAME,
        crypto_key_reader=key_reader(pulsar, right),
    )
    client = new_client(module, pulsar_broker)
    try:
        reader = client.create_reader(
            topic, module.MessageId.earliest, crypto_key_reader=key_reader(module, right)
        )
        read = [reader.read_next(RECEIVE_MS) for _ in SENT]
        assert [m.data() for m in read] == [value for value, _, _ in SENT]
        reader.close()
    finally:
        client.close()
