from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.records.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    size_of_varint,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_zigzag_golden(value: int, encoded: bytes) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray(b"xx")
    encode_varint(value, out)
    assert len(out) - 2 == size_of_varint(value) <= 5
    assert decode_varint(out, 2) == (value, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert len(out) <= 10
    assert decode_varlong(out, 0) == (value, len(out))


@given(st.integers(0, 2**64 - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    encode_uvarint(value, out)
    assert decode_uvarint(out, 0) == (value, len(out))


def test_truncated_and_overlong_varints() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0)  # beyond int32
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 11, 0)
