"""Legacy message sets (magic 0 and 1): read them, and convert them to v2.

seglog never writes these formats; it reads them from old segment files and
converts what old clients send. A message set is entries back to back, with
no count in front. One entry::

    Entry =>
      offset      int64
      size        int32    bytes after this field
      crc         uint32   CRC-32 (IEEE, zlib's) of magic .. end
      magic       int8     0 or 1
      attributes  int8     bits 0-2 codec; bit 3 timestamp type (magic 1)
      timestamp   int64    magic 1 only
      key         int32 length (-1 = null), bytes
      value       int32 length (-1 = null), bytes

A compressed message is a *wrapper*: its value is a whole message set,
compressed, whose messages have the wrapper's magic and no codec of their
own. In magic 1 the inner offsets are relative (0, 1, ...) and the wrapper
carries the absolute offset of the last inner message; in magic 0 the inner
offsets are absolute. A magic 1 wrapper flagged LogAppendTime gives its own
timestamp to every inner message. Magic 0 has no timestamps (-1 here).

LZ4 values of magic 0 wrappers have a frame header checksum that Kafka
ignores (old clients computed it wrongly): see :mod:`.compression`.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch
from seglog.records.compression import Codec, decompress
from seglog.records.record import Record

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_CRC_START = 16  # the CRC covers magic (at 16) .. end
# Smallest size field: crc, magic, attributes, [timestamp], key length, value length.
_MIN_SIZE = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}


class LegacyEntryInfo(NamedTuple):
    """What storage needs of one legacy entry: its offsets, max timestamp and count."""

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
    size: int  # of the whole entry, 12-byte prefix included

    @property
    def codec(self) -> int:
        return self.attributes & batch.COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & batch.TIMESTAMP_TYPE_MASK)


def _parse(view: memoryview, position: int, check_crc: bool) -> _Message:
    """The entry at ``position``, which must lie whole inside ``view``."""
    end = len(view)
    if position + _PREFIX.size > end:
        raise CorruptRecordError(f"truncated legacy message at position {position}")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(view, position)
    if magic not in (0, 1):
        raise UnsupportedMagicError(f"legacy message at position {position} has magic {magic}")
    total = size + batch.LOG_OVERHEAD
    if size < _MIN_SIZE[magic] or position + total > end:
        raise CorruptRecordError(
            f"legacy message at position {position} has size {size}, "
            f"{end - position - batch.LOG_OVERHEAD} bytes present"
        )
    stop = position + total
    if check_crc:
        computed = zlib.crc32(view[position + _CRC_START : stop])
        if computed != crc:
            raise CorruptRecordError(
                f"legacy message at offset {offset} is corrupt: stored CRC {crc:#010x}, "
                f"computed {computed:#010x}"
            )
    pos = position + _PREFIX.size
    timestamp = batch.NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(view, pos)
        pos += 8
    fields: list[bytes | None] = []
    for _ in range(2):
        if pos + 4 > stop:
            raise CorruptRecordError(f"truncated legacy message at offset {offset}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0:
            if length != -1:
                raise CorruptRecordError(f"legacy message at offset {offset}: length {length}")
            fields.append(None)
            continue
        if pos + length > stop:
            raise CorruptRecordError(f"legacy message field runs past offset {offset}")
        fields.append(bytes(view[pos : pos + length]))
        pos += length
    if pos != stop:
        raise CorruptRecordError(
            f"legacy message at offset {offset} has {stop - pos} bytes after its value"
        )
    return _Message(offset, magic, attributes, timestamp, fields[0], fields[1], total)


def _inner_messages(wrapper: _Message, check_crc: bool) -> list[_Message]:
    """The messages inside a compressed wrapper, with absolute offsets and final timestamps."""
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed legacy message at {wrapper.offset} has no value")
    data = memoryview(
        decompress(wrapper.codec, wrapper.value, ignore_lz4_header_checksum=wrapper.magic == 0)
    )
    inner: list[_Message] = []
    position = 0
    while position < len(data):
        message = _parse(data, position, check_crc)
        if message.codec:
            raise CorruptRecordError(
                f"compressed legacy message at {wrapper.offset} nests another compressed one"
            )
        if message.magic != wrapper.magic:
            raise CorruptRecordError(
                f"compressed legacy message at {wrapper.offset} has magic {wrapper.magic} "
                f"but holds a message of magic {message.magic}"
            )
        inner.append(message)
        position += message.size
    if not inner:
        raise CorruptRecordError(f"compressed legacy message at {wrapper.offset} is empty")
    if wrapper.magic == 1:
        # Relative inner offsets: the last one is the wrapper's absolute offset.
        shift = wrapper.offset - inner[-1].offset
        log_append = wrapper.log_append_time
        inner = [
            m._replace(
                offset=m.offset + shift,
                timestamp=wrapper.timestamp if log_append else m.timestamp,
            )
            for m in inner
        ]
    return inner


def _expand(message: _Message, check_crc: bool) -> list[_Message]:
    if message.codec:
        return _inner_messages(message, check_crc)
    return [message]


def describe_entry(view: BytesLike, check_crc: bool = True) -> LegacyEntryInfo:
    """Offsets, max timestamp and record count of one legacy entry.

    ``view`` is exactly the entry, 12-byte prefix included. A compressed
    wrapper is decompressed to find its first offset and its count; its last
    offset is the wrapper's own. Raises CorruptRecordError for a bad CRC
    (with ``check_crc``, which also covers the inner messages), truncation, or
    a buffer longer than the entry.
    """
    view = memoryview(view)
    message = _parse(view, 0, check_crc)
    if message.size != len(view):
        raise CorruptRecordError(
            f"legacy entry is {message.size} bytes but its buffer holds {len(view)}"
        )
    if not message.codec:
        return LegacyEntryInfo(message.offset, message.offset, message.timestamp, 1)
    inner = _inner_messages(message, check_crc)
    return LegacyEntryInfo(
        inner[0].offset,
        message.offset,
        max(m.timestamp for m in inner),
        len(inner),
    )


NO_TIMESTAMP_TYPE = -1
"""Kafka's ``TimestampType.NO_TIMESTAMP_TYPE`` id: magic 0 messages carry no timestamp."""


def timestamp_type(entry: BytesLike) -> int:
    """Kafka's timestamp type id of the legacy entry at the start of ``entry``.

    :data:`NO_TIMESTAMP_TYPE` for magic 0; for magic 1, the attributes' bit 3:
    ``batch.CREATE_TIME`` or ``batch.LOG_APPEND_TIME`` (a wrapper's applies to
    every inner message).
    """
    view = memoryview(entry)
    if len(view) < _PREFIX.size:
        raise CorruptRecordError("truncated legacy message")
    magic, attributes = _PREFIX.unpack_from(view, 0)[3:]
    if magic == 0:
        return NO_TIMESTAMP_TYPE
    return batch.LOG_APPEND_TIME if attributes & batch.TIMESTAMP_TYPE_MASK else batch.CREATE_TIME


def decode_legacy(view: BytesLike, *, check_crc: bool = False) -> list[Record]:
    """Every message of a legacy message set, wrappers expanded, with absolute offsets.

    ``view`` must hold whole entries. CRCs are checked only with ``check_crc``
    (storage checks them once when it scans a segment).
    """
    view = memoryview(view)
    records: list[Record] = []
    position = 0
    while position < len(view):
        message = _parse(view, position, check_crc)
        for m in _expand(message, check_crc):
            records.append(Record(m.offset, m.timestamp, m.key, m.value, ()))
        position += message.size
    return records


def convert_to_v2(view: BytesLike) -> bytes:
    """Convert a legacy message set (as an old producer sends it) to v2 batches.

    Keys, values, timestamps (-1 for magic 0) and the codec are kept. Runs of
    consecutive entries with the same codec and CreateTime become one batch
    (a compressed wrapper's inner messages all go into it); an entry stamped
    with LogAppendTime becomes a batch of its own, since its time is the
    batch's max timestamp. Offsets are relative within each batch (0, 1, ...)
    and are assigned on append. CRCs are checked: this is input from a client.
    """
    from seglog.records.builder import SimpleRecord, build_batch

    view = memoryview(view)
    out = bytearray()
    run: list[SimpleRecord] = []
    run_codec = Codec.NONE

    def flush() -> None:
        if run:
            out.extend(build_batch(run, codec=run_codec))
            run.clear()

    position = 0
    while position < len(view):
        message = _parse(view, position, check_crc=True)
        position += message.size
        inner = [
            SimpleRecord(value=m.value, key=m.key, timestamp=m.timestamp)
            for m in _expand(message, check_crc=True)
        ]
        codec = Codec(message.codec)
        if message.log_append_time:
            flush()
            out += build_batch(
                inner,
                codec=codec,
                timestamp_type=batch.LOG_APPEND_TIME,
                max_timestamp=message.timestamp,
            )
            continue
        if codec != run_codec:
            flush()
            run_codec = codec
        run.extend(inner)
    flush()
    return bytes(out)


__all__ = [
    "NO_TIMESTAMP_TYPE",
    "LegacyEntryInfo",
    "convert_to_v2",
    "decode_legacy",
    "describe_entry",
    "timestamp_type",
]
