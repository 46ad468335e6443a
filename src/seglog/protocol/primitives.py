"""Kafka's primitive wire types, read from memoryviews and written to bytearrays.

Readers take ``(view, position)`` and return ``(value, next position)``;
writers append to a bytearray. Lengths are checked against the bytes that
remain before anything is sliced, so a bogus length in a malformed request
costs nothing and raises :class:`DecodeError`.

Non-flexible encodings use fixed-width lengths (int16 for strings, int32 for
bytes and arrays, -1 = null); flexible ones (KIP-482) use an unsigned varint
holding length + 1 (0 = null).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from seglog.protocol.errors import DecodeError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]


def _fixed(fmt: struct.Struct) -> tuple[Reader, Writer]:
    size = fmt.size
    unpack = fmt.unpack_from
    pack = fmt.pack

    def read(view: memoryview, pos: int) -> tuple[Any, int]:
        if pos + size > len(view):
            raise DecodeError(f"truncated: need {size} bytes at position {pos}")
        return unpack(view, pos)[0], pos + size

    def write(out: bytearray, value: Any) -> None:
        out += pack(value)

    return read, write


read_int8, write_int8 = _fixed(INT8)
read_int16, write_int16 = _fixed(INT16)
read_uint16, write_uint16 = _fixed(UINT16)
read_int32, write_int32 = _fixed(INT32)
read_uint32, write_uint32 = _fixed(UINT32)
read_int64, write_int64 = _fixed(INT64)
read_float64, write_float64 = _fixed(FLOAT64)


def read_bool(view: memoryview, pos: int) -> tuple[bool, int]:
    """A boolean byte."""
    if pos >= len(view):
        raise DecodeError(f"truncated: need a boolean at position {pos}")
    return view[pos] != 0, pos + 1


def write_bool(out: bytearray, value: bool) -> None:
    """A boolean byte."""
    out.append(1 if value else 0)


def read_uvarint(view: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's lengths and counts)."""
    result = 0
    shift = 0
    end = len(view)
    for i in range(5):
        if pos + i >= end:
            raise DecodeError(f"truncated varint at position {pos}")
        byte = view[pos + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + i + 1
        shift += 7
    raise DecodeError(f"varint at position {pos} is too long")


def write_uvarint(out: bytearray, value: int) -> None:
    """An unsigned varint."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(view: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint."""
    raw, pos = read_uvarint(view, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    """A zigzag varint."""
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def read_uuid(view: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    """16 bytes."""
    if pos + 16 > len(view):
        raise DecodeError(f"truncated uuid at position {pos}")
    return uuid.UUID(bytes=bytes(view[pos : pos + 16])), pos + 16


def write_uuid(out: bytearray, value: uuid.UUID | None) -> None:
    """16 bytes (None is the zero uuid)."""
    out += value.bytes if value is not None else bytes(16)


def _slice(view: memoryview, pos: int, length: int, what: str) -> memoryview:
    if length < 0 or pos + length > len(view):
        raise DecodeError(f"{what} of length {length} at position {pos} runs past the frame")
    return view[pos : pos + length]


def read_length(view: memoryview, pos: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length or count: -1 means null. ``wide`` is int32 (bytes, arrays) vs int16."""
    if flexible:
        raw, pos = read_uvarint(view, pos)
        return raw - 1, pos
    if wide:
        return read_int32(view, pos)
    return read_int16(view, pos)


def write_length(out: bytearray, length: int, flexible: bool, wide: bool) -> None:
    """A length or count, -1 for null."""
    if flexible:
        write_uvarint(out, length + 1)
    elif wide:
        out += INT32.pack(length)
    else:
        out += INT16.pack(length)


def read_string(view: memoryview, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A (compact) nullable string."""
    length, pos = read_length(view, pos, flexible, wide=False)
    if length < 0:
        return None, pos
    data = _slice(view, pos, length, "string")
    try:
        return str(data, "utf-8"), pos + length
    except UnicodeDecodeError:
        raise DecodeError(f"string at position {pos} is not UTF-8") from None


def write_string(out: bytearray, value: str | None, flexible: bool) -> None:
    """A (compact) nullable string."""
    if value is None:
        write_length(out, -1, flexible, wide=False)
        return
    data = value.encode("utf-8")
    write_length(out, len(data), flexible, wide=False)
    out += data


def read_bytes(view: memoryview, pos: int, flexible: bool) -> tuple[memoryview | None, int]:
    """(Compact) nullable bytes, returned as a view into the frame (no copy)."""
    length, pos = read_length(view, pos, flexible, wide=True)
    if length < 0:
        return None, pos
    return _slice(view, pos, length, "bytes"), pos + length


def skip_tagged_fields(view: memoryview, pos: int) -> tuple[dict[int, memoryview], int]:
    """Read a tagged-field section; returns {tag: raw bytes}."""
    count, pos = read_uvarint(view, pos)
    if count > len(view) - pos:
        raise DecodeError(f"impossible tagged field count {count} at position {pos}")
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        fields[tag] = _slice(view, pos, size, "tagged field")
        pos += size
    return fields, pos
