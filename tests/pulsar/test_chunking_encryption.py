"""Chunked messages end-to-end encrypted, as the official clients do it (each chunk encrypted
on its own): the official consumer reads msgclient's, msgclient reads the official
producer's; a consumer that cannot decrypt the chunks does what its crypto_failure_action
says.

Shared subscriptions throughout: pulsar-lite dispatches the chunks of a message of 3+
chunks more than once on Exclusive/Failover (brokers.md).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

import msgclient
from msgclient.crypto_key_reader import EncryptionKeyInfo
from msgclient.embedded import PulsarBroker
from msgclient.options import ConsumerCryptoFailureAction
from protocols.pulsarwire.encryption import DecryptedMessage, UndecryptedMessage
from protocols.pulsarwire.message_id import ChunkMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.consume_helpers import drain, receive_n
from tests.pulsar.helpers import (
    SHARED_FROM_EARLIEST,
    Publish,
    chunking,
    official_client,
    receive,
    tap_wire,
    within,
)
from tests.pulsar.test_encryption import (
    COMPRESSIONS,
    KEY_NAME,
    KeyPair,
    Outcome,
    SwitchableKeys,
    decrypt_by_hand,
    expected_counts,
    msgclient_outcome,
    official_consumer,
    official_encrypted_produce,
    official_outcome,
    received_once_the_key_comes,
    right_and_wrong_keys,
)

CHUNK = 100 * 1024
PROPERTIES = {"k": "v"}
_rng = random.Random(3003)
# Random bytes with a compressible tail: compressed, still several chunks of CHUNK.
BIG = _rng.randbytes(4 * CHUNK) + b"z" * (8 * CHUNK)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[KeyPair, KeyPair]:
    return right_and_wrong_keys(tmp_path_factory.mktemp("keys"))


async def produce_encrypted_chunks(
    url: str, topic: str, right: KeyPair, compression: msgclient.CompressionType
) -> ChunkMessageId:
    """BIG, in chunks of at most CHUNK bytes, encrypted for KEY_NAME; its id."""
    async with msgclient.Client(url) as client:
        producer = await client.create_producer(
            topic,
            **chunking(CHUNK),
            compression_type=compression,
            encryption_keys=KEY_NAME,
            crypto_key_reader=right.reader(),
        )
        sent = await within(producer.send(BIG, properties=PROPERTIES))
    assert isinstance(sent, ChunkMessageId)
    return sent


def chunk_count(sent: ChunkMessageId) -> int:
    """How many entries a message sent went as (a producer's id holds its first and last)."""
    return sent.entry_id - sent.first_chunk_id.entry_id + 1


@pytest.mark.parametrize("compression", COMPRESSIONS)
async def test_the_official_consumer_decrypts_our_encrypted_chunks(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair], compression: str
) -> None:
    right, _ = keys
    url = pulsar_broker.service_url
    sent = await produce_encrypted_chunks(url, topic, right, COMPRESSIONS[compression][0])
    with official_client(url) as official:
        [message] = await receive(official_consumer(official, topic, "sub", right), 1)
        context = message.encryption_context()

    assert message.data() == BIG and message.properties() == PROPERTIES
    assert context is not None and not context.is_decryption_failed()
    official_keys = context.keys()  # a method of the official EncryptionContext
    assert [k.key for k in official_keys] == [KEY_NAME]
    # Compressed first (LZ4: fewer chunks than BIG's 12), still several.
    assert chunk_count(sent) >= 4


@pytest.mark.parametrize("compression", COMPRESSIONS)
async def test_msgclient_decrypts_the_official_producers_encrypted_chunks(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair], compression: str
) -> None:
    # The official Python client chunks at the broker's limit (5 MiB; it has no chunk size
    # option): random bytes, which no codec shrinks, in 3 chunks.
    big = _rng.randbytes(11 * 1024 * 1024)
    right, _ = keys
    url = pulsar_broker.service_url
    await official_encrypted_produce(
        url,
        topic,
        [Publish(big, properties=PROPERTIES)],
        right,
        compression,
        chunking_enabled=True,
        batching_enabled=False,
    )
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(
            topic, "sub", crypto_key_reader=right.reader(), **SHARED_FROM_EARLIEST
        )
        [message] = await receive_n(consumer, 1)

    assert message.data() == big and message.properties() == PROPERTIES
    assert isinstance(message, DecryptedMessage)
    context = message.encryption_context()
    assert not context.is_decryption_failed and context.chunks == ()
    # Its last chunk's keys, as the official consumer gives them: the C++ producer adds
    # them again at each chunk (its last of 3 carries them 3 times).
    assert {k.key for k in context.keys} == {KEY_NAME}
    received = message.message_id()
    assert isinstance(received, ChunkMessageId) and len(received.chunk_ids) == 3


# -- a consumer that cannot decrypt the chunks ----------------------------------------------


@pytest.mark.parametrize("cause", ["no-reader", "wrong-key"])
@pytest.mark.parametrize("action", list(ConsumerCryptoFailureAction), ids=lambda a: a.name)
async def test_chunks_that_cannot_be_decrypted_follow_the_failure_action(
    pulsar_broker: PulsarBroker,
    topic: str,
    keys: tuple[KeyPair, KeyPair],
    action: ConsumerCryptoFailureAction,
    cause: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each chunk is an entry of its own to the failure action. FAIL: nothing delivered,
    the message left whole for a consumer with the key. DISCARD: nothing delivered, nothing
    left, every chunk acknowledged as DecryptionError. Both as the official consumer does on
    the same entries. CONSUME: one message, the chunks as stored joined, with what an
    application needs to decrypt each (not compared: the official consumer overflows its
    reassembly buffer with the ciphertexts' tags and aborts the process)."""
    right, wrong = keys
    url = pulsar_broker.service_url
    sent = await produce_encrypted_chunks(url, topic, right, msgclient.CompressionType.LZ4)
    reader = None if cause == "no-reader" else wrong
    tap = tap_wire(monkeypatch)
    expected = expected_counts(action, entries=1, messages=1)
    ours, delivered = await msgclient_outcome(url, topic, action, reader, right, expected)

    chunks = chunk_count(sent)
    if action is ConsumerCryptoFailureAction.CONSUME:
        assert len(ours.delivered) == 1 and ours.left == []
        [message] = delivered
        assert isinstance(message, UndecryptedMessage)
        assert message.message_id() == sent and message.properties() == PROPERTIES
        context = message.encryption_context()
        assert context.is_decryption_failed and len(context.chunks) == chunks
        assert len({chunk.param for chunk in context.chunks}) == chunks  # an IV each
        assert decrypt_by_hand(delivered, right) == [BIG]
        return
    theirs = await asyncio.to_thread(official_outcome, url, topic, action, reader, right, expected)
    assert ours == theirs
    if action is ConsumerCryptoFailureAction.FAIL:
        assert ours == Outcome([], [BIG])
    else:
        assert ours == Outcome([], [])
        reasons = [a.validation_error for a in tap.acks() if a.HasField("validation_error")]
        assert reasons == [pb.CommandAck.DecryptionError] * chunks


async def test_failed_chunks_are_tried_again_after_the_ack_timeout(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    """FAIL with an ack timeout: each chunk comes back after it, and once the key is there
    the message is delivered whole."""
    right, _ = keys
    url = pulsar_broker.service_url
    await produce_encrypted_chunks(url, topic, right, msgclient.CompressionType.NONE)
    [message] = await received_once_the_key_comes(url, topic, right, 1)
    assert message.data() == BIG and isinstance(message, DecryptedMessage)


class KeyAfterOneFailure(SwitchableKeys):
    """Fails the first private key asked for, then gives ``later``'s (a key store that was
    down for a moment)."""

    def __init__(self, later: KeyPair) -> None:
        super().__init__()
        self.later = later

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        try:
            return super().get_private_key(key_name, metadata)
        finally:
            self.pair = self.later


async def test_a_message_of_which_only_some_chunks_decrypted_is_tried_again(
    pulsar_broker: PulsarBroker, topic: str, keys: tuple[KeyPair, KeyPair]
) -> None:
    """CONSUME, the first chunk undecrypted and the others decrypted: neither whole, so the
    message is not delivered; its chunks are left unacknowledged (as FAIL leaves a chunk),
    and after the ack timeout they all decrypt."""
    right, _ = keys
    url = pulsar_broker.service_url
    await produce_encrypted_chunks(url, topic, right, msgclient.CompressionType.LZ4)
    options: dict[str, Any] = {
        "crypto_key_reader": KeyAfterOneFailure(right),
        "crypto_failure_action": ConsumerCryptoFailureAction.CONSUME,
        "unacked_messages_timeout_ms": 1000,
    }
    async with msgclient.Client(url) as client:
        consumer = await client.subscribe(topic, "sub", **options, **SHARED_FROM_EARLIEST)
        delivered = await drain(consumer, ack=True, at_least=1)
    assert [type(m) for m in delivered] == [DecryptedMessage]
    assert delivered[0].data() == BIG and delivered[0].redelivery_count() >= 1
