"""Read committed on brokers that list no aborted transactions (tansu): a transactional
batch is also decided by what follows it in the same Fetch response, as bytes.

Its producer's next marker decides it (ABORT hides it); a batch of a newer epoch of the
same producer id before any marker means its transaction never ended (an incarnation that
crashed: a broker that aborts such a transaction writes an ABORT marker, tansu does not).
"""

from __future__ import annotations

from protocols.kafkawire.records import with_producer_state
from tests.unit.kafka.test_read_committed import marker, read, txn

ABORT, COMMIT = 0, 1
PRODUCER, OTHER = 7, 8


def of_epoch(batch: bytes, epoch: int) -> bytes:
    return with_producer_state(batch, PRODUCER, epoch, 0)


def test_an_abort_marker_later_in_the_response_hides_its_transaction() -> None:
    data = b"".join((
        txn(0, PRODUCER, b"aborted-0", b"aborted-1"),
        txn(2, OTHER, b"other"),
        marker(3, PRODUCER, ABORT),
        txn(4, PRODUCER, b"committed"),
        marker(5, PRODUCER, COMMIT),
        marker(6, OTHER, COMMIT),
    ))  # fmt: skip
    offsets, values, next_offset = read(data, aborted=[])  # the broker listed none
    assert values == [b"other", b"committed"]
    assert offsets == [2, 4]
    assert next_offset == 7


def test_a_newer_epoch_before_any_marker_hides_the_older_epochs_batches() -> None:
    data = b"".join((
        of_epoch(txn(0, PRODUCER, b"zombie-0", b"zombie-1"), 0),
        of_epoch(txn(2, PRODUCER, b"zombie-2"), 0),
        of_epoch(txn(3, PRODUCER, b"live"), 1),
        marker(4, PRODUCER, COMMIT),
    ))  # fmt: skip
    assert read(data, aborted=[])[1] == [b"live"]


def test_a_batch_nothing_decides_in_the_response_goes_by_the_list() -> None:
    data = txn(0, PRODUCER, b"undecided")
    assert read(data, aborted=[])[1] == [b"undecided"]
    assert read(data, aborted=[(PRODUCER, 0)])[1] == []


def test_read_uncommitted_delivers_everything() -> None:
    data = b"".join((
        txn(0, PRODUCER, b"aborted"),
        marker(1, PRODUCER, ABORT),
        of_epoch(txn(2, PRODUCER, b"zombie"), 0),
        of_epoch(txn(3, PRODUCER, b"live"), 1),
    ))  # fmt: skip
    assert read(data, aborted=None)[1] == [b"aborted", b"zombie", b"live"]
