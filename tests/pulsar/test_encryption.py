"""End-to-end encryption against the official client (3.13) on pulsar-lite: each reads the
other's encrypted messages, batched and not, compressed and not; a consumer that cannot
decrypt does what its crypto_failure_action says, as the official consumer does on the same
entries.

Keys are made here (RSA 2048, PEM files in a temporary directory); none is committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import msgclient
from msgclient.crypto_key_reader import (
    CryptoError,
    CryptoKeyReader,
    EncryptionKey,
    EncryptionKeyInfo,
    FileCryptoKeyReader,
)
from msgclient.embedded import PulsarBroker
from msgclient.options import ConsumerCryptoFailureAction
from protocols.pulsarwire import message_crypto
from protocols.pulsarwire.compression import get_codec
from protocols.pulsarwire.encryption import EncryptionContext, UndecryptedMessage
from protocols.pulsarwire.message_crypto import load_private_key, unseal, unwrap_data_key
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.consume_helpers import drain, receive_n
from tests.pulsar.helpers import (
    QUIET_MS,
    SHARED_FROM_EARLIEST,
    TIMEOUT,
    Publish,
    official_client,
    official_produce,
    receive,
    settle,
    tap_wire,
)

KEY_NAME = "e2e-key"
SENT = [
    Publish(b"first secret", partition_key="k1", properties={"p": "1"}),
    Publish(b"second " * 200),  # compressible
    Publish(b"third"),
]
OFFICIAL_ACTIONS = {
    ConsumerCryptoFailureAction.FAIL: pulsar.ConsumerCryptoFailureAction.FAIL,
    ConsumerCryptoFailureAction.DISCARD: pulsar.ConsumerCryptoFailureAction.DISCARD,
    ConsumerCryptoFailureAction.CONSUME: pulsar.ConsumerCryptoFailureAction.CONSUME,
}
COMPRESSIONS = {
    "none": (msgclient.CompressionType.NONE, pulsar.CompressionType.NONE),
    "lz4": (msgclient.CompressionType.LZ4, pulsar.CompressionType.LZ4),
}


@attrs.frozen
class KeyPair:
    public: Path
    private: Path

    def official_reader(self) -> pulsar.CryptoKeyReader:
        return pulsar.CryptoKeyReader(str(self.public), str(self.private))

    def reader(self) -> FileCryptoKeyReader:
        return FileCryptoKeyReader(self.public, self.private)


def write_pair(directory: Path, name: str, key: Any) -> KeyPair:
    public = directory / f"{name}.pub.pem"
    private = directory / f"{name}.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return KeyPair(public, private)


def right_and_wrong_keys(directory: Path) -> tuple[KeyPair, KeyPair]:
    """Two RSA key pairs: the one the producers use, and another (a wrong key)."""
    return (
        write_pair(directory, "right", rsa.generate_private_key(65537, 2048)),
        write_pair(directory, "wrong", rsa.generate_private_key(65537, 2048)),
    )


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[KeyPair, KeyPair]:
    return right_and_wrong_keys(tmp_path_factory.mktemp("keys"))


def official_consumer(
    official: pulsar.Client, topic: str, subscription: str, pair: KeyPair | None, **options: Any
) -> pulsar.Consumer:
    """An official Shared consumer from the earliest message, with ``pair``'s key reader
    (None: no reader)."""
    return official.subscribe(
        topic,
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        crypto_key_reader=pair.official_reader() if pair else None,
        **options,
    )


def values(messages: list[Any]) -> list[bytes]:
    return [m.data() for m in messages]


async def msgclient_produce(url: str, topic: str, batching: bool, **options: Any) -> None:
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=batching, **options)
        await settle([await producer.send_async(p.value, **p.options()) for p in SENT])


async def official_encrypted_produce(
    url: str,
    topic: str,
    messages: Sequence[Publish],
    pair: KeyPair,
    compression: str,
    **options: Any,
) -> None:
    """``messages`` from the official producer, encrypted for KEY_NAME with ``pair``."""
    await official_produce(
        url,
        topic,
        messages,
        compression_type=COMPRESSIONS[compression][1],
        encryption_key=KEY_NAME,
        crypto_key_reader=pair.official_reader(),
        **options,
    )


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_msgclient_decrypts_the_official_producers_messages(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    batching: bool,
    compression: str,
) -> None:
    right, _ = keys
    url = pulsar_broker.service_url
    await official_encrypted_produce(
        url, topic, SENT, right, compression, batching_enabled=batching
    )
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic, "sub", crypto_key_reader=right.reader(), **SHARED_FROM_EARLIEST
        )
        received = await receive_n(consumer, len(SENT))
        # The same entries undecrypted: they were encrypted on the wire.
        raw = await client.subscribe(
            topic,
            "raw",
            crypto_failure_action=ConsumerCryptoFailureAction.CONSUME,
            **SHARED_FROM_EARLIEST,
        )
        undecrypted = await drain(raw, at_least=1 if batching else len(SENT))

    assert values(received) == [p.value for p in SENT]
    assert [m.partition_key() for m in received] == [p.partition_key for p in SENT]
    assert [m.properties() for m in received] == [p.properties or {} for p in SENT]
    assert len(undecrypted) == (1 if batching else len(SENT))  # a batch undecrypted is one
    for message in undecrypted:
        assert isinstance(message, UndecryptedMessage)
        context = message.encryption_context()
        assert [k.key for k in context.keys] == [KEY_NAME]
        assert len(context.param) == 12 and context.algorithm == ""
        assert not any(p.value in message.data() for p in SENT)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
async def test_the_official_consumer_decrypts_msgclients_messages(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    batching: bool,
    compression: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    right, _ = keys
    url = pulsar_broker.service_url
    tap = tap_wire(monkeypatch)
    await msgclient_produce(
        url,
        topic,
        batching,
        compression_type=COMPRESSIONS[compression][0],
        encryption_keys=[KEY_NAME],
        crypto_key_reader=FileCryptoKeyReader(public_key_path=right.public),
    )
    with official_client(url) as official:
        consumer = official_consumer(official, topic, "sub", right)
        received = await receive(consumer, len(SENT))
        contexts = [m.encryption_context() for m in received]

    assert values(received) == [p.value for p in SENT]
    assert [m.partition_key() for m in received] == [p.partition_key or "" for p in SENT]
    for context in contexts:
        assert context is not None and not context.is_decryption_failed()
        official_keys = context.keys()  # a method of the official EncryptionContext
        assert [k.key for k in official_keys] == [KEY_NAME]
    # As the official producer: PRODUCER says the producer encrypts.
    (producer,) = tap.of_type(pb.BaseCommand.PRODUCER)
    assert producer.producer.encrypted


class NamedKeys(CryptoKeyReader):
    """A key pair per key name, with the key's version as its metadata; records the
    metadata each private key was asked with."""

    def __init__(self, pairs: Mapping[str, KeyPair]) -> None:
        self.pairs = pairs
        self.asked: list[tuple[str, dict[str, str]]] = []

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(self.pairs[key_name].public.read_bytes(), {"version": key_name})

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.asked.append((key_name, dict(metadata)))
        return EncryptionKeyInfo(self.pairs[key_name].private.read_bytes())


async def test_several_key_names_each_consumer_opens_with_the_key_it_has(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    """Two key names, two key pairs: a consumer holding only the second private key reads
    (the official one too), and our reader gets back the metadata the producer's gave.
    Three entries under one data key: the private keys are asked for once."""
    right, other = keys
    url = pulsar_broker.service_url
    await msgclient_produce(
        url,
        topic,
        False,
        encryption_keys=["first", "second"],
        crypto_key_reader=NamedKeys({"first": right, "second": other}),
    )
    second_only = NamedKeys({"second": other})  # asking for "first" raises KeyError
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic, "ours", crypto_key_reader=second_only, **SHARED_FROM_EARLIEST
        )
        received = await receive_n(consumer, len(SENT))
    with official_client(url) as official:
        # The official reader ignores key names: it fails "first".
        consumer = official_consumer(official, topic, "theirs", other)
        official_received = await receive(consumer, len(SENT))

    assert values(received) == values(official_received) == [p.value for p in SENT]
    assert second_only.asked == [("first", {"version": "first"}), ("second", {"version": "second"})]


# -- a consumer that cannot decrypt --------------------------------------------------------


@attrs.frozen
class Outcome:
    delivered: list[bytes]  # what the failing consumer received (and acknowledged)
    left: list[bytes]  # what a consumer with the right key then finds on the subscription


def expected_counts(
    action: ConsumerCryptoFailureAction, entries: int, messages: int = len(SENT)
) -> tuple[int, int]:
    """How many messages the failing consumer gets, and how many are then left: waited for
    by count, so that a slow dispatch is not taken for the end (then nothing more comes)."""
    if action is ConsumerCryptoFailureAction.FAIL:
        return 0, messages
    if action is ConsumerCryptoFailureAction.DISCARD:
        return 0, 0
    return entries, 0


def official_outcome(
    url: str,
    topic: str,
    action: ConsumerCryptoFailureAction,
    reader: KeyPair | None,
    right: KeyPair,
    expected: tuple[int, int],
) -> Outcome:
    with official_client(url) as official:
        failing = official_consumer(
            official, topic, "official", reader, crypto_failure_action=OFFICIAL_ACTIONS[action]
        )
        delivered = official_drain(failing, expected[0])
        failing.close()
        then = official_consumer(official, topic, "official", right)
        return Outcome(delivered, official_drain(then, expected[1]))


def official_drain(consumer: pulsar.Consumer, at_least: int) -> list[bytes]:
    """``at_least`` messages (each waited for, within TIMEOUT in all), then every message
    until none comes for QUIET_MS; each acknowledged."""
    received: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        expecting = len(received) < at_least
        wait_ms = int((deadline - time.monotonic()) * 1000) if expecting else QUIET_MS
        try:
            message = consumer.receive(timeout_millis=max(1, wait_ms))
        except pulsar.Timeout:
            if expecting:
                break
            return received
        consumer.acknowledge(message)
        received.append(message.data())
    if len(received) < at_least:
        raise AssertionError(f"{len(received)} messages within {TIMEOUT:g} s, not {at_least}")
    raise AssertionError(f"messages kept coming for {TIMEOUT:g} s")


async def msgclient_outcome(
    url: str,
    topic: str,
    action: ConsumerCryptoFailureAction,
    reader: KeyPair | None,
    right: KeyPair,
    expected: tuple[int, int],
) -> tuple[Outcome, list[msgclient.Message]]:
    async with msgclient.Client(url) as client:
        failing = await client.subscribe(
            topic,
            "ours",
            crypto_key_reader=reader.reader() if reader else None,
            crypto_failure_action=action,
            **SHARED_FROM_EARLIEST,
        )
        delivered = await drain(failing, ack=True, at_least=expected[0])
        await failing.close()
        then = await client.subscribe(
            topic, "ours", crypto_key_reader=right.reader(), **SHARED_FROM_EARLIEST
        )
        left = await drain(then, ack=True, at_least=expected[1])
    return Outcome(values(delivered), values(left)), delivered


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("cause", ["no-reader", "wrong-key"])
@pytest.mark.parametrize("action", list(ConsumerCryptoFailureAction), ids=lambda a: a.name)
async def test_a_consumer_that_cannot_decrypt_acts_as_the_official_one(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    action: ConsumerCryptoFailureAction,
    cause: str,
    batching: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FAIL: nothing delivered, all left for a consumer with the key. DISCARD: nothing
    delivered, nothing left (acknowledged as DecryptionError). CONSUME: the entries
    delivered as they are stored (a batch as one message), byte for byte what the official
    consumer gets."""
    right, wrong = keys
    url = pulsar_broker.service_url
    await msgclient_produce(
        url,
        topic,
        batching,
        compression_type=msgclient.CompressionType.LZ4,
        encryption_keys=KEY_NAME,
        crypto_key_reader=right.reader(),
    )
    reader = None if cause == "no-reader" else wrong
    tap = tap_wire(monkeypatch)
    expected = expected_counts(action, 1 if batching else len(SENT))
    ours, delivered = await msgclient_outcome(url, topic, action, reader, right, expected)
    theirs = await asyncio.to_thread(official_outcome, url, topic, action, reader, right, expected)

    assert ours == theirs
    plain = [p.value for p in SENT]
    entries = 1 if batching else len(SENT)
    if action is ConsumerCryptoFailureAction.FAIL:
        assert ours == Outcome([], plain)
    elif action is ConsumerCryptoFailureAction.DISCARD:
        assert ours == Outcome([], [])
        reasons = [a.validation_error for a in tap.acks() if a.HasField("validation_error")]
        assert reasons == [pb.CommandAck.DecryptionError] * entries
    else:
        assert len(ours.delivered) == entries and ours.left == []
        assert decrypt_by_hand(delivered, right) == plain


class SwitchableKeys(CryptoKeyReader):
    """No private key until ``pair`` is set."""

    def __init__(self) -> None:
        self.pair: KeyPair | None = None

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        raise CryptoError("a consumer's reader")

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        if self.pair is None:
            raise CryptoError(f"no key {key_name!r} yet")
        return EncryptionKeyInfo(self.pair.private.read_bytes())


async def test_fail_with_an_ack_timeout_tries_again_after_the_timeout(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    """As the official consumer's ack-timeout tracker (ConsumerImpl.decryptMessageIfNeeded
    adds the failed message to it): the message comes back after the ack timeout, and once
    the key is there it is delivered. (Not compared with the official client here: its ack
    timeout is at least 10 s.)"""
    right, _ = keys
    url = pulsar_broker.service_url
    await msgclient_produce(
        url, topic, True, encryption_keys=KEY_NAME, crypto_key_reader=right.reader()
    )
    received = await received_once_the_key_comes(url, topic, right, len(SENT))
    assert values(received) == [p.value for p in SENT]


async def received_once_the_key_comes(
    url: str, topic: str, pair: KeyPair, count: int
) -> list[msgclient.Message]:
    """What a consumer with a 1 s ack timeout gets: nothing while its reader has no key,
    then, once it has ``pair``'s, ``count`` messages."""
    reader = SwitchableKeys()
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic,
            "sub",
            crypto_key_reader=reader,
            unacked_messages_timeout_ms=1000,
            **SHARED_FROM_EARLIEST,
        )
        assert await drain(consumer) == []
        reader.pair = pair
        return await receive_n(consumer, count)


def decrypt_by_hand(messages: list[msgclient.Message], pair: KeyPair) -> list[bytes]:
    """What an application does with CONSUME: the payloads, decrypted and decompressed with
    the encryption context (records of a batch split by hand)."""
    plain: list[bytes] = []
    for message in messages:
        assert isinstance(message, UndecryptedMessage)
        context = message.encryption_context()
        data = unseal_by_hand(context, message.data(), pair)
        data = get_codec(context.compression_type).decompress(
            data, context.uncompressed_message_size
        )
        if context.batch_size < 0:
            plain.append(data)
            continue
        position = 0
        for _ in range(context.batch_size):
            size = int.from_bytes(data[position : position + 4], "big")
            record = pb.SingleMessageMetadata.FromString(data[position + 4 : position + 4 + size])
            position += 4 + size
            plain.append(data[position : position + record.payload_size])
            position += record.payload_size
    return plain


def unseal_by_hand(context: EncryptionContext, data: bytes, pair: KeyPair) -> bytes:
    """The payload of an undecrypted message, still compressed; of a chunked message, its
    chunks unsealed one by one (each with its own IV) and joined."""
    if not context.chunks:
        return _unseal_with(context.keys, context.param, data, pair)
    parts, position = [], 0
    for chunk in context.chunks:
        sealed = data[position : position + chunk.size]
        parts.append(_unseal_with(chunk.keys, chunk.param, sealed, pair))
        position += chunk.size
    assert position == len(data)
    return b"".join(parts)


def _unseal_with(keys: Sequence[EncryptionKey], iv: bytes, sealed: bytes, pair: KeyPair) -> bytes:
    key = keys[0]  # the only one (the official C++ producer repeats it in later chunks)
    private = load_private_key(key.key, pair.private.read_bytes())
    return unseal(unwrap_data_key(key.key, key.value, private), iv, sealed)


# -- producer errors -------------------------------------------------------------------------


async def test_a_key_that_cannot_be_used_fails_the_producers_creation(
    pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    ec_pair = write_pair(tmp_path, "ec", ec.generate_private_key(ec.SECP256R1()))
    async with msgclient.Client(pulsar_broker.service_url) as client:
        with pytest.raises(CryptoError, match="cannot read public_key_path"):
            await client.create_producer(
                topic,
                encryption_keys=KEY_NAME,
                crypto_key_reader=FileCryptoKeyReader(tmp_path / "missing.pem"),
            )
        # The official client accepts an EC key and then fails every send (CryptoError).
        with pytest.raises(CryptoError, match="only RSA keys"):
            await client.create_producer(
                topic, encryption_keys=KEY_NAME, crypto_key_reader=ec_pair.reader()
            )


async def test_a_message_that_cannot_be_encrypted_fails_its_send(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key file goes away; the next data key cannot be made: the send fails with
    CryptoError (a data key that lasts 0 s makes every entry renew it)."""
    right, _ = keys
    monkeypatch.setattr(message_crypto, "DATA_KEY_LIFETIME_SECONDS", 0)
    public = right.public.parent / "vanishing.pub.pem"
    public.write_bytes(right.public.read_bytes())
    async with msgclient.Client(pulsar_broker.service_url) as client:
        producer = await client.create_producer(
            topic,
            batching_enabled=False,
            encryption_keys=KEY_NAME,
            crypto_key_reader=FileCryptoKeyReader(public),
        )
        await asyncio.wait_for(producer.send(b"sealed"), TIMEOUT)
        public.unlink()
        with pytest.raises(CryptoError, match="cannot read public_key_path"):
            await asyncio.wait_for(producer.send(b"lost"), TIMEOUT)


async def test_a_reader_decrypts_with_its_key_reader_and_fails_without(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    right, _ = keys
    url = pulsar_broker.service_url
    await msgclient_produce(
        url,
        topic,
        True,
        encryption_keys=[KEY_NAME],
        crypto_key_reader=FileCryptoKeyReader(public_key_path=right.public),
    )
    async with msgclient.Client(url) as client:
        reader = await client.create_reader(
            topic, msgclient.InitialPosition.Earliest, crypto_key_reader=right.reader()
        )
        read = [await reader.read_next(10_000) for _ in SENT]
        assert values(read) == [p.value for p in SENT]
        raw = await client.create_reader(
            topic,
            msgclient.InitialPosition.Earliest,
            crypto_failure_action=ConsumerCryptoFailureAction.CONSUME,
        )
        undecrypted = await raw.read_next(10_000)
        assert isinstance(undecrypted, UndecryptedMessage)
        assert not any(p.value in undecrypted.data() for p in SENT)
