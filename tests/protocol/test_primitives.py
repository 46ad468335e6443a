"""Primitive wire types: golden bytes, round trips, and refusal of malformed input."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.protocol import primitives as p
from seglog.protocol.errors import DecodeError


def view(data: bytes) -> memoryview:
    return memoryview(data)


@pytest.mark.parametrize(
    ("read", "write", "value", "wire"),
    [
        (p.read_int8, p.write_int8, -2, b"\xfe"),
        (p.read_int16, p.write_int16, -2, b"\xff\xfe"),
        (p.read_uint16, p.write_uint16, 0xFFFE, b"\xff\xfe"),
        (p.read_int32, p.write_int32, 0x01020304, b"\x01\x02\x03\x04"),
        (p.read_uint32, p.write_uint32, 0xFFFFFFFF, b"\xff\xff\xff\xff"),
        (p.read_int64, p.write_int64, -1, b"\xff" * 8),
        (p.read_float64, p.write_float64, 1.5, b"\x3f\xf8" + bytes(6)),
        (p.read_bool, p.write_bool, True, b"\x01"),
        (p.read_uvarint, p.write_uvarint, 0, b"\x00"),
        (p.read_uvarint, p.write_uvarint, 127, b"\x7f"),
        (p.read_uvarint, p.write_uvarint, 128, b"\x80\x01"),
        (p.read_uvarint, p.write_uvarint, 300, b"\xac\x02"),
        (p.read_uvarint, p.write_uvarint, 0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
        (p.read_varint, p.write_varint, 0, b"\x00"),
        (p.read_varint, p.write_varint, -1, b"\x01"),
        (p.read_varint, p.write_varint, 1, b"\x02"),
        (p.read_varint, p.write_varint, -64, b"\x7f"),
        (p.read_varint, p.write_varint, 64, b"\x80\x01"),
        (p.read_varint, p.write_varint, -(2**31), b"\xff\xff\xff\xff\x0f"),
        (p.read_varlong, p.write_varlong, -(2**63), b"\xff" * 9 + b"\x01"),
        (p.read_varlong, p.write_varlong, 2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    ],
)
def test_golden(
    read: Callable[[memoryview, int], tuple[Any, int]],
    write: Callable[[bytearray, Any], None],
    value: Any,
    wire: bytes,
) -> None:
    out = bytearray()
    write(out, value)
    assert bytes(out) == wire
    assert read(view(b"\xaa" + wire + b"\xbb"), 1) == (value, 1 + len(wire))
    for cut in range(len(wire)):
        with pytest.raises(DecodeError):
            read(view(wire[:cut]), 0)


def test_bool_reads_any_non_zero_byte_as_true() -> None:
    assert p.read_bool(view(b"\x02"), 0) == (True, 1)
    assert p.read_bool(view(b"\x00"), 0) == (False, 1)


def test_uuid() -> None:
    value = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    out = bytearray()
    p.write_uuid(out, value)
    assert bytes(out) == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert p.read_uuid(view(bytes(out)), 0) == (value, 16)
    with pytest.raises(DecodeError):
        p.read_uuid(view(bytes(15)), 0)
    assert p.ZERO_UUID.int == 0


def test_varints_refuse_overlong_encodings() -> None:
    with pytest.raises(DecodeError, match="longer than 5"):
        p.read_uvarint(view(b"\x80" * 5 + b"\x00"), 0)
    with pytest.raises(DecodeError, match="longer than 10"):
        p.read_varlong(view(b"\x80" * 10 + b"\x00"), 0)


def test_varint_writers_refuse_out_of_range_values() -> None:
    for write, value in (
        (p.write_uvarint, -1),
        (p.write_uvarint, 2**32),
        (p.write_varint, 2**31),
        (p.write_varlong, -(2**63) - 1),
    ):
        with pytest.raises(ValueError):
            write(bytearray(), value)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    p.write_uvarint(out, value)
    assert p.read_uvarint(view(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    p.write_varint(out, value)
    assert len(out) <= 5
    assert p.read_varint(view(bytes(out)), 0) == (value, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    p.write_varlong(out, value)
    assert len(out) <= 10
    assert p.read_varlong(view(bytes(out)), 0) == (value, len(out))


def test_strings_golden() -> None:
    assert p.read_string(view(b"\x00\x03abc"), 0) == ("abc", 5)
    assert p.read_nullable_string(view(b"\xff\xff"), 0) == (None, 2)
    assert p.read_compact_string(view(b"\x04abc"), 0) == ("abc", 4)
    assert p.read_compact_nullable_string(view(b"\x00"), 0) == (None, 1)
    assert p.read_compact_string(view(b"\x01"), 0) == ("", 1)
    assert p.read_string(view(b"\x00\x02" + "é".encode()), 0) == ("é", 4)
    out = bytearray()
    p.write_string(out, "abc")
    p.write_string(out, None)
    p.write_string(out, "abc", compact=True)
    p.write_string(out, None, compact=True)
    assert bytes(out) == b"\x00\x03abc\xff\xff\x04abc\x00"


def test_strings_refuse_null_where_not_nullable_and_bad_input() -> None:
    with pytest.raises(DecodeError):
        p.read_string(view(b"\xff\xff"), 0)
    with pytest.raises(DecodeError):
        p.read_compact_string(view(b"\x00"), 0)
    with pytest.raises(DecodeError):
        p.read_nullable_string(view(b"\xff\xfe"), 0)  # -2 is not null
    with pytest.raises(DecodeError, match="UTF-8"):
        p.read_string(view(b"\x00\x01\xff"), 0)
    with pytest.raises(DecodeError, match="runs past"):
        p.read_string(view(b"\x7f\xffabc"), 0)
    with pytest.raises(ValueError):
        p.write_string(bytearray(), "x" * 0x8000)


def test_bytes_are_views_without_copy() -> None:
    data = bytearray(b"\x00\x00\x00\x03xyz\x04abc\x00\xff\xff\xff\xff")
    value, pos = p.read_bytes(memoryview(data), 0)
    assert bytes(value) == b"xyz" and pos == 7
    data[4] = ord("X")
    assert bytes(value) == b"Xyz"  # a view into the buffer, not a copy
    assert bytes(p.read_compact_bytes(memoryview(data), 7)[0]) == b"abc"
    assert p.read_compact_nullable_bytes(memoryview(data), 11) == (None, 12)
    assert p.read_nullable_bytes(memoryview(data), 12) == (None, 16)
    out = bytearray()
    p.write_bytes(out, b"xyz")
    p.write_bytes(out, memoryview(b"abc"), compact=True)
    p.write_bytes(out, None, compact=True)
    p.write_bytes(out, None)
    assert bytes(out) == b"\x00\x00\x00\x03xyz\x04abc\x00\xff\xff\xff\xff"


def test_a_huge_length_costs_nothing() -> None:
    # 2 GiB claimed, 3 bytes present: refused before any allocation.
    with pytest.raises(DecodeError):
        p.read_bytes(view(b"\x7f\xff\xff\xffabc"), 0)
    with pytest.raises(DecodeError):
        p.read_compact_bytes(view(b"\xff\xff\xff\xff\x0fabc"), 0)
    with pytest.raises(DecodeError, match="cannot fit"):
        p.read_array(view(b"\x7f\xff\xff\xff\x00"), 0, p.read_int8)
    with pytest.raises(DecodeError, match="cannot fit"):
        p.read_compact_array(view(b"\xff\xff\xff\xff\x0f"), 0, p.read_int8)
    with pytest.raises(DecodeError, match="cannot fit"):
        p.read_tagged_fields(view(b"\xff\xff\xff\xff\x0f"), 0)


def test_arrays() -> None:
    wire = b"\x00\x00\x00\x02\x00\x01\x00\x02"
    assert p.read_array(view(wire), 0, p.read_int16) == ([1, 2], 8)
    assert p.read_nullable_array(view(b"\xff\xff\xff\xff"), 0, p.read_int16) == (None, 4)
    assert p.read_compact_array(view(b"\x03\x00\x01\x00\x02"), 0, p.read_int16) == ([1, 2], 5)
    assert p.read_compact_nullable_array(view(b"\x00"), 0, p.read_int16) == (None, 1)
    with pytest.raises(DecodeError):
        p.read_array(view(b"\xff\xff\xff\xff"), 0, p.read_int16)
    with pytest.raises(DecodeError):
        p.read_compact_array(view(b"\x00"), 0, p.read_int16)
    with pytest.raises(DecodeError):
        p.read_array(view(b"\xff\xff\xff\xfe"), 0, p.read_int16)
    out = bytearray()
    p.write_array(out, [1, 2], p.write_int16)
    p.write_array(out, None, p.write_int16)
    p.write_array(out, [1, 2], p.write_int16, compact=True)
    p.write_array(out, None, p.write_int16, compact=True)
    assert bytes(out) == wire + b"\xff\xff\xff\xff" + b"\x03\x00\x01\x00\x02" + b"\x00"


def test_tagged_fields() -> None:
    out = bytearray()
    p.write_tagged_fields(out, {5: b"\x01\x02", 1: b""})
    assert bytes(out) == b"\x02\x01\x00\x05\x02\x01\x02"  # ascending tags
    fields, pos = p.read_tagged_fields(view(bytes(out)), 0)
    assert pos == len(out)
    assert {tag: bytes(data) for tag, data in fields.items()} == {1: b"", 5: b"\x01\x02"}
    # Kafka's readers accept tags in any order.
    fields, _ = p.read_tagged_fields(view(b"\x02\x05\x00\x01\x00"), 0)
    assert sorted(fields) == [1, 5]
    assert p.skip_tagged_fields(view(b"\x00rest"), 0) == 1
    with pytest.raises(DecodeError):
        p.read_tagged_fields(view(b"\x01\x00\x05ab"), 0)


def test_length_helpers() -> None:
    out = bytearray()
    p.write_length(out, 3, compact=True, wide=True)
    p.write_length(out, -1, compact=False, wide=False)
    p.write_length(out, 7, compact=False, wide=True)
    assert bytes(out) == b"\x04\xff\xff" + struct.pack(">i", 7)
    assert p.read_length(view(bytes(out)), 0, compact=True, wide=True) == (3, 1)
    assert p.read_length(view(bytes(out)), 1, compact=False, wide=False) == (-1, 3)
    assert p.read_length(view(bytes(out)), 3, compact=False, wide=True) == (7, 7)
    assert bytes(p.take(view(b"abcdef"), 1, 3, "x")) == b"bcd"
    with pytest.raises(DecodeError):
        p.take(view(b"abc"), 1, 3, "x")


@given(st.binary(max_size=40), st.integers(0, 40))
def test_readers_raise_only_decode_errors(data: bytes, pos: int) -> None:
    readers: list[Callable[[memoryview, int], tuple[Any, int]]] = [
        p.read_int8,
        p.read_int16,
        p.read_uint16,
        p.read_int32,
        p.read_uint32,
        p.read_int64,
        p.read_float64,
        p.read_bool,
        p.read_uuid,
        p.read_uvarint,
        p.read_varint,
        p.read_varlong,
        p.read_string,
        p.read_nullable_string,
        p.read_compact_string,
        p.read_compact_nullable_string,
        p.read_bytes,
        p.read_nullable_bytes,
        p.read_compact_bytes,
        p.read_compact_nullable_bytes,
        p.read_tagged_fields,
        lambda v, i: p.read_array(v, i, p.read_int32),
        lambda v, i: p.read_compact_nullable_array(v, i, p.read_compact_string),
    ]
    for read in readers:
        try:
            _, end = read(view(data), pos)
        except DecodeError:
            continue
        assert pos < end <= len(data)
