"""Varints as Kafka's record format uses them (protobuf style, little-endian 7-bit groups).

``varint``/``varlong`` are zigzag-encoded signed values (at most 5 and 10
bytes); ``uvarint`` is unsigned. Decoders take a buffer and a position and
return (value, next position); a truncated or over-long varint is a
:class:`~seglog.errors.CorruptRecordError`.
"""

from __future__ import annotations

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError


def zigzag(value: int) -> int:
    """Map a signed value to unsigned so that small magnitudes stay small."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    return (value >> 1) ^ -(value & 1)


def encode_uvarint(value: int, out: bytearray) -> None:
    """Append the unsigned varint of ``value`` to ``out``."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zigzag varint (or varlong) of ``value`` to ``out``."""
    encode_uvarint(zigzag(value) & 0xFFFFFFFFFFFFFFFF, out)


def size_of_varint(value: int) -> int:
    """Bytes the zigzag varint of ``value`` takes."""
    v = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v > 0x7F:
        v >>= 7
        size += 1
    return size


def decode_uvarint(buf: BytesLike, position: int, max_bytes: int = 10) -> tuple[int, int]:
    """Read an unsigned varint at ``position``; returns (value, next position)."""
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
    """Read a zigzag varint (int32 range, at most 5 bytes)."""
    raw, nxt = decode_uvarint(buf, position, 5)
    if raw >= 1 << 32:
        raise CorruptRecordError(f"varint at position {position} is out of the int32 range")
    return unzigzag(raw), nxt


def decode_varlong(buf: BytesLike, position: int) -> tuple[int, int]:
    """Read a zigzag varlong (int64 range, at most 10 bytes)."""
    raw, nxt = decode_uvarint(buf, position, 10)
    return unzigzag(raw & 0xFFFFFFFFFFFFFFFF), nxt
