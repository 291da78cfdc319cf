"""Batch containers: when a batch closes, and the key-based container's one batch per key."""

from __future__ import annotations

import asyncio

from msgclient.core.send.batch_container import (
    ADDED,
    ADDED_FULL,
    NO_SPACE,
    BatchMessageContainer,
    KeyBasedBatchMessageContainer,
)
from msgclient.message import OutgoingMessage


class Clock:
    """A settable clock for ``first_added_at``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def message(
    value: bytes, sequence_id: int | None = None, key: str | None = None
) -> OutgoingMessage:
    # The future is never awaited here; it only needs a loop to belong to.
    loop = asyncio.new_event_loop()
    loop.close()
    return OutgoingMessage(value, loop.create_future(), partition_key=key, sequence_id=sequence_id)


def values(batches: list[list[OutgoingMessage]]) -> list[list[bytes]]:
    return [[m.value for m in batch] for batch in batches]


def test_empty_container_closes_to_nothing() -> None:
    container = BatchMessageContainer(max_messages=3, max_bytes=100, clock=Clock())
    assert len(container) == 0
    assert container.first_added_at is None
    assert container.close() == []


def test_batch_is_full_at_max_messages() -> None:
    clock = Clock()
    container = BatchMessageContainer(max_messages=3, max_bytes=1000, clock=clock)
    assert container.add(message(b"a")) == ADDED
    clock.now = 101.0
    assert container.add(message(b"b")) == ADDED
    assert container.first_added_at == 100.0  # the first message's time, not the last
    assert container.add(message(b"c")) == ADDED_FULL
    assert values(container.close()) == [[b"a", b"b", b"c"]]
    assert len(container) == 0 and container.size_bytes == 0
    assert container.first_added_at is None


def test_batch_is_full_at_max_bytes() -> None:
    container = BatchMessageContainer(max_messages=100, max_bytes=10, clock=Clock())
    assert container.add(message(b"x" * 4)) == ADDED
    assert container.size_bytes == 4
    assert container.add(message(b"y" * 6)) == ADDED_FULL  # exactly max_bytes
    assert values(container.close()) == [[b"x" * 4, b"y" * 6]]


def test_no_space_for_a_message_that_would_overflow_the_bytes() -> None:
    container = BatchMessageContainer(max_messages=100, max_bytes=10, clock=Clock())
    container.add(message(b"x" * 6))
    assert container.add(message(b"y" * 5)) == NO_SPACE
    assert len(container) == 1 and container.size_bytes == 6  # refused: nothing changed
    assert container.add(message(b"y" * 4)) == ADDED_FULL


def test_no_space_past_max_messages() -> None:
    # A full batch is normally closed at once (ADDED_FULL); if it is not, it refuses more.
    container = BatchMessageContainer(max_messages=2, max_bytes=1000, clock=Clock())
    container.add(message(b"a"))
    assert container.add(message(b"b")) == ADDED_FULL
    assert container.add(message(b"c")) == NO_SPACE
    assert values(container.close()) == [[b"a", b"b"]]


def test_oversize_message_goes_alone() -> None:
    container = BatchMessageContainer(max_messages=100, max_bytes=10, clock=Clock())
    big = message(b"z" * 50)
    assert container.add(big) == ADDED_FULL  # an empty batch takes anything, full at once
    assert values(container.close()) == [[b"z" * 50]]

    container.add(message(b"a"))
    assert container.add(big) == NO_SPACE  # close the open batch first
    assert values(container.close()) == [[b"a"]]
    assert container.add(big) == ADDED_FULL


def test_close_starts_a_new_batch() -> None:
    clock = Clock()
    container = BatchMessageContainer(max_messages=2, max_bytes=1000, clock=clock)
    container.add(message(b"a"))
    container.close()
    clock.now = 105.0
    assert container.add(message(b"b")) == ADDED
    assert container.first_added_at == 105.0
    assert values(container.close()) == [[b"b"]]


def test_key_based_makes_one_batch_per_key_ordered_by_first_sequence_id() -> None:
    container = KeyBasedBatchMessageContainer(max_messages=100, max_bytes=1000, clock=Clock())
    sent = [
        message(b"b1", sequence_id=10, key="b"),
        message(b"a1", sequence_id=11, key="a"),
        message(b"n1", sequence_id=12),
        message(b"b2", sequence_id=13, key="b"),
        message(b"a2", sequence_id=14, key="a"),
        message(b"n2", sequence_id=15),
    ]
    for m in sent:
        assert container.add(m) == ADDED
    assert len(container) == 6
    batches = container.close()
    assert values(batches) == [[b"b1", b"b2"], [b"a1", b"a2"], [b"n1", b"n2"]]
    assert [[m.sequence_id for m in batch] for batch in batches] == [[10, 13], [11, 14], [12, 15]]
    assert container.close() == []


def test_key_based_order_follows_sequence_ids_not_key_arrival() -> None:
    # A key whose first message has the lower sequence id comes first, even if another
    # key reached the container first (ids given out of order by the user).
    container = KeyBasedBatchMessageContainer(max_messages=100, max_bytes=1000, clock=Clock())
    container.add(message(b"late", sequence_id=7, key="z"))
    container.add(message(b"early", sequence_id=3, key="y"))
    assert values(container.close()) == [[b"early"], [b"late"]]


def test_key_based_limits_count_all_keys_together() -> None:
    container = KeyBasedBatchMessageContainer(max_messages=3, max_bytes=1000, clock=Clock())
    assert container.add(message(b"a", sequence_id=0, key="a")) == ADDED
    assert container.add(message(b"b", sequence_id=1, key="b")) == ADDED
    assert container.add(message(b"c", sequence_id=2, key="c")) == ADDED_FULL
    assert container.add(message(b"d", sequence_id=3, key="a")) == NO_SPACE
    assert values(container.close()) == [[b"a"], [b"b"], [b"c"]]  # the refused one is not in
    assert container.add(message(b"d", sequence_id=3, key="a")) == ADDED
    assert values(container.close()) == [[b"d"]]  # the old keys are gone
