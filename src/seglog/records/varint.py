"""Varints as Kafka's record format uses them (protobuf style, little-endian 7-bit groups).

``varint``/``varlong`` are zigzag-encoded signed values (at most 5 and 10
bytes); ``uvarint`` is unsigned. Decoders take a buffer (bytes, bytearray or a
memoryview) and a position and return (value, next position); a truncated or
over-long varint is a :class:`~seglog.errors.CorruptRecordError`, never an
IndexError.

Grammar::

    uvarint := (1vvvvvvv)* 0vvvvvvv          least significant group first
    varint  := uvarint of zigzag(int32)      at most 5 bytes
    varlong := uvarint of zigzag(int64)      at most 10 bytes
    zigzag(n) = (n << 1) ^ (n >> 63)         0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3 ...

Encoders append to a ``bytearray`` and do not range-check: callers that take
values from users (the builder) check int32/int64 ranges first.
"""

from __future__ import annotations

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError

_UINT64_MASK = 0xFFFFFFFFFFFFFFFF
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def zigzag(value: int) -> int:
    """Map a signed value to unsigned so that small magnitudes stay small."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    return (value >> 1) ^ -(value & 1)


def encode_uvarint(value: int, out: bytearray) -> None:
    """Append the unsigned varint of ``value`` (0 <= value < 2**64) to ``out``."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zigzag varint of ``value`` to ``out``.

    The encoding of an int32 (varint) and an int64 (varlong) is the same; only
    the length a reader accepts differs. ``value`` must fit in int64.
    """
    # Most values in a record (lengths, small deltas) take one byte.
    if -64 <= value < 64:
        out.append((value << 1) ^ (value >> 63))
        return
    encode_uvarint(zigzag(value) & _UINT64_MASK, out)


encode_varlong = encode_varint
"""Append the zigzag varlong of ``value`` (int64) to ``out``; same bytes as a varint."""


def size_of_varint(value: int) -> int:
    """Bytes the zigzag varint (or varlong) of ``value`` takes."""
    v = zigzag(value) & _UINT64_MASK
    size = 1
    while v > 0x7F:
        v >>= 7
        size += 1
    return size


def decode_uvarint(buf: BytesLike, position: int, max_bytes: int = 10) -> tuple[int, int]:
    """Read an unsigned varint of at most ``max_bytes`` at ``position``.

    Returns (value, next position).
    """
    result = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if position + i >= end:
            raise CorruptRecordError(f"truncated varint at position {position}")
        byte = buf[position + i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position + i + 1
        shift += 7
    raise CorruptRecordError(f"varint at position {position} is longer than {max_bytes} bytes")


def decode_varint(buf: BytesLike, position: int) -> tuple[int, int]:
    """Read a zigzag varint (int32 range, at most 5 bytes); returns (value, next position)."""
    # One-byte fast path: lengths and deltas of typical records.
    if 0 <= position < len(buf):
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    raw, nxt = decode_uvarint(buf, position, MAX_VARINT_BYTES)
    # A fifth byte can carry bits 28-34; anything at bit 32 or above is not an int32.
    if raw >= 1 << 32:
        raise CorruptRecordError(f"varint at position {position} is out of the int32 range")
    return unzigzag(raw), nxt


def decode_varlong(buf: BytesLike, position: int) -> tuple[int, int]:
    """Read a zigzag varlong (int64 range, at most 10 bytes); returns (value, next position)."""
    if 0 <= position < len(buf):
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    raw, nxt = decode_uvarint(buf, position, MAX_VARLONG_BYTES)
    if raw > _UINT64_MASK:
        raise CorruptRecordError(f"varlong at position {position} is out of the int64 range")
    return unzigzag(raw), nxt
