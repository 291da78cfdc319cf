"""protocols/varint.py: the one varint encoder, checked against protobuf's own."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from protocols.varint import uvarint


@given(st.integers(min_value=-(2**63), max_value=2**64 - 1))
def test_uvarint_is_protobufs_varint(n: int) -> None:
    # MessageIdData.ledgerId is a uint64 (field 1), batch_index an int32 (field 4): protobuf
    # writes both as varints, a negative int32 as the ten bytes of its int64.
    if n >= 0:
        expected = pb.MessageIdData(ledgerId=n, entryId=0).SerializeToString()
        assert b"\x08" + uvarint(n) + b"\x10\x00" == expected
    if -(2**31) <= n < 2**31:
        message = pb.MessageIdData(ledgerId=0, entryId=0, batch_index=n).SerializeToString()
        assert message == b"\x08\x00\x10\x00\x20" + uvarint(n)


def test_small_values_take_one_byte_and_the_boundaries_two() -> None:
    assert [uvarint(n) for n in (0, 1, 127)] == [b"\x00", b"\x01", b"\x7f"]
    assert uvarint(128) == b"\x80\x01"
    assert uvarint(16383) == b"\xff\x7f"
    assert uvarint(16384) == b"\x80\x80\x01"
    assert len(uvarint(-1)) == 10
