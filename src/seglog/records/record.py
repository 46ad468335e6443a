"""Records inside a v2 batch, decoded for the paths that need them.

The produce and fetch paths never come here. Compaction (keys), lookups by
time inside a batch, tools, and the Spark reader do. A record::

    Record =>
      length          varint   bytes after this field
      attributes      int8     unused, 0
      timestamp_delta varlong  from the batch's base timestamp
      offset_delta    varint   from the batch's base offset
      key             varint length (-1 = null), bytes
      value           varint length (-1 = null = tombstone), bytes
      header_count    varint
      headers         (key: varint length, utf-8; value: varint length (-1 null), bytes)*

The records of a batch follow its 61-byte header, compressed as one block
when the batch has a codec.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError
from seglog.records import batch
from seglog.records.compression import Codec, decompress
from seglog.records.varint import decode_varint, decode_varlong


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a string key and a nullable byte value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _bytes_field(buf: memoryview, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(buf, position)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative field length {length}")
        return None, position
    if position + length > end:
        raise CorruptRecordError("record field runs past the end of the record")
    return bytes(buf[position : position + length]), position + length


def records_block(buf: BytesLike, position: int, header: batch.BatchHeader) -> memoryview:
    """The batch's records as bytes, decompressed when needed."""
    view = memoryview(buf)
    raw = view[position + batch.HEADER_SIZE : position + header.size]
    if header.compression == Codec.NONE:
        return raw
    return memoryview(decompress(header.compression, raw))


def decode_records(buf: BytesLike, position: int = 0) -> list[Record]:
    """Decode every record of the v2 batch at ``position``.

    Raises CorruptRecordError when the records do not match the header.
    """
    header = batch.read_header(buf, position)
    data = records_block(buf, position, header)
    base_offset = header.base_offset
    log_append = header.timestamp_type == batch.LOG_APPEND_TIME
    base_ts = header.base_timestamp
    out: list[Record] = []
    pos = 0
    end = len(data)
    for _ in range(header.record_count):
        length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(
                f"record of length {length} runs past the batch at offset {base_offset}"
            )
        pos += 1  # attributes
        ts_delta, pos = decode_varlong(data, pos)
        offset_delta, pos = decode_varint(data, pos)
        key, pos = _bytes_field(data, pos, record_end)
        value, pos = _bytes_field(data, pos, record_end)
        count, pos = decode_varint(data, pos)
        if count < 0:
            raise CorruptRecordError(f"negative header count {count}")
        headers: list[Header] = []
        for _ in range(count):
            hkey, pos = _bytes_field(data, pos, record_end)
            if hkey is None:
                raise CorruptRecordError("a record header has a null key")
            hvalue, pos = _bytes_field(data, pos, record_end)
            try:
                headers.append(Header(hkey.decode("utf-8"), hvalue))
            except UnicodeDecodeError:
                raise CorruptRecordError("a record header key is not UTF-8") from None
        if pos != record_end:
            raise CorruptRecordError(
                f"record at offset {base_offset + offset_delta} has {record_end - pos} "
                f"bytes beyond its fields"
            )
        timestamp = header.max_timestamp if log_append else base_ts + ts_delta
        out.append(Record(base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - pos} bytes after its "
            f"{header.record_count} records"
        )
    return out


def first_record_timestamp(buf: BytesLike, position: int = 0) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of an uncompressed v2 batch, else None.

    A cheap look at one record, for lookups by time that can stop at a batch's start.
    """
    header = batch.read_header(buf, position)
    if header.compression != Codec.NONE or header.record_count == 0:
        return None
    if header.timestamp_type == batch.LOG_APPEND_TIME:
        return header.base_offset, header.max_timestamp
    view = memoryview(buf)
    pos = position + batch.HEADER_SIZE
    _, pos = decode_varint(view, pos)
    pos += 1
    ts_delta, pos = decode_varlong(view, pos)
    offset_delta, pos = decode_varint(view, pos)
    return header.base_offset + offset_delta, header.base_timestamp + ts_delta


def first_at_or_after(
    buf: BytesLike, timestamp: int, min_offset: int, position: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the v2 batch at ``position`` whose
    timestamp is at least ``timestamp`` and offset at least ``min_offset``.

    Walks record boundaries reading only the timestamp and offset deltas, so a
    lookup by time does not build every record of the batch.
    """
    header = batch.read_header(buf, position)
    if header.timestamp_type == batch.LOG_APPEND_TIME:
        if header.max_timestamp < timestamp or header.last_offset < min_offset:
            return None
        return max(header.base_offset, min_offset), header.max_timestamp
    data = records_block(buf, position, header)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    pos = 0
    for _ in range(header.record_count):
        length, body = decode_varint(data, pos)
        ts_delta, after = decode_varlong(data, body + 1)
        offset_delta, _ = decode_varint(data, after)
        record_ts = base_ts + ts_delta
        if record_ts >= timestamp and base_offset + offset_delta >= min_offset:
            return base_offset + offset_delta, record_ts
        pos = body + length
    return None


def decode_entry(buf: BytesLike) -> list[Record]:
    """Decode one log entry of any format (``buf`` holds exactly that entry)."""
    magic = batch.peek_magic(buf, 0)
    if magic == batch.CURRENT_MAGIC:
        return decode_records(buf, 0)
    from seglog.records import legacy

    return legacy.decode_legacy(memoryview(buf))


def decode_entries(buf: BytesLike) -> Iterator[Record]:
    """Records of every whole entry in ``buf``; a partial entry at the end is ignored.

    Fetch responses may end inside a batch, so the tail is expected to be cut.
    """
    view = memoryview(buf)
    position = 0
    while position + batch.LOG_OVERHEAD <= len(view):
        _, size = batch.peek_offset_and_size(view, position)
        if position + size > len(view):
            return
        yield from decode_entry(view[position : position + size])
        position += size
