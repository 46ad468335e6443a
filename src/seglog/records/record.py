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

Timestamps: a record's timestamp is ``base_timestamp + timestamp_delta``,
also when the batch carries a compaction delete horizon (its base timestamp
*is* the horizon then, and the deltas were written relative to it, so they
may be negative). In a LogAppendTime batch every record's timestamp is the
batch's max timestamp, whatever the deltas say.
"""

from __future__ import annotations

import struct
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
    """A varint-length-prefixed, nullable byte field that must end by ``end``."""
    length, position = decode_varint(buf, position)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"negative field length {length}")
        return None, position
    if position + length > end:
        raise CorruptRecordError("record field runs past the end of the record")
    return bytes(buf[position : position + length]), position + length


def records_block(buf: BytesLike, position: int, header: batch.BatchHeader) -> memoryview:
    """The batch's records as bytes, decompressed when needed.

    An empty batch (record count 0) yields an empty block without being
    decompressed: Kafka writes such batches with no payload at all.
    """
    view = memoryview(buf)
    raw = view[position + batch.HEADER_SIZE : position + header.size]
    if header.compression == Codec.NONE:
        return raw
    if header.record_count == 0:
        return raw[:0]
    return memoryview(decompress(header.compression, raw))


def _decode_headers(data: memoryview, pos: int, record_end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    # Each header takes at least two bytes: a bound that stops a forged count early.
    if count * 2 > record_end - pos:
        raise CorruptRecordError(f"header count {count} does not fit in the record")
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
    return tuple(headers), pos


def decode_records(buf: BytesLike, position: int = 0, *, check_crc: bool = False) -> list[Record]:
    """Decode every record of the v2 batch at ``position``, with absolute offsets.

    Raises CorruptRecordError when the records do not match the header (count,
    lengths, bytes left over) and, with ``check_crc``, when the CRC fails.
    Storage checks CRCs once when it reads a segment, hence the default.
    """
    header = batch.validate(buf, position) if check_crc else batch.read_header(buf, position)
    data = records_block(buf, position, header)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_ts = header.max_timestamp if header.timestamp_type == batch.LOG_APPEND_TIME else None
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    for _ in range(header.record_count):
        length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(
                f"record of length {length} runs past the batch at offset {base_offset}"
            )
        pos += 1  # attributes: no bit is defined for records
        ts_delta, pos = decode_varlong(data, pos)
        offset_delta, pos = decode_varint(data, pos)
        key, pos = _bytes_field(data, pos, record_end)
        value, pos = _bytes_field(data, pos, record_end)
        if pos < record_end and data[pos] == 0:
            headers: tuple[Header, ...] = ()  # the usual case: a header count of zero
            pos += 1
        else:
            headers, pos = _decode_headers(data, pos, record_end)
        if pos != record_end:
            raise CorruptRecordError(
                f"record at offset {base_offset + offset_delta} has length {length} "
                f"but its fields take {length + pos - record_end} bytes"
            )
        timestamp = base_ts + ts_delta if log_append_ts is None else log_append_ts
        append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - pos} bytes after its "
            f"{header.record_count} records"
        )
    return out


def decode_record(data: BytesLike, start: int, end: int, header: batch.BatchHeader) -> Record:
    """The one record whose fields lie in ``data[start:end]`` (after its length varint).

    ``data`` is the batch's records block (:func:`records_block`). For lookups
    that found a record's place without decoding its neighbours.
    """
    view = memoryview(data)
    pos = start + 1  # attributes
    ts_delta, pos = decode_varlong(view, pos)
    offset_delta, pos = decode_varint(view, pos)
    key, pos = _bytes_field(view, pos, end)
    value, pos = _bytes_field(view, pos, end)
    headers, pos = _decode_headers(view, pos, end)
    if pos != end:
        raise CorruptRecordError(
            f"record at offset {header.base_offset + offset_delta} does not end where its "
            "length says"
        )
    if header.timestamp_type == batch.LOG_APPEND_TIME:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + ts_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers)


def iter_batches(
    buf: BytesLike, *, check_crc: bool = True
) -> Iterator[tuple[batch.BatchHeader, list[Record]]]:
    """(header, records) for each v2 batch in ``buf``, which must hold whole batches.

    Raises CorruptRecordError at the first batch that is truncated, fails its
    CRC (with ``check_crc``) or does not decode; UnsupportedMagicError at an
    entry that is not a v2 batch.
    """
    for position, header in batch.iter_headers(buf, check_crc=check_crc):
        yield header, decode_records(buf, position)


def first_record_timestamp(buf: BytesLike, position: int = 0) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of an uncompressed v2 batch, else None.

    A cheap look at one record, for lookups by time that can stop at a batch's start.
    """
    header = batch.read_header(buf, position)
    if header.compression != Codec.NONE or header.record_count == 0:
        return None
    view = memoryview(buf)[: position + header.size]
    pos = position + batch.HEADER_SIZE
    _, pos = decode_varint(view, pos)
    pos += 1
    ts_delta, pos = decode_varlong(view, pos)
    offset_delta, pos = decode_varint(view, pos)
    # The first record need not be at the base offset: compaction leaves gaps.
    if header.timestamp_type == batch.LOG_APPEND_TIME:
        return header.base_offset + offset_delta, header.max_timestamp
    return header.base_offset + offset_delta, header.base_timestamp + ts_delta


# What a lookup by time needs of a v2 header: base offset, batch length, magic,
# attributes, last offset delta, base and max timestamps, record count.
TIME_FIELDS = struct.Struct(">qi4xb4xhiqq14xi")


def first_at_or_after(
    buf: BytesLike, timestamp: int, min_offset: int, position: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the v2 batch at ``position`` whose
    timestamp is at least ``timestamp`` and offset at least ``min_offset``.

    Walks record boundaries reading only the timestamp and offset deltas, so a
    lookup by time does not build every record of the batch. An uncompressed
    batch is walked where it lies in ``buf``, with no view or copy made.
    """
    available = len(buf) - position
    if available >= batch.HEADER_SIZE:
        base_offset, length, magic, attributes, last_delta, base_ts, max_ts, count = (
            TIME_FIELDS.unpack_from(buf, position)
        )
    else:
        magic = -1
    if (
        magic != batch.CURRENT_MAGIC
        or attributes & batch.COMPRESSION_MASK
        or length < batch.HEADER_SIZE - batch.LOG_OVERHEAD
        or length + batch.LOG_OVERHEAD > available
        or last_delta < 0
        or count < 0
    ):
        # Compressed, or anything read_header has a precise error for.
        header = batch.read_header(buf, position)
        base_offset, attributes, base_ts = (
            header.base_offset,
            header.attributes,
            header.base_timestamp,
        )
        max_ts, count = header.max_timestamp, header.record_count
        data: BytesLike = records_block(buf, position, header)
        pos, end = 0, len(data)
    else:
        data = buf
        pos = position + batch.HEADER_SIZE
        end = position + length + batch.LOG_OVERHEAD
    return first_in_records(
        data,
        pos,
        end,
        count,
        base_offset,
        attributes,
        base_ts,
        max_ts,
        last_delta,
        timestamp,
        min_offset,
    )


def first_in_records(
    data: BytesLike,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    attributes: int,
    base_ts: int,
    max_ts: int,
    last_delta: int,
    timestamp: int,
    min_offset: int,
) -> tuple[int, int] | None:
    """:func:`first_at_or_after` over the (uncompressed) records ``data[pos:end]`` of a
    batch whose header fields the caller read already, as a walk of headers does."""
    log_append = attributes & batch.TIMESTAMP_TYPE_MASK
    if log_append and (max_ts < timestamp or base_offset + last_delta < min_offset):
        return None
    # The bounds as deltas, so the loop compares what it decodes. LogAppendTime:
    # every record has the batch's time (at or after the target, checked above),
    # but compaction may have left gaps, so the answer is still the first record
    # at or after min_offset.
    min_ts_delta = -(2**64) if log_append else timestamp - base_ts
    min_offset_delta = min_offset - base_offset
    # A one-byte zigzag timestamp delta at or above a positive bound is an even
    # byte of at least twice the bound: the walk compares the byte itself.
    ts_floor = 2 * min_ts_delta if 0 < min_ts_delta < 64 else -1
    for _ in range(count):
        # The varints are decoded inline when they are short (a length of one or
        # two bytes, deltas of one byte: records under 8 KiB in a batch of up to
        # 64 records and 64 ms); anything else goes through the general decoders.
        # An even zigzag value is a non-negative one: half of it.
        if pos + 4 < end and not (raw := data[pos]) & 1:
            if raw < 0x80:
                body = pos + 1
                length = raw >> 1
            elif (second := data[pos + 1]) < 0x80:
                body = pos + 2
                length = ((raw & 0x7F) | (second << 7)) >> 1
            else:
                length, body = decode_varint(data, pos)
        else:
            # ``data`` may go on past the batch: a record must not.
            if pos >= end:
                raise CorruptRecordError("the records run past the end of the batch")
            length, body = decode_varint(data, pos)
            if length < 0:
                raise CorruptRecordError(f"negative record length {length}")
        if body + 2 < end and (ts_raw := data[body + 1]) < 0x80:
            if ts_raw < ts_floor or (ts_floor >= 0 and ts_raw & 1):
                pos = body + length
                continue
            ts_delta = (ts_raw >> 1) ^ -(ts_raw & 1)
            if ts_delta >= min_ts_delta:
                if (offset_raw := data[body + 2]) < 0x80:
                    offset_delta = (offset_raw >> 1) ^ -(offset_raw & 1)
                else:
                    offset_delta, _ = decode_varint(data, body + 2)
                if offset_delta >= min_offset_delta:
                    break
        else:
            ts_delta, after = decode_varlong(data, body + 1)
            offset_delta, _ = decode_varint(data, after)
            if ts_delta >= min_ts_delta and offset_delta >= min_offset_delta:
                break
        pos = body + length
    else:
        return None
    if body + length > end:
        raise CorruptRecordError("the records run past the end of the batch")
    if log_append:
        return base_offset + offset_delta, max_ts
    return base_offset + offset_delta, base_ts + ts_delta


def decode_entry(buf: BytesLike) -> list[Record]:
    """Decode one log entry of any format (``buf`` holds exactly that entry)."""
    magic = batch.peek_magic(buf, 0)
    if magic == batch.CURRENT_MAGIC:
        return decode_records(buf, 0)
    # Imported here: legacy imports the builder, which imports this module.
    from seglog.records import legacy

    return legacy.decode_legacy(memoryview(buf))


def decode_entries(buf: BytesLike) -> Iterator[Record]:
    """Records of every whole entry in ``buf``, any magic; a partial entry at the end is ignored.

    Fetch responses may end inside a batch, so the tail is expected to be cut.
    CRCs are not checked here.
    """
    view = memoryview(buf)
    position = 0
    while position + batch.LOG_OVERHEAD <= len(view):
        _, size = batch.peek_offset_and_size(view, position)
        if position + size > len(view):
            return
        yield from decode_entry(view[position : position + size])
        position += size


#: What :func:`scan_slots` gives for each record: ``(offset, key, is_tombstone,
#: timestamp_delta, start, body, after_timestamp, end)``, positions in the buffer
#: scanned: the record's length prefix at ``start``, its attributes at ``body``,
#: the offset delta at ``after_timestamp``, and ``end`` just past it.
RecordSlot = tuple[int, bytes | None, bool, int, int, int, int, int]


def scan_slots(data: bytes, start: int, end: int, base_offset: int, count: int) -> list[RecordSlot]:
    """Where each of the ``count`` records in ``data[start:end]`` lies, with its key.

    For compaction: the key, offset and tombstone flag decide what stays, and
    the positions let what stays be copied as bytes rather than rebuilt from
    values. Values and headers are skipped unread. ``data`` is ``bytes`` (not a
    view) so that a key is one slice. Short varints are decoded inline: this
    loop runs once per record of a compacted log, twice per cleaning.

    Raises CorruptRecordError when a record or its key or value runs past the
    record, or the records do not end where the block does.
    """
    out: list[RecordSlot] = []
    append = out.append
    pos = start
    for _ in range(count):
        # length (at most 5 bytes: a varint)
        if pos + 1 < end and (raw := data[pos]) < 0x80:
            length = (raw >> 1) ^ -(raw & 1)
            body = pos + 1
        elif pos + 2 < end and (second := data[pos + 1]) < 0x80:
            raw = (data[pos] & 0x7F) | (second << 7)
            length = (raw >> 1) ^ -(raw & 1)
            body = pos + 2
        else:
            length, body = decode_varint(data, pos)
        record_end = body + length
        # Six bytes: attributes and five one-byte fields, the least a record takes.
        if length < 6 or record_end > end:
            raise CorruptRecordError(
                f"record of length {length} runs past the batch at offset {base_offset}"
            )
        # timestamp delta (varlong), after the attributes byte
        p = body + 1
        if (raw := data[p]) < 0x80:
            ts_delta = (raw >> 1) ^ -(raw & 1)
            after_ts = p + 1
        else:
            ts_delta, after_ts = decode_varlong(data, p)
        # offset delta
        if after_ts < record_end and (raw := data[after_ts]) < 0x80:
            offset_delta = (raw >> 1) ^ -(raw & 1)
            p = after_ts + 1
        else:
            offset_delta, p = decode_varint(data, after_ts)
        # key
        if p < record_end and (raw := data[p]) < 0x80:
            key_length = (raw >> 1) ^ -(raw & 1)
            p += 1
        else:
            key_length, p = decode_varint(data, p)
        if key_length >= 0:
            key: bytes | None = data[p : p + key_length]
            p += key_length
            if p > record_end:
                raise CorruptRecordError("record field runs past the end of the record")
        elif key_length == -1:
            key = None
        else:
            raise CorruptRecordError(f"negative field length {key_length}")
        # value: only whether it is null, and that it fits
        if p + 1 < record_end and (raw := data[p]) < 0x80:
            value_length = (raw >> 1) ^ -(raw & 1)
            p += 1
        elif p + 2 < record_end and (second := data[p + 1]) < 0x80:
            raw = (data[p] & 0x7F) | (second << 7)
            value_length = (raw >> 1) ^ -(raw & 1)
            p += 2
        else:
            value_length, p = decode_varint(data, p)
        if value_length < -1 or p + value_length >= record_end:
            # >=: the header count (at least one byte) follows the value.
            raise CorruptRecordError(
                f"record at offset {base_offset + offset_delta} runs past its length {length}"
            )
        append(
            (
                base_offset + offset_delta,
                key,
                value_length == -1,
                ts_delta,
                pos,
                body,
                after_ts,
                record_end,
            )
        )
        pos = record_end
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - pos} bytes after its {count} records"
        )
    return out
