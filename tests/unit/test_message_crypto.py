"""End-to-end encryption's pure parts, with bytes: AES-GCM and RSA-OAEP as the official
clients use them, data key renewal and caching on a fake clock, key readers, the options,
and SEND -> MESSAGE entries through SendEncoder and decode_entry.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from msgclient.contract import OpSend
from msgclient.crypto_key_reader import (
    CryptoError,
    CryptoKeyReader,
    EncryptionKey,
    EncryptionKeyInfo,
    FileCryptoKeyReader,
)
from msgclient.errors import InvalidConfigurationError
from msgclient.message import OutgoingMessage
from msgclient.options import (
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerOptions,
    ProducerOptions,
)
from protocols.pulsarwire.chunks import ChunkAssembler
from protocols.pulsarwire.compression import get_codec
from protocols.pulsarwire.encryption import (
    GCM_TAG_SIZE,
    DecryptedMessage,
    decrypt_chunk,
    decrypt_entry,
    make_decryptor,
    make_encryptor,
)
from protocols.pulsarwire.framing import Frame, FrameDecoder, encode_payload_command
from protocols.pulsarwire.message_crypto import (
    DATA_KEY_LIFETIME_SECONDS,
    DATA_KEY_SIZE,
    IV_SIZE,
    TAG_SIZE,
    MessageDecryptor,
    MessageEncryptor,
    load_private_key,
    load_public_key,
    seal,
    unseal,
    unwrap_data_key,
    wrap_data_key,
)
from protocols.pulsarwire.message_id import ChunkMessageId, PulsarMessageId
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.pulsarwire.receive_codec import decode_entry
from protocols.pulsarwire.send_codec import SendEncoder

SHA1_OAEP = padding.OAEP(padding.MGF1(hashes.SHA1()), hashes.SHA1(), None)


def pem_pair(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return public, private


# 1024 bits: fast to make, and wide enough for OAEP of a 32-byte key.
RSA_KEY = rsa.generate_private_key(65537, 1024)
OTHER_RSA_KEY = rsa.generate_private_key(65537, 1024)
PUBLIC, PRIVATE = pem_pair(RSA_KEY)
OTHER_PUBLIC, OTHER_PRIVATE = pem_pair(OTHER_RSA_KEY)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Keys(CryptoKeyReader):
    """PEM bytes per key name; counts the calls."""

    def __init__(
        self,
        public: Mapping[str, bytes],
        private: Mapping[str, bytes] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.public, self.private = public, private or {}
        self.metadata = metadata or {}
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.calls.append(("public", key_name, dict(metadata)))
        return EncryptionKeyInfo(self.public[key_name], self.metadata)

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.calls.append(("private", key_name, dict(metadata)))
        return EncryptionKeyInfo(self.private[key_name])


# -- the primitives ----------------------------------------------------------------------


def test_seal_is_aes_256_gcm_with_the_tag_after_the_ciphertext() -> None:
    data_key, iv = bytes(range(DATA_KEY_SIZE)), bytes(IV_SIZE)
    sealed = seal(data_key, iv, b"payload")
    assert len(sealed) == len(b"payload") + TAG_SIZE
    # GCM adds no padding: an empty payload seals to the tag alone.
    assert len(seal(data_key, iv, b"")) == TAG_SIZE
    assert AESGCM(data_key).decrypt(iv, sealed, None) == b"payload"
    assert unseal(data_key, iv, sealed) == b"payload"


@pytest.mark.parametrize(
    "change", ["key", "iv", "tag", "short iv"], ids=lambda c: c.replace(" ", "-")
)
def test_unseal_refuses_anything_but_the_right_key_iv_and_bytes(change: str) -> None:
    data_key, iv = b"k" * DATA_KEY_SIZE, b"i" * IV_SIZE
    sealed = seal(data_key, iv, b"payload")
    if change == "key":
        data_key = b"x" * DATA_KEY_SIZE
    elif change == "iv":
        iv = b"x" * IV_SIZE
    elif change == "tag":
        sealed = sealed[:-1] + bytes([sealed[-1] ^ 1])
    else:
        iv = iv[:8]
    with pytest.raises(InvalidTag):
        unseal(data_key, iv, sealed)


def test_the_data_key_is_wrapped_with_rsa_oaep_sha1_as_the_official_clients() -> None:
    data_key = b"d" * DATA_KEY_SIZE
    wrapped = wrap_data_key("k", data_key, load_public_key("k", PUBLIC))
    assert len(wrapped) == 128  # the modulus size
    assert RSA_KEY.decrypt(wrapped, SHA1_OAEP) == data_key  # what OpenSSL's OAEP default reads
    assert unwrap_data_key("k", wrapped, load_private_key("k", PRIVATE)) == data_key
    sha256 = RSA_KEY.public_key().encrypt(
        data_key, padding.OAEP(padding.MGF1(hashes.SHA256()), hashes.SHA256(), None)
    )
    with pytest.raises(CryptoError, match="does not unwrap"):
        unwrap_data_key("k", sha256, load_private_key("k", PRIVATE))


def test_keys_that_are_not_rsa_pem_are_refused_naming_the_key() -> None:
    ec_public, ec_private = pem_pair(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(CryptoError, match=r"'k'.*only RSA keys"):
        load_public_key("k", ec_public)
    with pytest.raises(CryptoError, match=r"'k'.*only RSA keys"):
        load_private_key("k", ec_private)
    with pytest.raises(CryptoError, match="'k': not a PEM public key"):
        load_public_key("k", b"garbage")
    with pytest.raises(CryptoError, match="'k': not an unencrypted PEM private key"):
        load_private_key("k", PUBLIC)
    wrapped_wrong_size = RSA_KEY.public_key().encrypt(b"short", SHA1_OAEP)
    with pytest.raises(CryptoError, match="5 bytes, not 32"):
        unwrap_data_key("k", wrapped_wrong_size, load_private_key("k", PRIVATE))


# -- the producer's encryptor --------------------------------------------------------------


def test_the_encryptor_wraps_one_data_key_per_key_name_and_a_fresh_iv_per_entry() -> None:
    reader = Keys({"a": PUBLIC, "b": OTHER_PUBLIC}, metadata={"version": "7"})
    encryptor = MessageEncryptor(["a", "b"], reader, Clock())
    first, second = encryptor.encrypt(b"one"), encryptor.encrypt(b"two")

    assert [k.key for k in first.keys] == ["a", "b"]
    assert first.keys == second.keys  # the same data key, wrapped once
    assert all(k.metadata == {"version": "7"} for k in first.keys)
    assert first.iv != second.iv and len(first.iv) == IV_SIZE
    data_key = RSA_KEY.decrypt(first.keys[0].value, SHA1_OAEP)
    assert OTHER_RSA_KEY.decrypt(first.keys[1].value, SHA1_OAEP) == data_key
    assert unseal(data_key, second.iv, second.payload) == b"two"
    assert reader.calls == [("public", "a", {}), ("public", "b", {})]


def test_the_data_key_is_renewed_after_four_hours_reading_the_public_keys_again() -> None:
    clock = Clock()
    reader = Keys({"a": PUBLIC})
    encryptor = MessageEncryptor(["a"], reader, clock)
    before = encryptor.encrypt(b"x").keys
    clock.now += DATA_KEY_LIFETIME_SECONDS - 1
    assert encryptor.encrypt(b"x").keys == before
    clock.now += 1
    after = encryptor.encrypt(b"x").keys
    assert after != before
    assert RSA_KEY.decrypt(after[0].value, SHA1_OAEP) != RSA_KEY.decrypt(before[0].value, SHA1_OAEP)
    assert len(reader.calls) == 2


class Failing(CryptoKeyReader):
    def __init__(self, result: object) -> None:
        self.result = result

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result  # type: ignore[return-value]

    get_private_key = get_public_key


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (KeyError("a"), r"key 'a': Failing failed: KeyError\('a'\)"),
        (b"pem", "key 'a': Failing returned bytes, not an EncryptionKeyInfo"),
        (CryptoError("as the reader said"), "as the reader said"),
    ],
    ids=["raises", "wrong-type", "crypto-error"],
)
def test_a_failing_reader_is_a_crypto_error_naming_the_key(result: object, message: str) -> None:
    with pytest.raises(CryptoError, match=message):
        MessageEncryptor(["a"], Failing(result)).encrypt(b"x")
    with pytest.raises(CryptoError, match=message):
        MessageDecryptor(Failing(result)).decrypt(
            [EncryptionKey("a", b"wrapped")], b"i" * IV_SIZE, b"payload"
        )


# -- the consumer's decryptor --------------------------------------------------------------


def encrypted(payload: bytes, names: list[str], reader: CryptoKeyReader) -> tuple:  # type: ignore[type-arg]
    out = MessageEncryptor(names, reader).encrypt(payload)
    return out.keys, out.iv, out.payload


def test_the_decryptor_unwraps_each_data_key_once_and_forgets_it_after_four_hours() -> None:
    clock = Clock()
    producer = MessageEncryptor(["a"], Keys({"a": PUBLIC}, metadata={"v": "1"}), clock)
    reader = Keys({}, {"a": PRIVATE})
    decryptor = MessageDecryptor(reader, clock)
    old = [producer.encrypt(payload) for payload in [b"one", b"two"]]
    assert [decryptor.decrypt(e.keys, e.iv, e.payload) for e in old] == [b"one", b"two"]
    assert reader.calls == [("private", "a", {"v": "1"})]  # the producer's metadata
    # 4 hours on, the producer's next data key is unwrapped and the old one forgotten (as
    # the C++ client, expired keys go when a new one comes: the cache stays small).
    clock.now += DATA_KEY_LIFETIME_SECONDS
    new = producer.encrypt(b"three")
    assert decryptor.decrypt(new.keys, new.iv, new.payload) == b"three"
    assert len(reader.calls) == 2
    assert decryptor.decrypt(old[0].keys, old[0].iv, old[0].payload) == b"one"
    assert len(reader.calls) == 3


def test_the_decryptor_tries_each_key_name_until_one_opens_the_payload() -> None:
    keys, iv, payload = encrypted(b"secret", ["a", "b"], Keys({"a": PUBLIC, "b": OTHER_PUBLIC}))
    only_b = Keys({}, {"b": OTHER_PRIVATE})  # "a" raises KeyError
    assert MessageDecryptor(only_b).decrypt(keys, iv, payload) == b"secret"
    assert [name for _, name, _ in only_b.calls] == ["a", "b"]


@pytest.mark.parametrize("problem", ["wrong key", "tampered", "no keys"])
def test_what_cannot_be_decrypted_is_a_crypto_error_saying_why(problem: str) -> None:
    keys, iv, payload = encrypted(b"secret", ["a"], Keys({"a": PUBLIC}))
    reader = Keys({}, {"a": PRIVATE})
    if problem == "wrong key":
        reader, expected = Keys({}, {"a": OTHER_PRIVATE}), "does not unwrap"
    elif problem == "tampered":
        payload, expected = bytes([payload[0] ^ 1]) + payload[1:], "does not decrypt"
    else:
        keys, expected = (), "carries no encryption key"
    with pytest.raises(CryptoError, match=expected):
        MessageDecryptor(reader).decrypt(keys, iv, payload)


# -- file reader and options ---------------------------------------------------------------


def test_the_file_reader_reads_its_files_at_each_call(tmp_path: Path) -> None:
    public, private = tmp_path / "pub.pem", tmp_path / "priv.pem"
    public.write_bytes(PUBLIC)
    private.write_bytes(PRIVATE)
    reader = FileCryptoKeyReader(str(public), private)
    assert reader.get_public_key("any", {}) == EncryptionKeyInfo(PUBLIC)
    assert reader.get_private_key("other", {"m": "v"}) == EncryptionKeyInfo(PRIVATE)
    public.write_bytes(OTHER_PUBLIC)
    assert reader.get_public_key("any", {}).key == OTHER_PUBLIC
    public.unlink()
    with pytest.raises(CryptoError, match="key 'any': cannot read public_key_path"):
        reader.get_public_key("any", {})
    with pytest.raises(CryptoError, match="key 'k': the FileCryptoKeyReader has no private"):
        FileCryptoKeyReader(public_key_path=public).get_private_key("k", {})
    with pytest.raises(InvalidConfigurationError, match="option private_key_path=3"):
        FileCryptoKeyReader(public, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigurationError, match="metadata"):
        EncryptionKeyInfo(PUBLIC, {"k": 1})  # type: ignore[dict-item]


def test_encryption_options_are_checked_naming_the_option() -> None:
    reader = FileCryptoKeyReader("pub.pem")
    assert ProducerOptions().encryption_keys == ()
    options = ProducerOptions(encryption_keys="a", crypto_key_reader=reader)
    assert options.encryption_keys == ("a",)
    both = ProducerOptions(encryption_keys=["a", "b", "a"], crypto_key_reader=reader)
    assert both.encryption_keys == ("a", "b")
    with pytest.raises(InvalidConfigurationError, match=r"option encryption_keys=.*key name"):
        ProducerOptions(encryption_keys=["a", ""], crypto_key_reader=reader)
    with pytest.raises(InvalidConfigurationError, match="option crypto_key_reader=None"):
        ProducerOptions(encryption_keys=["a"])
    with pytest.raises(InvalidConfigurationError, match=r"option crypto_key_reader='pub\.pem'"):
        ProducerOptions(encryption_keys=["a"], crypto_key_reader="pub.pem")  # type: ignore[arg-type]
    assert ConsumerOptions().crypto_failure_action is ConsumerCryptoFailureAction.FAIL
    with pytest.raises(InvalidConfigurationError, match="option crypto_failure_action=2"):
        ConsumerOptions(crypto_failure_action=2)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigurationError, match="option crypto_key_reader"):
        ConsumerOptions(crypto_key_reader=object())  # type: ignore[arg-type]


# -- entries on the wire -------------------------------------------------------------------


def as_messages(send_frames: bytes) -> list[Frame]:
    """The SEND frames (one, or a chunked message's) as the MESSAGE frames a consumer gets
    of their entries (1:2, 1:3, ...)."""
    messages = []
    for entry, frame in enumerate(FrameDecoder().feed(send_frames), 2):
        assert frame.metadata is not None and frame.payload is not None
        command = pb.BaseCommand(
            type=pb.BaseCommand.MESSAGE,
            message=pb.CommandMessage(
                consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=entry)
            ),
        )
        data = encode_payload_command(command, frame.metadata.SerializeToString(), frame.payload)
        messages.extend(FrameDecoder().feed(data))
    return messages


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
async def test_an_entry_is_compressed_then_encrypted_and_decoded_back(batched: bool) -> None:
    loop = asyncio.get_running_loop()
    messages = [OutgoingMessage(b"value %d " % i * 20, loop.create_future()) for i in range(3)]
    for sequence_id, message in enumerate(messages):
        message.sequence_id = sequence_id
    if not batched:
        messages = messages[:1]
    codec = get_codec(CompressionType.ZLIB)
    encoder = SendEncoder(
        1, CompressionType.ZLIB, codec, make_encryptor(["a"], Keys({"a": PUBLIC}))
    )
    send = encoder.encode(OpSend(messages, batched, 0, 0.0))
    (frame,) = as_messages(send)
    metadata, payload = frame.metadata, frame.payload
    assert metadata is not None and payload is not None

    assert [(k.key, len(k.value)) for k in metadata.encryption_keys] == [("a", 128)]
    assert len(metadata.encryption_param) == IV_SIZE
    assert not metadata.HasField("encryption_algo")  # the official clients leave it unset
    data_key = RSA_KEY.decrypt(metadata.encryption_keys[0].value, SHA1_OAEP)
    compressed = unseal(data_key, metadata.encryption_param, payload)
    assert len(codec.decompress(compressed, metadata.uncompressed_size)) == (
        metadata.uncompressed_size
    )
    decryptor = make_decryptor(Keys({}, {"a": PRIVATE}))
    received = decode_entry(frame, "t", -1, decryptor=decryptor)
    assert [m.data() for m in received] == [m.value for m in messages]
    with pytest.raises(CryptoError, match="no crypto_key_reader"):
        decode_entry(frame, "t", -1)
    with pytest.raises(CryptoError, match="does not unwrap"):
        decrypt_entry(metadata, payload, make_decryptor(Keys({}, {"a": OTHER_PRIVATE})))


def outgoing(value: bytes) -> OutgoingMessage:
    message = OutgoingMessage(value, asyncio.get_running_loop().create_future())
    message.sequence_id = 0
    return message


CHUNK_LIMIT = 4096


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.ZLIB])
async def test_a_chunked_message_is_encrypted_chunk_by_chunk_under_the_limit(
    compression: CompressionType,
) -> None:
    """As the official producers: the whole payload compressed, cut, and each chunk
    encrypted on its own (its own IV, the same wrapped keys once each); every chunk frame
    under the limit with its encryption fields and tag; the chunks decrypted and joined are
    the compressed payload."""
    value = random.Random(7).randbytes(5 * CHUNK_LIMIT)
    codec = None if compression is CompressionType.NONE else get_codec(compression)
    encryptor = make_encryptor(["a", "b"], Keys({"a": PUBLIC, "b": OTHER_PUBLIC}))
    encoder = SendEncoder(1, compression, codec, encryptor, CHUNK_LIMIT)
    encoder.producer_name = "p"
    frames = FrameDecoder().feed(encoder.encode(OpSend([outgoing(value)], False, 0, 0.0)))
    metadatas = [f.metadata for f in frames if f.metadata is not None]
    payloads = [f.payload for f in frames if f.payload is not None]

    assert encoder.chunks == len(frames) == len(metadatas) == len(payloads) > 2
    compressed = value if codec is None else codec.compress(value)
    pairs = list(zip(metadatas, payloads, strict=True))
    for index, (metadata, payload) in enumerate(pairs):
        assert metadata.ByteSize() + len(payload) <= CHUNK_LIMIT
        assert (metadata.chunk_id, metadata.num_chunks_from_msg) == (index, len(frames))
        assert metadata.uuid == "p-0" and metadata.total_chunk_msg_size == len(compressed)
        assert [k.key for k in metadata.encryption_keys] == ["a", "b"]  # once each
        assert len(metadata.encryption_param) == IV_SIZE
    assert len({m.encryption_param for m in metadatas}) == len(frames)  # an IV each
    data_key = RSA_KEY.decrypt(metadatas[0].encryption_keys[0].value, SHA1_OAEP)
    chunks = [unseal(data_key, m.encryption_param, p) for m, p in pairs]
    added = {len(p) - len(c) for (_, p), c in zip(pairs, chunks, strict=True)}
    assert added == {TAG_SIZE} == {GCM_TAG_SIZE}  # what a consumer without cryptography counts
    assert b"".join(chunks) == compressed


async def test_chunks_decrypted_one_by_one_make_the_message_with_its_context() -> None:
    """The consumer's side, pure: each chunk decrypted with its own metadata, joined, then
    decompressed whole; the message says how it was encrypted (its last chunk's metadata,
    as the official consumer gives it)."""
    value = random.Random(8).randbytes(CHUNK_LIMIT) + b"z" * (4 * CHUNK_LIMIT)
    codec = get_codec(CompressionType.ZLIB)
    encryptor = make_encryptor(["a"], Keys({"a": PUBLIC}))
    encoder = SendEncoder(1, CompressionType.ZLIB, codec, encryptor, CHUNK_LIMIT // 4)
    frames = as_messages(encoder.encode(OpSend([outgoing(value)], False, 0, 0.0)))
    decryptor = make_decryptor(Keys({}, {"a": PRIVATE}))
    assembler: ChunkAssembler[None] = ChunkAssembler(0, 0, lambda ids, expired: None)
    done = None
    for frame in frames:
        chunk = decrypt_chunk(frame, decryptor)
        assert chunk.metadata is not None and chunk.payload is not None
        message_id = PulsarMessageId(1, frame.command.message.message_id.entryId)
        metadata = chunk.metadata
        done = assembler.add(
            metadata.uuid,
            metadata.chunk_id,
            metadata.num_chunks_from_msg,
            metadata.total_chunk_msg_size,
            chunk.payload,
            message_id,
            0,
        )
    assert done is not None and len(done.ids) == len(frames) > 1
    last = frames[-1]
    whole = Frame(last.command, last.metadata, done.payload)
    (message,) = decode_entry(whole, "t", -1, decryptor=None, chunk_ids=done.ids)

    assert message.data() == value
    assert isinstance(message, DecryptedMessage)
    context = message.encryption_context()
    assert last.metadata is not None and context.param == last.metadata.encryption_param
    assert not context.is_decryption_failed and context.chunks == ()
    assert context.compression_type is CompressionType.ZLIB
    assert context.uncompressed_message_size == len(value)
    assert message.message_id() == ChunkMessageId.of_chunks(done.ids)
