"""Shallow iteration over a log's entries, whatever their format.

A ``.log`` file (and a produce request's records) is a sequence of entries,
each starting with ``offset int64, size int32`` and carrying its magic byte at
position 16: v2 record batches (magic 2) or legacy messages (magic 0 and 1,
where a compressed "wrapper" message holds a whole inner message set). Storage
needs from each entry only its extent, offsets and max timestamp; this module
gives that without decoding records of v2 batches.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch, legacy
from seglog.records.crc32c import crc32c_raw

# The v2 header fields a scan needs: base offset, batch length, CRC, last offset
# delta, max timestamp, record count (the rest skipped, magic read on its own).
_SCAN_FIELDS = struct.Struct(">qi5xI2xi8xq14xi")


class EntryInfo(NamedTuple):
    """What storage knows of one log entry without decoding its records."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int

    @property
    def next_offset(self) -> int:
        """The offset that follows this entry."""
        return self.last_offset + 1


def read_entry(buf: BytesLike, position: int = 0, *, check_crc: bool = True) -> EntryInfo:
    """Describe the entry at ``position``; raise CorruptRecordError if it is not whole and valid."""
    view = memoryview(buf)
    magic = batch.peek_magic(view, position)
    if magic == batch.CURRENT_MAGIC:
        header = batch.validate(view, position) if check_crc else batch.read_header(view, position)
        return EntryInfo(
            position,
            header.size,
            magic,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
            header.record_count,
        )
    if magic in (0, 1):
        _, size = batch.peek_offset_and_size(view, position)
        if position + size > len(view):
            raise CorruptRecordError(
                f"truncated message at position {position}: size {size}, "
                f"only {len(view) - position} bytes present"
            )
        info = legacy.describe_entry(view[position : position + size], check_crc=check_crc)
        return EntryInfo(
            position,
            size,
            magic,
            info.base_offset,
            info.last_offset,
            info.max_timestamp,
            info.record_count,
        )
    raise UnsupportedMagicError(f"log entry at position {position} has unknown magic {magic}")


class ScanResult(NamedTuple):
    """The entries found by :func:`scan`, where valid data ends, and why it ended there."""

    entries: list[EntryInfo]
    valid_end: int
    error: CorruptRecordError | None


def walk(
    read: Callable[[int, int], bytes], start: int, stop: int, chunk_size: int
) -> Iterator[EntryInfo]:
    """The whole entries of a file from ``start`` (an entry boundary) to ``stop``.

    ``read(position, length)`` reads from the file (a ``pread``); this module
    does no I/O itself. Headers only, no CRC check: a v2 batch is described by
    its 61-byte header, read ``chunk_size`` bytes at a time, so the bodies of
    large batches are skipped unread; a legacy entry is read whole. The walk
    ends at the first entry that does not fit before ``stop``.
    """
    position = start
    chunk = b""
    chunk_start = position
    header_size = batch.HEADER_SIZE
    unpack = batch.HEADER.unpack_from
    while position + batch.LOG_OVERHEAD <= stop:
        rel = position - chunk_start
        if rel < 0 or rel + header_size > len(chunk):
            chunk = read(position, min(chunk_size, stop - position))
            chunk_start, rel = position, 0
        if rel + header_size <= len(chunk) and chunk[rel + batch.MAGIC_OFFSET] == 2:
            fields = unpack(chunk, rel)
            size = fields[1] + batch.LOG_OVERHEAD
            if size < header_size or position + size > stop:
                return
            yield EntryInfo(
                position, size, 2, fields[0], fields[0] + fields[6], fields[8], fields[12]
            )
        else:
            # A legacy message (or a batch shorter than a v2 header at the very
            # end): it needs its whole bytes to be described.
            _, size = batch.peek_offset_and_size(read(position, batch.LOG_OVERHEAD + 5), 0)
            if size < batch.LOG_OVERHEAD or position + size > stop:
                return
            yield read_entry(read(position, size), 0, check_crc=False)._replace(position=position)
        position += size


def scan(
    buf: BytesLike, start: int = 0, end: int | None = None, *, check_crc: bool = True
) -> ScanResult:
    """Read entries from ``start`` until ``end`` or the first entry that is not whole and valid.

    Never raises for bad data: the first problem is returned in ``error`` and
    ``valid_end`` is the position just after the last good entry, which is
    where recovery truncates.
    """
    view = memoryview(buf)
    stop = len(view) if end is None else min(end, len(view))
    window = view[:stop]
    entries: list[EntryInfo] = []
    position = start
    error: CorruptRecordError | None = None
    # The common case, inlined: a whole v2 batch with a valid CRC. Anything else
    # goes through read_entry, which raises the precise error.
    unpack = _SCAN_FIELDS.unpack_from
    header_size = batch.HEADER_SIZE
    crc_start = batch.ATTRIBUTES_OFFSET
    checksum = crc32c_raw
    append = entries.append
    # EntryInfo(...) runs a Python-level __new__; tuple.__new__ builds the same
    # named tuple in C (it is what EntryInfo._make does).
    new_entry = tuple.__new__
    try:
        while position < stop:
            if position + header_size <= stop and window[position + 16] == 2:
                base, length, crc, last_delta, max_timestamp, count = unpack(window, position)
                size = length + 12
                if (
                    size >= header_size
                    and position + size <= stop
                    and last_delta >= 0
                    and count >= 0
                    and (
                        not check_crc
                        or checksum(window[position + crc_start : position + size]) == crc
                    )
                ):
                    append(
                        new_entry(
                            EntryInfo,
                            (position, size, 2, base, base + last_delta, max_timestamp, count),
                        )
                    )
                    position += size
                    continue
            try:
                info = read_entry(window, position, check_crc=check_crc)
            except CorruptRecordError as exc:
                # Drop the traceback: its frames would pin views of a caller's mmap.
                error = exc.with_traceback(None)
                break
            entries.append(info)
            position += info.size
    finally:
        window.release()
        view.release()
    return ScanResult(entries, position, error)
