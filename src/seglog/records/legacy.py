"""Legacy message sets (magic 0 and 1): read them, and convert them to v2.

seglog never writes these formats; it reads them from old segment files and
converts what old clients send. A message (one log entry)::

    Message =>
      offset      int64
      size        int32    bytes after this field
      crc         uint32   CRC-32 (IEEE) of magic .. end
      magic       int8     0 or 1
      attributes  int8     bits 0-2 codec; bit 3 timestamp type (magic 1)
      timestamp   int64    magic 1 only
      key         int32 length (-1 = null), bytes
      value       int32 length (-1 = null), bytes

A compressed message is a *wrapper*: its value is a whole message set,
compressed. In magic 1 the inner offsets are relative (0, 1, ...) and the
wrapper carries the absolute offset of the last inner message; in magic 0 the
inner offsets are absolute.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch
from seglog.records.compression import Codec, decompress
from seglog.records.record import Record

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_MAX_NESTING = 1


class LegacyEntryInfo(NamedTuple):
    """What storage needs of one legacy entry."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int


class _Message(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    size: int


def _parse(view: memoryview, position: int, check_crc: bool) -> _Message:
    end = len(view)
    if position + _PREFIX.size > end:
        raise CorruptRecordError(f"truncated legacy message at position {position}")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(view, position)
    total = size + batch.LOG_OVERHEAD
    if magic not in (0, 1):
        raise UnsupportedMagicError(f"legacy message at position {position} has magic {magic}")
    minimum = 14 if magic == 0 else 22
    if size < minimum or position + total > end:
        raise CorruptRecordError(f"legacy message at position {position} has bad size {size}")
    if check_crc:
        computed = zlib.crc32(view[position + 16 : position + total])
        if computed != crc:
            raise CorruptRecordError(
                f"legacy message at offset {offset} is corrupt: stored CRC {crc:#010x}, "
                f"computed {computed:#010x}"
            )
    pos = position + 18
    timestamp = batch.NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(view, pos)
        pos += 8
    fields: list[bytes | None] = []
    for _ in range(2):
        if pos + 4 > position + total:
            raise CorruptRecordError(f"truncated legacy message at offset {offset}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0:
            fields.append(None)
            continue
        if pos + length > position + total:
            raise CorruptRecordError(f"legacy message field runs past offset {offset}")
        fields.append(bytes(view[pos : pos + length]))
        pos += length
    return _Message(offset, magic, attributes, timestamp, fields[0], fields[1], total)


def _inner_messages(wrapper: _Message, check_crc: bool) -> list[_Message]:
    codec = wrapper.attributes & batch.COMPRESSION_MASK
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed legacy message at {wrapper.offset} has no value")
    data = memoryview(decompress(codec, wrapper.value))
    inner: list[_Message] = []
    position = 0
    while position < len(data):
        message = _parse(data, position, check_crc)
        if message.attributes & batch.COMPRESSION_MASK:
            raise CorruptRecordError("nested compressed legacy messages are not allowed")
        inner.append(message)
        position += message.size
    if not inner:
        raise CorruptRecordError(f"compressed legacy message at {wrapper.offset} is empty")
    if wrapper.magic == 1:
        shift = wrapper.offset - inner[-1].offset
        log_append = bool(wrapper.attributes & batch.TIMESTAMP_TYPE_MASK)
        inner = [
            m._replace(
                offset=m.offset + shift,
                timestamp=wrapper.timestamp if log_append else m.timestamp,
            )
            for m in inner
        ]
    return inner


def _expand(message: _Message, check_crc: bool) -> list[_Message]:
    if message.attributes & batch.COMPRESSION_MASK:
        return _inner_messages(message, check_crc)
    return [message]


def describe_entry(view: memoryview, check_crc: bool = True) -> LegacyEntryInfo:
    """Offsets, max timestamp and count of one legacy entry (``view`` is exactly the entry)."""
    message = _parse(view, 0, check_crc)
    if message.size != len(view):
        raise CorruptRecordError("legacy entry size does not match its buffer")
    if not message.attributes & batch.COMPRESSION_MASK:
        return LegacyEntryInfo(message.offset, message.offset, message.timestamp, 1)
    inner = _inner_messages(message, check_crc)
    return LegacyEntryInfo(
        inner[0].offset,
        message.offset,
        max(m.timestamp for m in inner),
        len(inner),
    )


def decode_legacy(view: memoryview) -> list[Record]:
    """Every message of a legacy message set, compressed wrappers expanded."""
    records: list[Record] = []
    position = 0
    while position < len(view):
        message = _parse(view, position, check_crc=False)
        for m in _expand(message, check_crc=False):
            records.append(Record(m.offset, m.timestamp, m.key, m.value, ()))
        position += message.size
    return records


def convert_to_v2(view: memoryview) -> bytes:
    """Convert a legacy message set (as an old producer sends it) to v2 batches.

    One v2 batch per top-level entry, keeping keys, values, timestamps and the
    codec; offsets are relative within each batch and reassigned on append.
    """
    from seglog.records.builder import SimpleRecord, build_batch

    out = bytearray()
    position = 0
    while position < len(view):
        message = _parse(view, position, check_crc=True)
        inner = _expand(message, check_crc=True)
        codec = message.attributes & batch.COMPRESSION_MASK
        log_append = message.magic == 1 and bool(message.attributes & batch.TIMESTAMP_TYPE_MASK)
        out += build_batch(
            [SimpleRecord(value=m.value, key=m.key, timestamp=m.timestamp) for m in inner],
            codec=Codec(codec),
            timestamp_type=batch.LOG_APPEND_TIME if log_append else batch.CREATE_TIME,
        )
        position += message.size
    return bytes(out)
