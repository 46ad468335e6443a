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

This module lists directories and opens segments and partitions
(:class:`SegmentReader`, :class:`PartitionReader`); its parts, re-exported
here so that importers name only this module, are the walks of a ``.log``
by its headers (:mod:`._batch_walk`), the indexes read into memory
(:mod:`._index_views`) and what a read_committed reader needs
(:mod:`._read_committed`).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Self

from seglog.errors import CorruptRecordError, SeglogError, StorageError
from seglog.records import batch, log_entries
from seglog.records.log_entries import EntryInfo, ScanResult
from seglog.storage import checkpoints, filenames
from seglog.storage._batch_walk import (
    SCAN_CHUNK,
    BatchWalk,
    EntryBytes,
    Located,
    TailScan,
    read_entries,
    scan_tail,
)
from seglog.storage._index_views import OffsetIndexView, TimeIndexView, read_whole
from seglog.storage._read_committed import (
    AbortedTransactions,
    last_stable_offset,
    open_transactions,
)

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
    "TailScan",
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

# seglog's own file of topic definitions (storage.topic_list.TOPICS_FILE, which
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


# ------------------------------------------------------------------- segments


class Tail(NamedTuple):
    """Where the whole entries of a ``.log`` end, and the offset that follows them."""

    position: int
    next_offset: int


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
            data = b"" if path is None else read_whole(path)
            self._offset_index = OffsetIndexView(self.base_offset, data)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndexView:
        """The segment's time index, read on first use (empty when missing)."""
        if self._time_index is None:
            path = self._index_path(filenames.TIME_INDEX_SUFFIX)
            data = b"" if path is None else read_whole(path)
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
