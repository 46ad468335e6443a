from __future__ import annotations

import contextlib

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
    encode_varlong,
    size_of_varint,
    unzigzag,
    zigzag,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (150, b"\xac\x02"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_golden(value: int, encoded: bytes) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert decode_varint(memoryview(encoded), 0) == (value, len(encoded))
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
        (1_700_000_000_000, bytes.fromhex("80 a0 ab fe f9 62")),  # zigzag: 2 * value
    ],
)
def test_varlong_golden(value: int, encoded: bytes) -> None:
    out = bytearray()
    encode_varlong(value, out)
    assert bytes(out) == encoded
    assert decode_varlong(encoded, 0) == (value, len(encoded))


def test_uvarint_golden() -> None:
    out = bytearray()
    encode_uvarint(300, out)
    assert bytes(out) == b"\xac\x02"
    assert decode_uvarint(b"\xac\x02", 0) == (300, 2)


@given(INT64)
def test_zigzag_is_a_bijection(value: int) -> None:
    assert zigzag(value) & (2**64 - 1) >= 0
    assert unzigzag(zigzag(value) & (2**64 - 1)) == value


@given(INT32, st.binary(max_size=3))
def test_varint_round_trip_at_any_position(value: int, prefix: bytes) -> None:
    out = bytearray(prefix)
    encode_varint(value, out)
    assert len(out) - len(prefix) == size_of_varint(value) <= 5
    assert decode_varint(memoryview(out), len(prefix)) == (value, len(out))


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    encode_varlong(value, out)
    assert len(out) == size_of_varint(value) <= 10
    assert decode_varlong(bytes(out), 0) == (value, len(out))


@given(st.integers(0, 2**64 - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    encode_uvarint(value, out)
    assert decode_uvarint(out, 0) == (value, len(out))


@pytest.mark.parametrize("value", [2**31 - 1, -(2**31), 300, -300])
def test_varint_truncated_at_every_byte(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    for cut in range(len(out)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_varint(bytes(out[:cut]), 0)


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 1_700_000_000_000])
def test_varlong_truncated_at_every_byte(value: int) -> None:
    out = bytearray()
    encode_varlong(value, out)
    for cut in range(len(out)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_varlong(memoryview(out)[:cut], 0)


def test_over_long_varints() -> None:
    # Six bytes for an int32 varint, eleven for a varlong: corrupt even if they end.
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\xff" * 10 + b"\x01", 0)
    # A padded zero (0x80 0x00) is still within the limits and accepted.
    assert decode_varint(b"\x80\x00", 0) == (0, 2)


def test_out_of_range_values() -> None:
    with pytest.raises(CorruptRecordError, match="int32"):
        decode_varint(b"\xff\xff\xff\xff\x1f", 0)  # 2**33 - 1 unsigned
    with pytest.raises(CorruptRecordError, match="int64"):
        decode_varlong(b"\xff" * 9 + b"\x7f", 0)  # bits beyond 64


def test_position_past_the_end_is_truncation() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", 1)
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"", 0)


@given(st.binary(max_size=12), st.integers(0, 12))
def test_garbage_raises_only_corrupt_record(data: bytes, position: int) -> None:
    for decode in (decode_varint, decode_varlong):
        with contextlib.suppress(CorruptRecordError):
            value, nxt = decode(data, position)
            assert position < nxt <= len(data)
            # Whatever decodes re-decodes the same from its canonical encoding.
            out = bytearray()
            encode_varint(value, out)
            assert decode(bytes(out), 0)[0] == value
