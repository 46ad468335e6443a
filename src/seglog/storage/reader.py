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

The live storage engine (:mod:`seglog.storage.segment`) still reads its own
files through its writable, memory-mapped indexes; it is to adopt this
reader for its read paths in a later step.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
import sys
from array import array
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Self

from seglog.errors import CorruptRecordError, SeglogError, StorageError
from seglog.records import batch, log_entries
from seglog.records import record as record_codec
from seglog.records.log_entries import EntryInfo, ScanResult
from seglog.storage import checkpoints, filenames

__all__ = [
    "EntryBytes",
    "OffsetIndexView",
    "PartitionReader",
    "SegmentReader",
    "Tail",
    "TimeIndexView",
    "TopicDefinition",
    "log_start_offsets",
    "partition_dirs",
    "segment_bases",
    "topic_definitions",
]

# How much a walk of batch headers reads at a time: the bodies of batches
# larger than this are skipped unread.
_HEADER_CHUNK = 64 * 1024
# How much a read of whole entries (for their records) reads at a time.
_READ_CHUNK = 1 << 20
_TIME_ENTRY = struct.Struct(">qi")
_OFFSET_ENTRY_SIZE = 8
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


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of a partition directory's segments, in order.

    Only ``<20 digits>.log`` files count: a segment being deleted, cleaned or
    swapped carries a suffix after ``.log``. Raises FileNotFoundError when the
    directory does not exist.
    """
    bases = []
    for name in os.listdir(directory):
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
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


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
        walk = log_entries.walk(self.read, start, self.size, _HEADER_CHUNK)
        try:
            yield from walk
        except CorruptRecordError:
            return  # not an entry: the whole entries end here

    def locate(self, offset: int) -> EntryInfo | None:
        """The first whole entry whose last offset is at least ``offset``, or None."""
        for entry in self.entries(self.position_for(offset)):
            if entry.last_offset >= offset:
                return entry
        return None

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
            last = deque(self.entries(start), maxlen=1)
            if last:
                return Tail(last[0].position + last[0].size, last[0].next_offset)
            if start == 0:
                return Tail(0, self.base_offset)
            start = 0  # the indexed batch is cut: nothing after it is whole either

    def read_entries(self, position: int = 0) -> Iterator[EntryBytes]:
        """Each whole entry from ``position`` on, with its bytes, for decoding its records.

        Reads 1 MiB at a time (one whole entry when it is larger) and ends at
        an entry cut short by the end of the file. Raises CorruptRecordError
        at an entry whose size or header is impossible.
        """
        stop = self.size
        overhead = batch.LOG_OVERHEAD
        read_header = batch.read_header
        while position + overhead <= stop:
            chunk = self.read(position, min(_READ_CHUNK, stop - position))
            if len(chunk) < overhead:
                return
            first_size = self._entry_size(chunk, 0, position)
            if first_size > len(chunk):
                if position + first_size > stop:
                    return
                chunk = self.read(position, first_size)
                if len(chunk) < first_size:
                    return
            view = memoryview(chunk)
            rel = 0
            while rel + overhead <= len(chunk):
                size = self._entry_size(view, rel, position)
                if rel + size > len(chunk):
                    break
                header = read_header(view, rel) if chunk[rel + batch.MAGIC_OFFSET] == 2 else None
                yield EntryBytes(view, rel, size, header)
                rel += size
            position += rel

    def _entry_size(self, buf: bytes | memoryview, rel: int, chunk_position: int) -> int:
        try:
            return batch.peek_offset_and_size(buf, rel)[1]
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"{self.path}: bad entry at position {chunk_position + rel}: {exc}"
            ) from None

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
        for entry in self.entries(start):
            if entry.max_timestamp < timestamp or entry.last_offset < starting_offset:
                continue
            data = self.read(entry.position, entry.size)
            if entry.magic == batch.CURRENT_MAGIC:
                found = record_codec.first_at_or_after(data, timestamp, starting_offset)
                if found is not None:
                    return found
                continue
            for rec in record_codec.decode_entry(data):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return rec.offset, rec.timestamp
        return None


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
