"""Key hashes must equal the Pulsar Java client's, or keyed messages land on other partitions."""

from __future__ import annotations

import random

import pytest

from msgclient.core.send.hashing import java_string_hash, murmur3_32_hash, sign_safe_mod


def reference_hash_code(key: str) -> int:
    """Java's String.hashCode() as written in the JDK: a signed 32-bit Horner loop."""
    h = 0
    units = key.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def reference_murmur3_32(data: bytes) -> int:
    """MurmurHash3_x86_32 with seed 0, step by step as Pulsar's Murmur3_32Hash.java."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    def mix_k1(k1: int) -> int:
        return (rotl((k1 * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593) & 0xFFFFFFFF

    h1 = 0
    body = len(data) - len(data) % 4
    for i in range(0, body, 4):
        h1 = rotl(h1 ^ mix_k1(int.from_bytes(data[i : i + 4], "little")), 13) * 5 + 0xE6546B64
        h1 &= 0xFFFFFFFF
    h1 ^= mix_k1(int.from_bytes(data[body:], "little"))
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    return h1 ^ (h1 >> 16)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # By definition of String.hashCode(): the empty sum.
        ("", 0),
        # "hello".hashCode() == 99162322, the textbook Java example.
        ("hello", 99162322),
        # By hand: 'A'*31 + 'a' = 65*31 + 97 = 2112 = 66*31 + 66 = 'B'*31 + 'B'.
        ("Aa", 2112),
        ("BB", 2112),
        # apache/pulsar HashTest.javaStringHashTest ("Same value as C++ client"): the first
        # overflows 32 bits, the second has a negative hashCode().
        ("keykeykeykeykey1", 434058482),
        ("keykeykey2", 42978643),
        # hashCode() is Integer.MIN_VALUE (a well-known Java puzzle), so the mask gives 0.
        ("polygenelubricants", 0),
        # By hand: U+00E9 is one UTF-16 unit, 0xE9 = 233.
        ("é", 233),
        # By hand: ((0x65E5 * 31) + 0x672C) * 31 + 0x8A9E = 25921943.
        ("日本語", 25921943),
        # By hand: U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00 = 1772899.
        # (Hashing the code point would give 128512; the C++ client, which hashes UTF-8
        # bytes as signed chars, gives 2146910423.)
        ("😀", 1772899),
    ],
)
def test_java_string_hash_known_values(key: str, expected: int) -> None:
    assert java_string_hash(key) == expected


def test_java_string_hash_masks_negative_hash_codes() -> None:
    assert reference_hash_code("keykeykey2") < 0
    assert java_string_hash("keykeykey2") == reference_hash_code("keykeykey2") & 0x7FFFFFFF
    assert reference_hash_code("polygenelubricants") == -(1 << 31)


def _random_key(rnd: random.Random, length: int) -> str:
    alphabets = [
        (0x20, 0x7E),  # ASCII
        (0xA0, 0xD7FF),  # rest of the BMP below the surrogates
        (0x10000, 0x10FFFF),  # astral: two UTF-16 units each
        (0xD800, 0xDFFF),  # lone surrogates, which a Java String may hold too
    ]
    low, high = rnd.choice(alphabets)
    return "".join(chr(rnd.randint(low, high)) for _ in range(length))


def test_java_string_hash_matches_reference_on_every_length() -> None:
    # Lengths cover the short loop, the sum/map path and the chunked path (> 256 units).
    rnd = random.Random(20240611)
    for length in [*range(40), 255, 256, 257, 511, 512, 513, 1500]:
        for _ in range(5):
            key = _random_key(rnd, length)
            assert java_string_hash(key) == reference_hash_code(key) & 0x7FFFFFFF, key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # MurmurHash3 of no bytes with seed 0 is 0.
        ("", 0),
        # apache/pulsar HashTest.murmur3_32HashTest ("Same value as C++ client").
        ("key1", 462881061),
        ("key2", 1936800180),
        # The rest were cross-checked against the official C++ client's
        # Murmur3_32Hash::makeHash (libpulsar in pulsar-client 3.13.0, called via ctypes) and
        # against mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF.
        ("hello", 613153351),  # 0x248BFA47, the standard MurmurHash3_x86_32("hello", 0)
        ("é", 269551495),
        ("日本語", 631534231),
        ("😀", 1051995898),
    ],
)
def test_murmur3_32_hash_known_values(key: str, expected: int) -> None:
    assert murmur3_32_hash(key) == expected


def test_murmur3_32_hash_matches_reference() -> None:
    rnd = random.Random(7)
    masked_bit = False
    for length in [*range(20), 64, 301]:
        for _ in range(10):
            key = _random_key(rnd, length)
            raw = reference_murmur3_32(key.encode("utf-8", "replace"))
            masked_bit |= raw >= 1 << 31
            assert murmur3_32_hash(key) == raw & 0x7FFFFFFF, key
    assert masked_bit  # some sampled hash had its top bit cleared by the mask


def test_murmur3_32_hash_replaces_lone_surrogates_as_java_does() -> None:
    # Java's getBytes(UTF_8) writes '?' for an unpaired surrogate.
    assert murmur3_32_hash("a\ud800b") == murmur3_32_hash("a?b")


@pytest.mark.parametrize(
    ("dividend", "divisor", "expected"),
    [
        (7, 5, 2),
        (-7, 5, 3),  # Java: -7 % 5 == -2, plus 5
        (-10, 5, 0),
        (0, 5, 0),
        ((1 << 40) + 3, 5, ((1 << 40) + 3) % 5),  # a long dividend, as round-robin passes
        (7, -3, 1),  # Java: 7 % -3 == 1, not negative so kept
        (-7, -3, -4),  # Java: -7 % -3 == -1, plus -3
    ],
)
def test_sign_safe_mod(dividend: int, divisor: int, expected: int) -> None:
    assert sign_safe_mod(dividend, divisor) == expected


@pytest.mark.parametrize(
    ("key", "java_partition", "murmur_partition"),
    [
        # signSafeMod(hash, 5) from the hashes above.
        ("hello", 2, 1),  # 99162322 % 5, 613153351 % 5
        ("keykeykey2", 3, 0),  # 42978643 % 5, 304171170 % 5
        ("key1", 3, 1),  # 3288498 % 5, 462881061 % 5
        ("key2", 4, 0),  # 3288499 % 5, 1936800180 % 5
        ("😀", 4, 3),  # 1772899 % 5, 1051995898 % 5
    ],
)
def test_partition_for_five_partitions(
    key: str, java_partition: int, murmur_partition: int
) -> None:
    assert sign_safe_mod(java_string_hash(key), 5) == java_partition
    assert sign_safe_mod(murmur3_32_hash(key), 5) == murmur_partition
