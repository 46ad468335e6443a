"""Kafka's primitive wire types, read from memoryviews and written to bytearrays.

Theory of operation
-------------------
Readers take ``(view, pos)`` and return ``(value, next_pos)``; writers append
to a ``bytearray``. Nothing here knows about messages: :mod:`.schema` composes
these pieces (and inlines the hottest of them) into per-message codecs.

Every reader checks a length or count against the bytes that remain *before*
slicing or allocating, so a bogus length in a malformed request costs nothing
and raises :class:`~seglog.protocol.errors.DecodeError` — never ``IndexError``
or ``struct.error``, never a large allocation, never a loop that does not
consume input.

Grammar (all fixed-width integers big-endian)::

    int8 int16 int32 int64 uint16 uint32 float64   fixed width
    bool            := int8, any non-zero byte is true
    uuid            := 16 bytes
    uvarint         := (1xxxxxxx)* 0xxxxxxx        7 bits per byte, low group first, <= 5 bytes
    varint, varlong := uvarint of zigzag(n)         <= 5 / <= 10 bytes (used inside records)
    string          := int16 len, utf-8[len]        nullable: len -1 = null
    compact_string  := uvarint (len + 1), utf-8     0 = null
    bytes           := int32 len, byte[len]         nullable: len -1 = null
    compact_bytes   := uvarint (len + 1), byte[len] 0 = null
    array<T>        := int32 count, T[count]        nullable: count -1 = null
    compact_array<T>:= uvarint (count + 1), T[count] 0 = null
    tagged_fields   := uvarint n, (uvarint tag, uvarint size, byte[size])[n]

Non-flexible API versions use the int16/int32 forms; flexible ones (KIP-482)
use the compact forms and end every struct with a tagged-field section.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import TypeVar

from seglog.protocol.errors import DecodeError

T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: the default of every uuid field."""

Reader = Callable[[memoryview, int], tuple[T, int]]
"""``(view, pos) -> (value, next_pos)``."""


def _need(view: memoryview, pos: int, size: int, what: str) -> None:
    if pos + size > len(view):
        raise DecodeError(f"truncated {what} at position {pos}: need {size} bytes")


# -- fixed width ------------------------------------------------------------------------------


def read_int8(view: memoryview, pos: int) -> tuple[int, int]:
    """A signed byte."""
    _need(view, pos, 1, "int8")
    return INT8.unpack_from(view, pos)[0], pos + 1


def read_int16(view: memoryview, pos: int) -> tuple[int, int]:
    """A big-endian int16."""
    _need(view, pos, 2, "int16")
    return INT16.unpack_from(view, pos)[0], pos + 2


def read_uint16(view: memoryview, pos: int) -> tuple[int, int]:
    """A big-endian uint16."""
    _need(view, pos, 2, "uint16")
    return UINT16.unpack_from(view, pos)[0], pos + 2


def read_int32(view: memoryview, pos: int) -> tuple[int, int]:
    """A big-endian int32."""
    _need(view, pos, 4, "int32")
    return INT32.unpack_from(view, pos)[0], pos + 4


def read_uint32(view: memoryview, pos: int) -> tuple[int, int]:
    """A big-endian uint32."""
    _need(view, pos, 4, "uint32")
    return UINT32.unpack_from(view, pos)[0], pos + 4


def read_int64(view: memoryview, pos: int) -> tuple[int, int]:
    """A big-endian int64."""
    _need(view, pos, 8, "int64")
    return INT64.unpack_from(view, pos)[0], pos + 8


def read_float64(view: memoryview, pos: int) -> tuple[float, int]:
    """A big-endian IEEE 754 double."""
    _need(view, pos, 8, "float64")
    return FLOAT64.unpack_from(view, pos)[0], pos + 8


def read_bool(view: memoryview, pos: int) -> tuple[bool, int]:
    """One byte; any non-zero value is true."""
    _need(view, pos, 1, "bool")
    return view[pos] != 0, pos + 1


def read_uuid(view: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    """16 bytes."""
    _need(view, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(view[pos : pos + 16])), pos + 16


def write_int8(out: bytearray, value: int) -> None:
    """A signed byte."""
    out += INT8.pack(value)


def write_int16(out: bytearray, value: int) -> None:
    """A big-endian int16."""
    out += INT16.pack(value)


def write_uint16(out: bytearray, value: int) -> None:
    """A big-endian uint16."""
    out += UINT16.pack(value)


def write_int32(out: bytearray, value: int) -> None:
    """A big-endian int32."""
    out += INT32.pack(value)


def write_uint32(out: bytearray, value: int) -> None:
    """A big-endian uint32."""
    out += UINT32.pack(value)


def write_int64(out: bytearray, value: int) -> None:
    """A big-endian int64."""
    out += INT64.pack(value)


def write_float64(out: bytearray, value: float) -> None:
    """A big-endian IEEE 754 double."""
    out += FLOAT64.pack(value)


def write_bool(out: bytearray, value: bool) -> None:
    """1 for true, 0 for false."""
    out.append(1 if value else 0)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    """16 bytes."""
    out += value.bytes


# -- varints ----------------------------------------------------------------------------------


def _read_varbits(view: memoryview, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(view)
    for i in range(pos, pos + max_bytes):
        if i >= end:
            raise DecodeError(f"truncated {what} at position {pos}")
        byte = view[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i + 1
        shift += 7
    raise DecodeError(f"{what} at position {pos} is longer than {max_bytes} bytes")


def read_uvarint(view: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (compact lengths, counts, tags)."""
    if pos < len(view) and view[pos] < 0x80:
        return view[pos], pos + 1
    return _read_varbits(view, pos, 5, "unsigned varint")


def read_varint(view: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint (signed 32-bit) of at most 5 bytes."""
    raw, pos = _read_varbits(view, pos, 5, "varint")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(view: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varlong (signed 64-bit) of at most 10 bytes."""
    raw, pos = _read_varbits(view, pos, 10, "varlong")
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    """An unsigned varint; ``value`` must be in 0..2**32-1."""
    if 0 <= value < 0x80:
        out.append(value)
        return
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    if value < 0x200000:  # two or three bytes: lengths of records and arrays
        if value < 0x4000:
            out += bytes(((value & 0x7F) | 0x80, value >> 7))
        else:
            out += bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
        return
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """A zigzag varint; ``value`` must fit in int32."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint out of range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """A zigzag varlong; ``value`` must fit in int64."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong out of range: {value}")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


# -- lengths, strings, bytes ------------------------------------------------------------------


def read_length(view: memoryview, pos: int, *, compact: bool, wide: bool) -> tuple[int, int]:
    """A length or count; -1 means null.

    ``compact``: uvarint holding length + 1; otherwise int32 when ``wide``
    (bytes, arrays) or int16 (strings).
    """
    if compact:
        raw, pos = read_uvarint(view, pos)
        return raw - 1, pos
    if wide:
        return read_int32(view, pos)
    return read_int16(view, pos)


def write_length(out: bytearray, length: int, *, compact: bool, wide: bool) -> None:
    """A length or count, -1 for null (see :func:`read_length`)."""
    if compact:
        write_uvarint(out, length + 1)
    elif wide:
        out += INT32.pack(length)
    else:
        out += INT16.pack(length)


def take(view: memoryview, pos: int, length: int, what: str) -> memoryview:
    """``view[pos:pos+length]``, checked: a DecodeError if it runs past the end."""
    if length < 0 or pos + length > len(view):
        raise DecodeError(f"{what} of {length} bytes at position {pos} runs past the end")
    return view[pos : pos + length]


def _utf8(data: memoryview, pos: int) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"string at position {pos} is not valid UTF-8") from None


def _read_str(view: memoryview, pos: int, compact: bool, nullable: bool) -> tuple[str | None, int]:
    length, pos = read_length(view, pos, compact=compact, wide=False)
    if length < 0:
        if length == -1 and nullable:
            return None, pos
        raise DecodeError(f"null or negative length {length} for a string at position {pos}")
    return _utf8(take(view, pos, length, "string"), pos), pos + length


def read_string(view: memoryview, pos: int) -> tuple[str, int]:
    """STRING: int16 length, UTF-8 (null is an error)."""
    value, pos = _read_str(view, pos, False, False)
    assert value is not None
    return value, pos


def read_nullable_string(view: memoryview, pos: int) -> tuple[str | None, int]:
    """NULLABLE_STRING: int16 length (-1 = null), UTF-8."""
    return _read_str(view, pos, False, True)


def read_compact_string(view: memoryview, pos: int) -> tuple[str, int]:
    """COMPACT_STRING: uvarint length + 1, UTF-8 (null is an error)."""
    value, pos = _read_str(view, pos, True, False)
    assert value is not None
    return value, pos


def read_compact_nullable_string(view: memoryview, pos: int) -> tuple[str | None, int]:
    """COMPACT_NULLABLE_STRING: uvarint length + 1 (0 = null), UTF-8."""
    return _read_str(view, pos, True, True)


def write_string(out: bytearray, value: str | None, *, compact: bool = False) -> None:
    """A (compact) string; None writes null (the caller knows whether that is allowed)."""
    if value is None:
        write_length(out, -1, compact=compact, wide=False)
        return
    data = value.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
    write_length(out, len(data), compact=compact, wide=False)
    out += data


def _read_bytes(
    view: memoryview, pos: int, compact: bool, nullable: bool
) -> tuple[memoryview | None, int]:
    length, pos = read_length(view, pos, compact=compact, wide=True)
    if length < 0:
        if length == -1 and nullable:
            return None, pos
        raise DecodeError(f"null or negative length {length} for bytes at position {pos}")
    return take(view, pos, length, "bytes"), pos + length


def read_bytes(view: memoryview, pos: int) -> tuple[memoryview, int]:
    """BYTES: int32 length, then the bytes as a view into ``view`` (no copy)."""
    value, pos = _read_bytes(view, pos, False, False)
    assert value is not None
    return value, pos


def read_nullable_bytes(view: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """NULLABLE_BYTES: int32 length (-1 = null), as a view."""
    return _read_bytes(view, pos, False, True)


def read_compact_bytes(view: memoryview, pos: int) -> tuple[memoryview, int]:
    """COMPACT_BYTES: uvarint length + 1, as a view."""
    value, pos = _read_bytes(view, pos, True, False)
    assert value is not None
    return value, pos


def read_compact_nullable_bytes(view: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """COMPACT_NULLABLE_BYTES: uvarint length + 1 (0 = null), as a view."""
    return _read_bytes(view, pos, True, True)


def write_bytes(
    out: bytearray, value: bytes | bytearray | memoryview | None, *, compact: bool = False
) -> None:
    """(Compact) bytes; None writes null."""
    if value is None:
        write_length(out, -1, compact=compact, wide=True)
        return
    size = value.nbytes if isinstance(value, memoryview) else len(value)
    write_length(out, size, compact=compact, wide=True)
    out += value


# -- arrays -----------------------------------------------------------------------------------


def read_array_length(
    view: memoryview, pos: int, *, compact: bool, nullable: bool, min_item_size: int = 1
) -> tuple[int, int]:
    """An array count (-1 = null), checked against the bytes left.

    Each element takes at least ``min_item_size`` bytes (at least 1 is
    assumed), so a count that cannot fit is refused before anything is
    allocated or looped over.
    """
    count, pos = read_length(view, pos, compact=compact, wide=True)
    if count < 0:
        if count == -1 and nullable:
            return -1, pos
        raise DecodeError(f"null or negative array count {count} at position {pos}")
    if count * max(min_item_size, 1) > len(view) - pos:
        raise DecodeError(f"array of {count} elements at position {pos} cannot fit")
    return count, pos


def _read_items(
    view: memoryview, pos: int, read_item: Reader[T], compact: bool, nullable: bool
) -> tuple[list[T] | None, int]:
    count, pos = read_array_length(view, pos, compact=compact, nullable=nullable)
    if count < 0:
        return None, pos
    items: list[T] = []
    for _ in range(count):
        item, pos = read_item(view, pos)
        items.append(item)
    return items, pos


def read_array(view: memoryview, pos: int, read_item: Reader[T]) -> tuple[list[T], int]:
    """ARRAY: int32 count, then the items (null is an error)."""
    items, pos = _read_items(view, pos, read_item, False, False)
    assert items is not None
    return items, pos


def read_nullable_array(
    view: memoryview, pos: int, read_item: Reader[T]
) -> tuple[list[T] | None, int]:
    """Nullable ARRAY: int32 count (-1 = null)."""
    return _read_items(view, pos, read_item, False, True)


def read_compact_array(view: memoryview, pos: int, read_item: Reader[T]) -> tuple[list[T], int]:
    """COMPACT_ARRAY: uvarint count + 1 (null is an error)."""
    items, pos = _read_items(view, pos, read_item, True, False)
    assert items is not None
    return items, pos


def read_compact_nullable_array(
    view: memoryview, pos: int, read_item: Reader[T]
) -> tuple[list[T] | None, int]:
    """Nullable COMPACT_ARRAY: uvarint count + 1 (0 = null)."""
    return _read_items(view, pos, read_item, True, True)


def write_array(
    out: bytearray,
    items: list[T] | None,
    write_item: Callable[[bytearray, T], None],
    *,
    compact: bool = False,
) -> None:
    """A (compact) array; None writes null."""
    if items is None:
        write_length(out, -1, compact=compact, wide=True)
        return
    write_length(out, len(items), compact=compact, wide=True)
    for item in items:
        write_item(out, item)


# -- tagged fields ----------------------------------------------------------------------------


def read_tagged_fields(view: memoryview, pos: int) -> tuple[dict[int, memoryview], int]:
    """A tagged-field section: ``{tag: raw value bytes}`` (views, no copy).

    Tags are not required to ascend (Kafka's generated readers accept any
    order); a repeated tag keeps its last value.
    """
    count, pos = read_uvarint(view, pos)
    if count * 2 > len(view) - pos:
        raise DecodeError(f"{count} tagged fields at position {pos} cannot fit")
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        fields[tag] = take(view, pos, size, "tagged field")
        pos += size
    return fields, pos


def skip_tagged_fields(view: memoryview, pos: int) -> int:
    """The position after a tagged-field section whose contents are not wanted."""
    return read_tagged_fields(view, pos)[1]


def write_tagged_fields(
    out: bytearray, fields: Mapping[int, bytes | bytearray | memoryview]
) -> None:
    """A tagged-field section, tags in ascending order as Kafka requires."""
    write_uvarint(out, len(fields))
    for tag in sorted(fields):
        data = fields[tag]
        write_uvarint(out, tag)
        write_uvarint(out, data.nbytes if isinstance(data, memoryview) else len(data))
        out += data


__all__ = [
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "ZERO_UUID",
    "Reader",
    "read_array",
    "read_array_length",
    "read_bool",
    "read_bytes",
    "read_compact_array",
    "read_compact_bytes",
    "read_compact_nullable_array",
    "read_compact_nullable_bytes",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_float64",
    "read_int8",
    "read_int16",
    "read_int32",
    "read_int64",
    "read_length",
    "read_nullable_array",
    "read_nullable_bytes",
    "read_nullable_string",
    "read_string",
    "read_tagged_fields",
    "read_uint16",
    "read_uint32",
    "read_uuid",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "skip_tagged_fields",
    "take",
    "write_array",
    "write_bool",
    "write_bytes",
    "write_float64",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_length",
    "write_string",
    "write_tagged_fields",
    "write_uint16",
    "write_uint32",
    "write_uuid",
    "write_uvarint",
    "write_varint",
    "write_varlong",
]
