"""Kafka's files, read-only: the one place that knows how a log directory is laid out.

Everything that reads a log directory without owning it goes through here:
Spark's files mode, ``seglog dump-log``, ``seglog verify`` and the checker
storage tests run at teardown. The directory may belong to a running broker
(seglog's or Kafka's), so nothing here writes, locks or keeps a file mapped:
a ``.log`` is opened ``O_RDONLY`` and read with ``pread``, an index is read
into memory whole (a broker preallocates, trims and replaces its indexes, and
a map of a file the broker truncates would fault). What a reader sees is
consistent because Kafka's files only grow at the end or disappear whole.

Layout (names from :mod:`seglog.storage.filenames`)::

    log-dir        := partition-dir* checkpoint-file*
    partition-dir  := segment*                        "<topic>-<partition>"
    segment        := ".log" [".index"] [".timeindex"]   named by the base offset
    .log           := entry* [cut-entry]             entries of any magic, back to back
    .index         := (relative-offset:int32 position:int32)* zero-entry*
    .timeindex     := (timestamp:int64 relative-offset:int32)* zero-entry*

* The segments of a partition are its ``<20 digits>.log`` files; files with
  a transient suffix (``.deleted``, ``.cleaned``, ``.swap``) are not part of
  the log. Segment *i* holds offsets from its base up to the next one's base.
* Zero entries at the end of an index are the room a broker preallocates in
  the active segment's indexes; they are not entries.
* The *tail* of a ``.log`` is the end of its last whole entry: a batch cut
  short (being written, or left by a crash) is not part of the log, and
  neither is anything after it. :meth:`SegmentReader.tail` finds it by
  walking batch headers from the last offset-index entry, so its cost is
  bounded by ``index.interval.bytes``, not by the file size.
* A lookup by offset binary-searches the offset index for the greatest entry
  not above the target and walks batch headers from its position; a lookup
  by time does the same through the time index first, then reads only the
  timestamps of the records of the batch that holds the answer.

Records are never decoded here: entries are described by
:mod:`seglog.records.log_entries` and decoded by :mod:`seglog.records.record`.

The live storage engine reads Kafka's format through this module too: its
segments (:mod:`seglog.storage.segment`) walk their ``.log`` with
:class:`BatchWalk` over their own reads (offset and time lookups, the tail,
the CRC-checked walk that recovery rebuilds indexes from), recovery and the
log directory list segments and partitions with :func:`segment_bases` and
:func:`partition_dirs`, and the cleaner reads whole entries with
:func:`read_entries`. Only the engine's indexes differ:
they are memory-mapped and writable (:mod:`seglog.storage.offset_index`,
:mod:`seglog.storage.time_index`, whose entry layouts this module reads).
So a change of the format (a new kind of batch, a new file) is made here.
"""

from __future__ import annotations

import bisect
import errno
import json
import mmap
import os
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Self

from seglog.errors import CorruptRecordError, SeglogError, StorageError
from seglog.records import batch, log_entries
from seglog.records import record as record_codec
from seglog.records.log_entries import EntryInfo, ScanResult
from seglog.storage import checkpoints, filenames, producer_state, txn_index
from seglog.storage.offset_index import ENTRY_SIZE as _OFFSET_ENTRY_SIZE
from seglog.storage.time_index import ENTRY as _TIME_ENTRY

__all__ = [
    "SCAN_CHUNK",
    "AbortedTransactions",
    "BatchWalk",
    "EntryBytes",
    "Located",
    "OffsetIndexView",
    "PartitionReader",
    "SegmentReader",
    "Tail",
    "TimeIndexView",
    "TopicDefinition",
    "last_stable_offset",
    "log_start_offsets",
    "open_transactions",
    "partition_dirs",
    "read_entries",
    "scan_tail",
    "segment_bases",
    "topic_definitions",
]

# How much a read of whole entries (for their records) reads at a time.
_READ_CHUNK = 1 << 20
_LITTLE_ENDIAN = sys.byteorder == "little"
# seglog's own file of topic definitions (storage.log_dir.TOPICS_FILE, which
# this read-only module cannot import without the writable engine).
_TOPICS_FILE = "seglog-topics.json"


# ---------------------------------------------------------------- directories


def partition_dirs(root: Path) -> dict[tuple[str, int], Path]:
    """The live partition directories of a log directory, by (topic, partition)."""
    out: dict[tuple[str, int], Path] = {}
    for child in root.iterdir():
        parsed = filenames.parse_partition_dir(child.name)
        if parsed is not None and child.is_dir():
            out[parsed] = child
    return out


def segment_bases(directory: Path, names: Iterable[str] | None = None) -> list[int]:
    """The base offsets of a partition directory's segments, in order.

    Only ``<20 digits>.log`` files count: a segment being deleted, cleaned or
    swapped carries a suffix after ``.log``. ``names`` are the directory's
    entries when the caller has listed it (the live engine lists through its
    environment); otherwise it is listed here, and FileNotFoundError raised
    when it does not exist.
    """
    bases = []
    for name in os.listdir(directory) if names is None else names:
        if name.endswith(filenames.LOG_SUFFIX):
            base = filenames.parse_base_offset(name)
            if base is not None:
                bases.append(base)
    bases.sort()
    return bases


def log_start_offsets(root: Path) -> dict[tuple[str, int], int]:
    """The ``log-start-offset-checkpoint`` of a log directory; empty when it cannot be read.

    A reader that does not own the directory may find the file being replaced,
    or damaged: the segments' base offsets are then the best it knows.
    """
    try:
        return checkpoints.read_offset_checkpoint(root / checkpoints.LOG_START_OFFSET_CHECKPOINT)
    except (OSError, SeglogError, ValueError):
        return {}


class TopicDefinition(NamedTuple):
    """A topic as seglog's ``seglog-topics.json`` defines it: partition count and overrides."""

    partitions: int
    configs: dict[str, str]


def topic_definitions(root: Path) -> dict[str, TopicDefinition]:
    """The topics of seglog's ``seglog-topics.json`` (written by ``storage.log_dir``).

    Empty when the file is absent (a log directory written by Kafka keeps its
    topic definitions in its metadata log) or cannot be read.
    """
    try:
        raw = json.loads((root / _TOPICS_FILE).read_text(encoding="utf-8"))
        return {
            str(name): TopicDefinition(
                int(spec["partitions"]), {str(k): str(v) for k, v in spec["configs"].items()}
            )
            for name, spec in raw["topics"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


# -------------------------------------------------------------------- indexes


def _read_whole(path: Path) -> bytes:
    """The file's bytes up to the end of its last written extent.

    An active segment's index is preallocated at full length (10 MiB by
    default) and sparse: reading its holes would copy megabytes of zeros that
    :func:`_used_entries` then strips. Only what lies before the end of the last
    data extent is read (holes before it read as zeros, as they are).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        end = _data_end(fd, os.fstat(fd).st_size)
        chunks = []
        done = 0
        while done < end:
            chunk = os.pread(fd, end - done, done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _data_end(fd: int, size: int) -> int:
    """Where the file's last data extent ends (``size`` where holes cannot be asked about)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return size
    end = position = 0
    while position < size:
        try:
            start = os.lseek(fd, position, seek_data)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after position
                break
            return size  # the file system cannot tell
        position = os.lseek(fd, start, seek_hole)
        end = position
    return min(end, size)


def _used_entries(data: bytes, entry_size: int) -> bytes:
    """``data`` without the zero entries a broker preallocates after an index's entries
    (and without a partial entry at the end, which no writer leaves)."""
    used = len(data.rstrip(b"\0"))
    used += -used % entry_size
    whole = len(data) - len(data) % entry_size
    return data[: min(used, whole)]


class OffsetIndexView:
    """A segment's ``.index`` read into memory: (offset → position) entries, read-only."""

    __slots__ = ("_positions", "_relative", "base_offset")

    def __init__(self, base_offset: int, data: bytes) -> None:
        self.base_offset = base_offset
        values = array("i")
        values.frombytes(_used_entries(data, _OFFSET_ENTRY_SIZE))
        if _LITTLE_ENDIAN:  # the file is big-endian
            values.byteswap()
        self._relative = values[0::2]
        self._positions = values[1::2]

    @classmethod
    def load(cls, path: Path, base_offset: int) -> OffsetIndexView:
        """The index at ``path``; an empty one when the file does not exist."""
        return cls(base_offset, _read_whole(path))

    def __len__(self) -> int:
        return len(self._relative)

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (absolute offset, position)."""
        return self.base_offset + self._relative[n], self._positions[n]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        base = self.base_offset
        for relative, position in zip(self._relative, self._positions, strict=True):
            yield base + relative, position

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when the index is empty."""
        return self.base_offset + (self._relative[-1] if self._relative else 0)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry whose offset is at most ``offset``;
        ``(base_offset, 0)`` when there is none."""
        slot = bisect.bisect_right(self._relative, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)


class TimeIndexView:
    """A segment's ``.timeindex`` read into memory: (timestamp → offset) entries, read-only.

    An entry (T, O) says that T is the largest timestamp of the records up to
    and including offset O.
    """

    __slots__ = ("_offsets", "_timestamps", "base_offset")

    def __init__(self, base_offset: int, data: bytes) -> None:
        self.base_offset = base_offset
        entries = list(_TIME_ENTRY.iter_unpack(_used_entries(data, _TIME_ENTRY.size)))
        self._timestamps = [ts for ts, _ in entries]
        self._offsets = [base_offset + relative for _, relative in entries]

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndexView:
        """The index at ``path``; an empty one when the file does not exist."""
        return cls(base_offset, _read_whole(path))

    def __len__(self) -> int:
        return len(self._timestamps)

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (timestamp, absolute offset)."""
        return self._timestamps[n], self._offsets[n]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._timestamps, self._offsets, strict=True)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """The last (timestamp, offset), or None when the index is empty."""
        return (self._timestamps[-1], self._offsets[-1]) if self._timestamps else None

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry whose timestamp is at most
        ``timestamp``; ``(NO_TIMESTAMP, base_offset)`` when there is none."""
        slot = bisect.bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return batch.NO_TIMESTAMP, self.base_offset
        return self.entry(slot)


# --------------------------------------------------------------- batch walks

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


# ------------------------------------------------------------------- segments


class Tail(NamedTuple):
    """Where the whole entries of a ``.log`` end, and the offset that follows them."""

    position: int
    next_offset: int


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


class SegmentReader:
    """One segment's ``.log`` (opened read-only) and, on demand, its indexes.

    ``size`` is the file's size when it was opened: a broker appending to the
    active segment meanwhile adds nothing to what this reader sees.
    """

    def __init__(self, log_path: Path, base_offset: int) -> None:
        self.path = Path(log_path)
        self.base_offset = base_offset
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self.size = os.fstat(self._fd).st_size
        except OSError:
            os.close(self._fd)
            raise
        self._offset_index: OffsetIndexView | None = None
        self._time_index: TimeIndexView | None = None
        self._walk = BatchWalk(self.read)

    @classmethod
    def open(cls, directory: Path, base_offset: int) -> SegmentReader:
        """The live segment ``<base_offset>.log`` of a partition directory.

        Raises FileNotFoundError when it does not exist (retention may have
        removed it since the directory was listed).
        """
        return cls(filenames.log_path(directory, base_offset), base_offset)

    def close(self) -> None:
        """Close the ``.log``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer only at the end of the file)."""
        try:
            return os.pread(self._fd, length, position)
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror}") from exc

    # ------------------------------------------------------------- indexes

    def _index_path(self, kind: str) -> Path | None:
        """The sibling file of kind ``kind`` (with the ``.log``'s transient suffix, if any)."""
        stem = filenames.offset_name(self.base_offset) + filenames.LOG_SUFFIX
        name = self.path.name
        if not name.startswith(stem):
            return None  # not named after its base offset: no index can be found
        suffix = name[len(stem) :]
        return self.path.with_name(filenames.offset_name(self.base_offset) + kind + suffix)

    @property
    def offset_index(self) -> OffsetIndexView:
        """The segment's offset index, read on first use (empty when missing)."""
        if self._offset_index is None:
            path = self._index_path(filenames.INDEX_SUFFIX)
            data = b"" if path is None else _read_whole(path)
            self._offset_index = OffsetIndexView(self.base_offset, data)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndexView:
        """The segment's time index, read on first use (empty when missing)."""
        if self._time_index is None:
            path = self._index_path(filenames.TIME_INDEX_SUFFIX)
            data = b"" if path is None else _read_whole(path)
            self._time_index = TimeIndexView(self.base_offset, data)
        return self._time_index

    def position_for(self, offset: int) -> int:
        """An entry boundary at or before the entry holding ``offset`` (offset index lookup).

        An entry pointing past the end of the file (an index longer than its
        ``.log``) is not trusted: the walk then starts at the beginning.
        """
        _, position = self.offset_index.lookup(offset)
        return position if 0 <= position < self.size else 0

    # ------------------------------------------------------------- walking

    def entries(self, start: int = 0) -> Iterator[EntryInfo]:
        """Each whole entry from ``start`` (an entry boundary) on, headers only, no CRC check.

        Ends at the first entry that is cut short by the end of the file or
        whose header is not readable.
        """
        try:
            yield from self._walk.entries(start, self.size)
        except CorruptRecordError:
            return  # not an entry: the whole entries end here

    def locate(self, offset: int) -> Located | None:
        """The first whole entry whose last offset is at least ``offset``, or None."""
        try:
            found = self._walk.locate(self.position_for(offset), self.size, offset)
        except CorruptRecordError:
            return None  # not an entry: the whole entries end before it
        return None if found is None else Located(*found)

    def tail(self) -> Tail:
        """Where the whole entries end (no CRC check), and the offset after them.

        Walks from the last offset-index entry inside the file; when that
        entry's batch is itself cut short, from the beginning.
        """
        index = self.offset_index
        start = 0
        for n in range(len(index) - 1, -1, -1):
            position = index.entry(n)[1]
            if 0 <= position < self.size:
                start = position
                break
        while True:
            found = scan_tail(self.entries(start), start)
            if found.next_offset is not None:
                return Tail(found.position, found.next_offset)
            if start == 0:
                return Tail(0, self.base_offset)
            start = 0  # the indexed batch is cut: nothing after it is whole either

    def read_entries(self, position: int = 0) -> Iterator[EntryBytes]:
        """Each whole entry from ``position`` on, with its bytes, for decoding its records.

        See :func:`read_entries`: 1 MiB at a time, ending at an entry cut short
        by the end of the file; CorruptRecordError at an impossible entry.
        """
        return read_entries(self.read, position, self.size, self.path)

    def scan(self, *, check_crc: bool = True) -> ScanResult:
        """Every entry from the start, each checked (CRC too with ``check_crc``), up to the
        first that is not whole and valid; positions are absolute.

        The file is mapped read-only for the scan alone: reading a whole
        segment is what this is for, and the page cache then serves it
        without a copy.
        """
        if self.size == 0:
            return ScanResult([], 0, None)
        with mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return log_entries.scan(view, 0, self.size, check_crc=check_crc)
            finally:
                view.release()

    # ---------------------------------------------------------------- time

    def largest_timestamp(self, *, is_last: bool) -> int:
        """The segment's largest timestamp: its time index's last entry, and for the last
        segment (whose index may lag its active writes) the batches after it."""
        last = self.time_index.last_entry
        if last is not None and not is_last:
            return last[0]
        largest = batch.NO_TIMESTAMP if last is None else last[0]
        start = 0 if last is None else self.position_for(last[1])
        for entry in self.entries(start):
            largest = max(largest, entry.max_timestamp)
        return largest

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is at least ``timestamp``
        and offset at least ``starting_offset``; None when this segment has none."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        start = self.position_for(max(indexed_offset, starting_offset))
        try:
            return self._walk.first_at_or_after(start, self.size, timestamp, starting_offset)
        except CorruptRecordError:
            return None  # not an entry: the whole entries end before it


# ------------------------------------------------------------------ partitions


class PartitionReader:
    """The segments of one partition directory, as listed when the reader was made."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.bases = segment_bases(self.directory)

    def open_segment(self, base_offset: int) -> SegmentReader:
        """The segment at ``base_offset``; FileNotFoundError when it has gone since."""
        return SegmentReader.open(self.directory, base_offset)

    def segments_between(self, start: int, until: int) -> Iterator[int]:
        """The base offsets of the segments that may hold offsets in ``[start, until)``."""
        bases = self.bases
        for i, base in enumerate(bases):
            if base >= until:
                return
            if i + 1 < len(bases) and bases[i + 1] <= start:
                continue
            yield base

    def next_offset(self) -> int:
        """The offset after the last whole entry of the partition (its log end offset).

        That is the tail of the last segment; an empty last segment ends at its
        base offset. 0 when the partition has no segment.
        """
        for base in reversed(self.bases):
            try:
                segment = self.open_segment(base)
            except FileNotFoundError:
                continue
            with segment:
                return segment.tail().next_offset
        return 0

    def offset_for_time(self, timestamp: int, floor: int = 0) -> int | None:
        """The first offset at or above ``floor`` whose record timestamp is at least
        ``timestamp``, or None.

        Segments wholly below ``floor`` and those whose largest timestamp is
        below the target are skipped; only the segment holding the answer is
        opened and walked (and any sealed one whose time index is empty).
        """
        bases = self.bases
        for i, base in enumerate(bases):
            if i + 1 < len(bases) and bases[i + 1] <= floor:
                continue
            is_last = i == len(bases) - 1
            # A sealed segment's time index ends with its largest timestamp: a
            # segment below the target is passed over without opening its .log.
            time_index = TimeIndexView.load(filenames.time_index_path(self.directory, base), base)
            last = time_index.last_entry
            if not is_last and last is not None and last[0] < timestamp:
                continue
            try:
                segment = self.open_segment(base)
            except FileNotFoundError:
                continue
            with segment:
                segment._time_index = time_index
                if segment.largest_timestamp(is_last=is_last) < timestamp:
                    continue
                found = segment.find_offset_by_timestamp(timestamp, floor)
                if found is not None:
                    return found[0]
        return None


# ---------------------------------------------------------------- transactions
# What a read_committed reader of the files needs (seglog.topic_source.files,
# under Spark's files mode and the mirror): where the undecided part of a
# partition begins, and which batches belong to aborted transactions.


class AbortedTransactions:
    """The aborted transactions of a partition from ``start`` on (its ``.txnindex`` files)."""

    def __init__(self, part: PartitionReader, start: int) -> None:
        self._spans: dict[int, list[tuple[int, int]]] = {}
        for base in part.segments_between(start, 2**63 - 1):
            path = part.directory / f"{filenames.offset_name(base)}{filenames.TXN_INDEX_SUFFIX}"
            try:
                entries = txn_index.read(path)
            except SeglogError:
                continue
            for entry in entries:
                if entry.last_offset >= start:
                    self._spans.setdefault(entry.producer_id, []).append(
                        (entry.first_offset, entry.last_offset)
                    )

    def holds(self, header: batch.BatchHeader) -> bool:
        """True for a data batch of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        spans = self._spans.get(header.producer_id)
        return spans is not None and any(
            first <= header.base_offset <= last for first, last in spans
        )


def open_transactions(part: PartitionReader, latest: int) -> dict[int, int]:
    """The transactions with no marker below ``latest``: producer id → first offset.

    Those of the newest producer snapshot at or below ``latest``, then updated
    by the batch headers after it (a marker ends its producer's transaction, a
    transactional batch opens one).
    """
    open_txns: dict[int, int] = {}
    since = part.bases[0] if part.bases else 0
    snapshots = sorted(
        offset
        for name in os.listdir(part.directory)
        if name.endswith(filenames.SNAPSHOT_SUFFIX)
        and (offset := filenames.parse_base_offset(name)) is not None
        and offset <= latest
    )
    for offset in reversed(snapshots):
        try:
            entries = producer_state.read_snapshot(filenames.snapshot_path(part.directory, offset))
        except (SeglogError, FileNotFoundError):
            continue
        open_txns = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset >= 0
        }
        since = max(offset, since)
        break
    for base in part.segments_between(since, latest):
        try:
            segment = part.open_segment(base)
        except FileNotFoundError:
            continue
        with segment:
            position = segment.position_for(since) if base <= since else 0
            for entry in segment.read_entries(position):
                header = entry.header
                if header is None or header.last_offset < since:
                    continue
                if header.base_offset >= latest:
                    break
                if header.is_control:
                    open_txns.pop(header.producer_id, None)
                elif header.is_transactional:
                    open_txns.setdefault(header.producer_id, header.base_offset)
    return open_txns


def last_stable_offset(part: PartitionReader, latest: int) -> int:
    """The first offset of the oldest transaction with no marker yet, else ``latest``."""
    return min(open_transactions(part, latest).values(), default=latest)
