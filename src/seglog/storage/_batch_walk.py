"""Walking the entries of a ``.log`` by their headers: lookups, tails, checked chunks.

One ``.log`` is read through a ``read(position, length)`` function, so the
same walks serve the live segments (over their descriptor and environment,
:mod:`seglog.storage.segment`) and the read-only readers
(:class:`~seglog.storage.reader.SegmentReader`): a lookup by offset or by
time (:class:`BatchWalk`), the tail of a file (:func:`scan_tail`), the
CRC-checked walk recovery rebuilds indexes from
(:meth:`BatchWalk.valid_chunks`), and whole entries with their bytes for
decoding their records (:func:`read_entries`). Records are never decoded
here beyond the timestamps a lookup by time needs. Re-exported by
:mod:`seglog.storage.reader`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from seglog.errors import CorruptRecordError
from seglog.records import batch, log_entries
from seglog.records import record as record_codec
from seglog.records.log_entries import EntryInfo, ScanResult

# How much a read of whole entries (for their records) reads at a time.
_READ_CHUNK = 1 << 20


#: How much a lookup reads at a time while walking batch headers: a chunk, or
#: only a header once the batches seen are larger than a chunk.
SCAN_CHUNK = 8 * 1024
_HEADER_SIZE = batch.HEADER_SIZE
_MAGIC_OFFSET = batch.MAGIC_OFFSET
_LOG_OVERHEAD = batch.LOG_OVERHEAD
# From a v2 header: base offset, batch length, last offset delta.
_SPAN = struct.Struct(">qi11xi")
# How much a walk that checks CRCs reads at a time.
_VALID_CHUNK = 1 << 20

#: ``scan(chunk, position)``: check the entries of ``chunk`` (the file's bytes from
#: ``position``), as :func:`~seglog.records.log_entries.scan` does.
ChunkScan = Callable[[memoryview, int], ScanResult]
#: ``read(position, length)``: up to ``length`` bytes of a ``.log`` at ``position``.
Read = Callable[[int, int], bytes]
#: ``read_into(view, position)``: fill ``view`` from ``position``; the bytes read
#: (fewer only at the end of the file).
ReadInto = Callable[[memoryview, int], int]


class Located(NamedTuple):
    """The entry a lookup by offset found: its first offset, position and size."""

    base_offset: int
    position: int
    size: int


class BatchWalk:
    """The walks of one ``.log``'s entries by their headers, through ``read``.

    Used by the live segments (over their descriptor and environment) and by
    :class:`SegmentReader` alike. A walk starts at an entry boundary (an index
    entry's position) and reads headers only, no CRC: v2 batches from their
    61-byte header, read :data:`SCAN_CHUNK` bytes at a time, or one header at a
    time while the batches seen are larger than a chunk (the read size adapts,
    and is kept between walks of the same file); anything else (a legacy
    message set) by the general walk of :func:`seglog.records.log_entries.walk`.
    A walk ends at an entry cut short by ``stop``.

    :meth:`locate` and :meth:`first_at_or_after` are the lookup paths of every
    fetch and ListOffsets: their v2 loop is written out for speed.
    """

    __slots__ = ("_batch_size", "_read", "_read_into", "_read_size")

    def __init__(self, read: Read, read_into: ReadInto | None = None) -> None:
        self._read = read
        self._read_into = self._copy_into if read_into is None else read_into
        self._read_size = SCAN_CHUNK
        # The size of the last batch a lookup by time walked.
        self._batch_size = 0

    def entries(self, start: int, stop: int) -> Iterator[EntryInfo]:
        """Every whole entry from ``start`` to ``stop``, described from its header.

        Raises CorruptRecordError at an entry whose header is impossible.
        """
        return log_entries.walk(self._read, start, stop, SCAN_CHUNK)

    def locate(self, position: int, stop: int, offset: int) -> tuple[int, int, int] | None:
        """(base offset, position, size) of the first entry from ``position`` whose last
        offset is at least ``offset``; None when there is none before ``stop``."""
        read = self._read
        chunk = b""
        chunk_start = position
        read_size = self._read_size
        unpack = _SPAN.unpack_from
        while position + _LOG_OVERHEAD <= stop:
            rel = position - chunk_start
            if rel + _HEADER_SIZE > len(chunk):
                chunk = read(position, min(read_size, stop - position))
                chunk_start, rel = position, 0
            if rel + _HEADER_SIZE > len(chunk) or chunk[rel + _MAGIC_OFFSET] != 2:
                break  # not a whole v2 header: the general walk takes over from here
            base, length, last_delta = unpack(chunk, rel)
            size = length + _LOG_OVERHEAD
            if size < _HEADER_SIZE or position + size > stop:
                return None
            if base + last_delta >= offset:
                return base, position, size
            read_size = self._read_size = _HEADER_SIZE if size > SCAN_CHUNK else SCAN_CHUNK
            position += size
        else:
            return None
        for entry in self.entries(position, stop):
            if entry.last_offset >= offset:
                return entry.base_offset, entry.position, entry.size
        return None

    def first_at_or_after(
        self,
        position: int,
        stop: int,
        timestamp: int,
        starting_offset: int,
        *,
        holds_answer: bool = False,
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record from ``position`` whose timestamp is at
        least ``timestamp`` and offset at least ``starting_offset``, or None.

        Only the records of a batch whose max timestamp reaches the target are read.
        ``holds_answer`` says the batch at ``position`` likely reaches it (the time
        index has an entry at the target itself): its first read then takes as
        many bytes as the last batch walked had, header and records at once.
        """
        read = self._read
        chunk = b""
        chunk_start = position
        read_size = self._read_size
        first_read = max(self._batch_size, read_size) if holds_answer else read_size
        unpack = record_codec.TIME_FIELDS.unpack_from
        while position + _LOG_OVERHEAD <= stop:
            rel = position - chunk_start
            if rel + _HEADER_SIZE > len(chunk):
                chunk = read(position, min(first_read, stop - position))
                chunk_start, rel = position, 0
                first_read = read_size
            if rel + _HEADER_SIZE > len(chunk) or chunk[rel + _MAGIC_OFFSET] != 2:
                break
            base, length, _, attributes, last_delta, base_ts, max_timestamp, count = unpack(
                chunk, rel
            )
            size = length + _LOG_OVERHEAD
            if size < _HEADER_SIZE or position + size > stop:
                return None
            if max_timestamp >= timestamp and base + last_delta >= starting_offset:
                self._batch_size = size
                if attributes & batch.COMPRESSION_MASK or last_delta < 0 or count < 0:
                    found = record_codec.first_at_or_after(
                        chunk if rel + size <= len(chunk) else read(position, size),
                        timestamp,
                        starting_offset,
                        rel if rel + size <= len(chunk) else 0,
                    )
                else:
                    if rel + size <= len(chunk):
                        # The whole batch is in the chunk: its records are walked there.
                        records, start, end = chunk, rel + _HEADER_SIZE, rel + size
                    else:
                        # The header is read already: only the records, walked as they are.
                        records = read(position + _HEADER_SIZE, size - _HEADER_SIZE)
                        if len(records) < size - _HEADER_SIZE:
                            raise CorruptRecordError(
                                f"truncated record batch at position {position}: length {size}"
                            )
                        start, end = 0, len(records)
                    found = record_codec.first_in_records(
                        records,
                        start,
                        end,
                        count,
                        base,
                        attributes,
                        base_ts,
                        max_timestamp,
                        last_delta,
                        timestamp,
                        starting_offset,
                    )
                if found is not None:
                    return found
            read_size = self._read_size = _HEADER_SIZE if size > SCAN_CHUNK else SCAN_CHUNK
            position += size
        else:
            return None
        for entry in self.entries(position, stop):
            if entry.max_timestamp < timestamp or entry.last_offset < starting_offset:
                continue
            data = read(entry.position, entry.size)
            if entry.magic == batch.CURRENT_MAGIC:
                found = record_codec.first_at_or_after(data, timestamp, starting_offset)
                if found is not None:
                    return found
                continue
            for rec in record_codec.decode_entry(data):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return rec.offset, rec.timestamp
        return None

    def headers(self, start: int, stop: int) -> Iterator[batch.BatchHeader]:
        """The headers of the v2 batches from ``start``; legacy entries are skipped."""
        for info in self.entries(start, stop):
            if info.magic == 2:
                raw = self._read(info.position, _HEADER_SIZE)
                yield batch.BatchHeader._make(batch.HEADER.unpack(raw))

    def valid_chunks(
        self, start: int, stop: int, scan: ChunkScan | None = None
    ) -> Iterator[tuple[int, list[EntryInfo]]]:
        """The whole, valid entries from ``start``, every byte read and every CRC checked:
        (position of a chunk, its entries with positions relative to it), chunk by chunk.

        The file is read :data:`_VALID_CHUNK` bytes at a time into one reused
        buffer (a copy from the page cache costs less than faulting in a memory
        map page by page) and each chunk is scanned whole. An entry cut by the
        end of a chunk is read again from its start with the next chunk; the
        walk stops at the first entry that is not whole and valid, exactly where
        a scan of the whole file would. Recovery and the check of a tail use it.

        ``scan(chunk, chunk_position)`` checks a chunk in place of
        :func:`~seglog.records.log_entries.scan` (recovery indexes the entries
        as it checks them); the entries yielded are those it lists.
        """
        read_into = self._read_into
        buffer = bytearray(min(_VALID_CHUNK, max(stop - start, 0)))
        chunk_start = start
        while chunk_start < stop:
            wanted = min(len(buffer), stop - chunk_start)
            view = memoryview(buffer)
            try:
                length = read_into(view[:wanted], chunk_start)
                if scan is None:
                    result = log_entries.scan(view[:length], check_crc=True)
                else:
                    result = scan(view[:length], chunk_start)
            finally:
                view.release()
            yield chunk_start, result.entries
            at_end = length < wanted or chunk_start + length >= stop
            if result.error is None:
                if at_end:
                    return
                chunk_start += length
                continue
            # The scan stopped at an entry: a bad one, or one the chunk cut.
            if at_end:
                return  # what a scan of the whole file would find too
            if result.valid_end > 0:
                chunk_start += result.valid_end  # read the cut entry again, whole
                continue
            # The first entry of the chunk: retry only if the buffer was too small.
            try:
                _, needed = batch.peek_offset_and_size(buffer, 0)
            except CorruptRecordError:
                return
            if needed <= length or chunk_start + needed > stop:
                return
            buffer = bytearray(needed)

    def valid_end(self, start: int, stop: int) -> tuple[int, int | None]:
        """(end of the whole, valid entries from ``start``, the offset after them or None)."""
        position = start
        next_offset: int | None = None
        for chunk_start, entries in self.valid_chunks(start, stop):
            if entries:
                last = entries[-1]
                position = chunk_start + last.position + last.size
                next_offset = last.next_offset
        return position, next_offset

    def _copy_into(self, view: memoryview, position: int) -> int:
        data = self._read(position, len(view))
        view[: len(data)] = data
        return len(data)


class TailScan(NamedTuple):
    """What a walk to the end of a ``.log`` found: where its whole entries end, the
    offset after them (None when there was none), and the largest timestamp seen
    (with the last offset of its batch)."""

    position: int
    next_offset: int | None
    max_timestamp: int
    offset_of_max_timestamp: int


def scan_tail(
    entries: Iterable[EntryInfo],
    start: int,
    max_timestamp: int = batch.NO_TIMESTAMP,
    offset_of_max_timestamp: int = -1,
) -> TailScan:
    """Walk ``entries`` (from position ``start``) to their end: the tail of the ``.log``.

    ``max_timestamp`` and ``offset_of_max_timestamp`` are what is known before
    ``start`` (a time index's last entry).
    """
    position = start
    next_offset: int | None = None
    for entry in entries:
        position = entry.position + entry.size
        next_offset = entry.next_offset
        if entry.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max_timestamp = entry.max_timestamp, entry.last_offset
    return TailScan(position, next_offset, max_timestamp, offset_of_max_timestamp)


def read_entries(read: Read, position: int, stop: int, name: object) -> Iterator[EntryBytes]:
    """Each whole entry of a ``.log`` from ``position`` to ``stop``, with its bytes.

    Reads 1 MiB at a time (one whole entry when it is larger) and ends at an
    entry cut short by ``stop``. Raises CorruptRecordError, naming ``name``, at
    an entry whose size or header is impossible.
    """
    overhead = _LOG_OVERHEAD
    read_header = batch.read_header
    while position + overhead <= stop:
        chunk = read(position, min(_READ_CHUNK, stop - position))
        if len(chunk) < overhead:
            return
        first_size = _entry_size(chunk, 0, position, name)
        if first_size > len(chunk):
            if position + first_size > stop:
                return
            chunk = read(position, first_size)
            if len(chunk) < first_size:
                return
        view = memoryview(chunk)
        rel = 0
        while rel + overhead <= len(chunk):
            size = _entry_size(view, rel, position, name)
            if rel + size > len(chunk):
                break
            header = read_header(view, rel) if chunk[rel + _MAGIC_OFFSET] == 2 else None
            yield EntryBytes(view, rel, size, header)
            rel += size
        position += rel


def _entry_size(buf: bytes | memoryview, rel: int, chunk_position: int, name: object) -> int:
    try:
        return batch.peek_offset_and_size(buf, rel)[1]
    except CorruptRecordError as exc:
        raise CorruptRecordError(
            f"{name}: bad entry at position {chunk_position + rel}: {exc}"
        ) from None


class EntryBytes(NamedTuple):
    """A whole entry read from a ``.log``: the buffer that holds it and where.

    ``header`` is the parsed header of a v2 batch, None for a legacy
    (magic 0 or 1) message entry.
    """

    buffer: memoryview
    start: int
    size: int
    header: batch.BatchHeader | None

    @property
    def data(self) -> memoryview:
        """The entry's bytes alone."""
        return self.buffer[self.start : self.start + self.size]

    def describe(self) -> EntryInfo:
        """The entry's offsets and timestamps (position: ``start`` in ``buffer``)."""
        return log_entries.read_entry(self.buffer, self.start, check_crc=False)
