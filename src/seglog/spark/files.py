"""Files mode: a log directory's segments read straight from disk, read-only.

The directory may belong to a running broker (seglog's or Kafka's), so
nothing here writes, locks or memory-maps: the ``.log`` files are opened
``O_RDONLY`` and read with ``pread``, the indexes are read into memory whole
(a running broker preallocates, trims and replaces them; a map of a file the
broker truncates would fault). What a reader sees is consistent because
Kafka's files only grow at the end or disappear whole:

* the segments of a partition are the ``<20 digits>.log`` files of its
  directory (``.deleted``/``.cleaned``/``.swap`` ones are ignored); segment
  *i* holds offsets from its base up to the next segment's base;
* a batch cut short at the end of the active segment is not yet written and
  ends the read;
* a segment that vanishes while we look (retention) is data loss, handled by
  ``failOnDataLoss`` as in network mode.

Bounds are applied through the indexes so that untouched segments are never
opened: a range ``[from, until)`` opens only the segments whose base offsets
say they overlap it, and starts inside the first one at the position the
offset index gives; a lookup by time takes the segments' largest timestamps
from the last entries of their time indexes (as Kafka does) and scans only
the segment that holds the answer, from the position the time index gives.

Earliest offset: the first segment's base, or the ``log-start-offset-checkpoint``
entry when larger (after DeleteRecords). Latest: the offset after the last
whole batch of the last segment, found by scanning from its last index entry.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]

from seglog.errors import CorruptRecordError
from seglog.records import batch, log_entries
from seglog.records import record as record_codec
from seglog.spark.arrow import NO_TIMESTAMP_TYPE, ColumnBuilder
from seglog.spark.offsets import OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import Strategy, select_partitions
from seglog.spark.transport import BATCH_ROWS, Transport, data_loss
from seglog.storage import checkpoints, filenames

__all__ = ["FilesTransport", "SegmentFile"]

_LOG_FILE = re.compile(r"([0-9]{20})\.log")
_READ_CHUNK = 1 << 20
_HEADER_CHUNK = 64 * 1024
_TIME_ENTRY = struct.Struct(">qi")
_LEGACY_ATTRIBUTES = 17  # offset int64, size int32, crc int32, magic int8, attributes int8
_LEGACY_TIMESTAMP_TYPE = 0x08


def _read_file(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _trim_entries(data: bytes, entry_size: int) -> bytes:
    """Drop the zero-filled room a broker preallocates after an active index's entries."""
    used = len(data.rstrip(b"\0"))
    used += -used % entry_size
    return data[:used]


class SegmentFile:
    """One segment's ``.log`` (opened read-only) and, on demand, its indexes."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = filenames.log_path(directory, base_offset)
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size
        self._offsets: array[int] | None = None
        self._positions: array[int] | None = None

    def close(self) -> None:
        """Close the ``.log``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def pread(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position``."""
        return os.pread(self._fd, length, position)

    # ------------------------------------------------------------- indexes

    def _load_offset_index(self) -> tuple[array[int], array[int]]:
        if self._offsets is None or self._positions is None:
            raw = _read_file(filenames.index_path(self.directory, self.base_offset)) or b""
            values = array("i")
            values.frombytes(_trim_entries(raw, 8))
            if array("i", [1]).tobytes()[0] == 1:  # little-endian host: the file is big-endian
                values.byteswap()
            self._offsets, self._positions = values[0::2], values[1::2]
        return self._offsets, self._positions

    def position_for(self, offset: int) -> int:
        """A batch boundary at or before the batch holding ``offset`` (offset index lookup)."""
        offsets, positions = self._load_offset_index()
        slot = bisect.bisect_right(offsets, offset - self.base_offset) - 1
        if slot < 0:
            return 0
        position = positions[slot]
        return position if 0 <= position < self.size else 0

    def time_entries(self) -> list[tuple[int, int]]:
        """The time index as (timestamp, absolute offset) entries."""
        raw = _read_file(filenames.time_index_path(self.directory, self.base_offset)) or b""
        return [
            (ts, self.base_offset + rel)
            for ts, rel in _TIME_ENTRY.iter_unpack(_trim_entries(raw, _TIME_ENTRY.size))
        ]

    # ------------------------------------------------------------- entries

    def entries(self, start: int = 0) -> Iterator[log_entries.EntryInfo]:
        """Each whole entry from ``start``: headers only (see :func:`log_entries.walk`)."""
        return log_entries.walk(self.pread, start, self.size, _HEADER_CHUNK)

    def next_offset(self) -> int:
        """The offset after the last whole entry, or the base offset when there is none."""
        offsets, positions = self._load_offset_index()
        start = positions[-1] if len(positions) and 0 <= positions[-1] < self.size else 0
        next_offset = self.base_offset
        for entry in self.entries(start):
            next_offset = entry.last_offset + 1
        if next_offset == self.base_offset and start > 0:
            next_offset = self.base_offset + offsets[-1] + 1
        return next_offset

    def largest_timestamp(self, is_last: bool) -> int:
        """The segment's largest timestamp: its time index's last entry, scanned if needed."""
        entries = self.time_entries()
        if entries and not is_last:
            return entries[-1][0]
        start = self.position_for(entries[-1][1]) if entries else 0
        largest = entries[-1][0] if entries else batch.NO_TIMESTAMP
        for entry in self.entries(start):
            largest = max(largest, entry.max_timestamp)
        return largest

    def find_offset_by_timestamp(self, timestamp: int) -> int | None:
        """The first offset of this segment whose record timestamp is at least ``timestamp``."""
        entries = self.time_entries()
        slot = bisect.bisect_right([e[0] for e in entries], timestamp) - 1
        start = self.position_for(entries[slot][1]) if slot >= 0 else 0
        for position, size, magic, _, _, max_ts, _ in self.entries(start):
            if max_ts < timestamp:
                continue
            data = self.pread(position, size)
            if magic == batch.CURRENT_MAGIC:
                found = record_codec.first_at_or_after(data, timestamp, 0)
                if found is not None:
                    return found[0]
                continue
            for rec in record_codec.decode_entry(data):
                if rec.timestamp >= timestamp:
                    return rec.offset
        return None


class FilesTransport(Transport):
    """Offsets and records of the partitions of one log directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path)
        if not self.root.is_dir():
            raise FileNotFoundError(f"{self.root} is not a log directory")

    # ------------------------------------------------------------ layout

    def _partition_dirs(self) -> dict[TopicPartition, Path]:
        out = {}
        for child in self.root.iterdir():
            parsed = filenames.parse_partition_dir(child.name)
            if parsed is not None and child.is_dir():
                out[TopicPartition(*parsed)] = child
        return out

    def _dir(self, tp: TopicPartition) -> Path:
        return self.root / filenames.partition_dir_name(tp.topic, tp.partition)

    def _bases(self, tp: TopicPartition) -> list[int]:
        directory = self._dir(tp)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            raise ValueError(f"{tp} is not a partition of {self.root}") from None
        return sorted(int(m.group(1)) for n in names if (m := _LOG_FILE.fullmatch(n)))

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions of the directory that ``strategy`` covers."""
        return select_partitions(strategy, list(self._partition_dirs()))

    # ----------------------------------------------------------- offsets

    def _log_start_checkpoint(self) -> dict[tuple[str, int], int]:
        try:
            return checkpoints.read_offset_checkpoint(
                self.root / checkpoints.LOG_START_OFFSET_CHECKPOINT
            )
        except Exception:  # a checkpoint being replaced or damaged: fall back to the segments
            return {}

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The first segment's base offset, raised to the log start checkpoint."""
        starts = self._log_start_checkpoint()
        out: PartitionOffsets = {}
        for tp in tps:
            bases = self._bases(tp)
            first = bases[0] if bases else 0
            latest = self._latest(tp, bases)
            out[tp] = min(max(first, starts.get((tp.topic, tp.partition), 0)), latest)
        return out

    def _latest(self, tp: TopicPartition, bases: list[int]) -> int:
        for base in reversed(bases):
            try:
                segment = SegmentFile(self._dir(tp), base)
            except FileNotFoundError:
                continue
            try:
                return segment.next_offset()
            finally:
                segment.close()
        return 0

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The offset after the last whole batch of each partition."""
        return {tp: self._latest(tp, self._bases(tp)) for tp in tps}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Lookups by time through the time indexes; only the segment holding the answer is
        scanned."""
        out: dict[TopicPartition, int | None] = {}
        for tp, timestamp in timestamps.items():
            out[tp] = self._offset_for_time(tp, timestamp)
        return out

    def _offset_for_time(self, tp: TopicPartition, timestamp: int) -> int | None:
        bases = self._bases(tp)
        floor = self.earliest_offsets([tp])[tp]
        for i, base in enumerate(bases):
            if i + 1 < len(bases) and bases[i + 1] <= floor:
                continue  # wholly below the log start offset
            try:
                segment = SegmentFile(self._dir(tp), base)
            except FileNotFoundError:
                continue
            try:
                if segment.largest_timestamp(is_last=i == len(bases) - 1) < timestamp:
                    continue
                found = segment.find_offset_by_timestamp(timestamp)
                if found is not None:
                    return max(found, floor)
            finally:
                segment.close()
        return None

    # ----------------------------------------------------------- records

    def read(
        self, rng: OffsetRange, include_headers: bool, fail_on_data_loss: bool
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``rng``, read segment by segment from the offset index's position."""
        tp = rng.topic_partition
        start, until = rng.from_offset, rng.until_offset
        earliest = self.earliest_offsets([tp])[tp]
        latest = self.latest_offsets([tp])[tp]
        if start < earliest:
            data_loss(
                f"Cannot fetch offset {start} of {tp}: the earliest available offset is {earliest}",
                fail_on_data_loss,
            )
            start = earliest
        if until > latest:
            data_loss(
                f"Cannot fetch offsets up to {until} of {tp}: the latest available offset is "
                f"{latest}",
                fail_on_data_loss,
            )
            until = latest
        if start >= until:
            return
        builder = ColumnBuilder(tp.topic, tp.partition, include_headers)
        bases = self._bases(tp)
        for i, base in enumerate(bases):
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            if base >= until:
                break
            if next_base is not None and next_base <= start:
                continue
            try:
                segment = SegmentFile(self._dir(tp), base)
            except FileNotFoundError:
                data_loss(
                    f"Segment {base} of {tp} was deleted while it was read", fail_on_data_loss
                )
                continue
            try:
                position = segment.position_for(start) if base <= start else 0
                yield from _read_segment(segment, position, start, until, builder)
            finally:
                segment.close()
        if len(builder):
            yield builder.build()


def _read_segment(
    segment: SegmentFile, position: int, start: int, until: int, builder: ColumnBuilder
) -> Iterator[pa.RecordBatch]:
    """Add the records of ``[start, until)`` found from ``position`` on; yield full batches.

    Reads 1 MiB at a time (or one whole entry when it is larger) and stops at
    the first entry past ``until`` or at a batch cut short by the end of the file.
    """
    stop = segment.size
    read_header = batch.read_header
    overhead = batch.LOG_OVERHEAD
    while position + overhead <= stop:
        chunk = segment.pread(position, min(_READ_CHUNK, stop - position))
        if len(chunk) < overhead:
            return
        _, first_size = batch.peek_offset_and_size(chunk, 0)
        if first_size < overhead:
            raise CorruptRecordError(f"bad entry size {first_size} at {position} of {segment.path}")
        if first_size > len(chunk):
            if position + first_size > stop:
                return
            chunk = segment.pread(position, first_size)
            if len(chunk) < first_size:
                return
        view = memoryview(chunk)
        rel = 0
        while rel + overhead <= len(chunk):
            _, size = batch.peek_offset_and_size(view, rel)
            if size < overhead:
                raise CorruptRecordError(
                    f"bad entry size {size} at {position + rel} of {segment.path}"
                )
            if rel + size > len(chunk):
                break
            if chunk[rel + batch.MAGIC_OFFSET] == batch.CURRENT_MAGIC:
                header = read_header(view, rel)
                if header.base_offset >= until:
                    return
                if header.last_offset >= start:
                    builder.add_v2_batch(view, rel, header, start, until)
            else:
                entry = view[rel : rel + size]
                records = record_codec.decode_entry(entry)
                if records and records[0].offset >= until:
                    return
                builder.add_records(records, _legacy_timestamp_type(entry), start, until)
            rel += size
            if len(builder) >= BATCH_ROWS:
                yield builder.build()
        position += rel


def _legacy_timestamp_type(entry: memoryview) -> int:
    """Kafka's timestamp type of a magic 0/1 entry: none for v0, else its attribute bit."""
    if entry[batch.MAGIC_OFFSET] == 0:
        return NO_TIMESTAMP_TYPE
    return 1 if entry[_LEGACY_ATTRIBUTES] & _LEGACY_TIMESTAMP_TYPE else 0
