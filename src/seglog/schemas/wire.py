"""The wire format of a record serialized against a schema registry.

Confluent's serializers, and so every registry-aware client, write a record's
key or value as the magic byte 0, the schema's id as a 4-byte big-endian
integer, then the payload: Avro's binary encoding, JSON text, or for
Protobuf the indexes of the message type within its file (see
:func:`encode_message_indexes`) and the message's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

__all__ = [
    "HEADER_SIZE",
    "MAGIC_BYTE",
    "WireFormatError",
    "encode_message_indexes",
    "header",
    "read_message_indexes",
    "split",
]

MAGIC_BYTE = 0
"""The first byte of every record in the wire format."""
HEADER_SIZE = 5
"""The magic byte and the schema id."""

_HEADER = struct.Struct(">bI")


class WireFormatError(ValueError):
    """Bytes that are not a record in the registry's wire format."""


def header(schema_id: int) -> bytes:
    """The magic byte and ``schema_id``: what a serialized record starts with."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def split(value: bytes | bytearray | memoryview) -> tuple[int, memoryview]:
    """The schema id of ``value`` and its payload (WireFormatError if not in the format)."""
    view = memoryview(value)
    if len(view) < HEADER_SIZE:
        raise WireFormatError(
            f"{len(view)} bytes: too short for the registry's wire format "
            f"(a magic byte and a 4-byte schema id)"
        )
    if view[0] != MAGIC_BYTE:
        raise WireFormatError(
            f"unknown magic byte {view[0]}: not serialized against a schema registry "
            f"(expected {MAGIC_BYTE})"
        )
    _, schema_id = _HEADER.unpack_from(view)
    return schema_id, view[HEADER_SIZE:]


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The path of a Protobuf message type within its file, as the wire format carries it.

    A zigzag varint count, then each index as a zigzag varint; the first
    message of the file (``[0]``), by far the most common, is the single byte 0.
    """
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray(_zigzag_varint(len(indexes)))
    for index in indexes:
        out += _zigzag_varint(index)
    return bytes(out)


def read_message_indexes(
    data: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[list[int], int]:
    """The message indexes at ``data[pos:]`` and the position after them."""
    count, pos = _read_zigzag_varint(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > len(data) - pos:
        raise WireFormatError(f"message index count {count} is out of range")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag_varint(data, pos)
        indexes.append(index)
    return indexes, pos


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_zigzag_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    n = 0
    while True:
        if pos >= len(data):
            raise WireFormatError("truncated varint in the message indexes")
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise WireFormatError("varint longer than 10 bytes in the message indexes")
    return (n >> 1) ^ -(n & 1), pos
