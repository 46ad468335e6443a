"""Files mode: a log directory's segments read straight from disk, read-only.

The directory may belong to a running broker (seglog's or Kafka's); every
file is read through :mod:`seglog.storage.reader`, which never writes, locks
or keeps a file mapped, and which defines what a reader sees: the segments of
a partition, the tail of its last segment (a batch cut short at the end of
the active segment is not yet written and ends the read), lookups by offset
and by time. A segment that vanishes while we look (retention) is data loss,
handled by ``failOnDataLoss`` as in network mode.

Bounds are applied through the indexes so that untouched segments are never
opened: a range ``[from, until)`` opens only the segments whose base offsets
say they overlap it, and starts inside the first one at the position the
offset index gives; a lookup by time takes the segments' largest timestamps
from the last entries of their time indexes (as Kafka does) and walks only
the segment that holds the answer.

A batch scan is planned by segments: one task per segment (adjacent small
segments packed together up to :data:`SCAN_TASK_BYTES`), so a large partition
is read in parallel.

Earliest offset: the first segment's base, or the ``log-start-offset-checkpoint``
entry when larger (after DeleteRecords). Latest: the tail of the last segment.

``kafka.isolation.level=read_committed`` reads as a read_committed consumer
does: latest is the last stable offset (the first offset of the oldest
transaction without a marker, found from the newest producer ``.snapshot``
and the batch headers after it), reads stop there, and the batches of aborted
transactions (from the ``.txnindex`` files) are skipped along with the
markers.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]

from seglog.records import legacy
from seglog.records import record as record_codec
from seglog.spark.arrow import ColumnBuilder
from seglog.spark.offsets import OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import Strategy, select_partitions
from seglog.spark.transport import BATCH_ROWS, Transport, data_loss
from seglog.storage import filenames, reader
from seglog.storage.reader import PartitionReader, SegmentReader

__all__ = ["SCAN_TASK_BYTES", "FilesTransport"]

SCAN_TASK_BYTES = 128 * 1024 * 1024
"""Segment bytes per batch task in files mode (Spark's default ``maxPartitionBytes``)."""


class FilesTransport(Transport):
    """Offsets and records of the partitions of one log directory."""

    def __init__(self, path: str | os.PathLike[str], *, read_committed: bool = False) -> None:
        self.root = Path(path)
        self.read_committed = read_committed
        if not self.root.is_dir():
            raise FileNotFoundError(f"{self.root} is not a log directory")

    # ------------------------------------------------------------ layout

    def _partition(self, tp: TopicPartition) -> PartitionReader:
        directory = self.root / filenames.partition_dir_name(tp.topic, tp.partition)
        try:
            return PartitionReader(directory)
        except FileNotFoundError:
            raise ValueError(f"{tp} is not a partition of {self.root}") from None

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions of the directory that ``strategy`` covers."""
        found = [TopicPartition(*tp) for tp in reader.partition_dirs(self.root)]
        return select_partitions(strategy, found)

    # ----------------------------------------------------------- offsets

    def _earliest(
        self,
        tp: TopicPartition,
        part: PartitionReader,
        latest: int,
        starts: Mapping[tuple[str, int], int] | None = None,
    ) -> int:
        first = part.bases[0] if part.bases else 0
        if starts is None:
            starts = reader.log_start_offsets(self.root)
        return min(max(first, starts.get((tp.topic, tp.partition), 0)), latest)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The first segment's base offset, raised to the log start checkpoint."""
        starts = reader.log_start_offsets(self.root)
        out: PartitionOffsets = {}
        for tp in tps:
            part = self._partition(tp)
            out[tp] = self._earliest(tp, part, part.next_offset(), starts)
        return out

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The offset after the last whole batch of each partition (read_committed: the LSO)."""
        out: PartitionOffsets = {}
        for tp in tps:
            part = self._partition(tp)
            latest = part.next_offset()
            out[tp] = reader.last_stable_offset(part, latest) if self.read_committed else latest
        return out

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Lookups by time through the time indexes; only the segment holding the answer is
        walked."""
        starts = reader.log_start_offsets(self.root)
        out: dict[TopicPartition, int | None] = {}
        for tp, timestamp in timestamps.items():
            part = self._partition(tp)
            floor = self._earliest(tp, part, part.next_offset(), starts)
            out[tp] = part.offset_for_time(timestamp, floor)
        return out

    def split_by_segments(
        self, rng: OffsetRange, max_bytes: int = SCAN_TASK_BYTES
    ) -> list[OffsetRange]:
        """``rng`` cut at segment boundaries into pieces of about ``max_bytes`` of segment
        files each, so that a large partition is read by many tasks at once.

        A piece is one segment or a run of adjacent small ones (as Spark packs
        small files up to ``spark.sql.files.maxPartitionBytes``); pieces follow
        segment bases, so each task opens only its own segments.
        """
        if rng.size <= 0:
            return []
        part = self._partition(rng.topic_partition)
        bases = list(part.segments_between(rng.from_offset, rng.until_offset))
        cuts: list[int] = []
        pending = 0
        for base in bases:
            try:
                size = filenames.log_path(part.directory, base).stat().st_size
            except FileNotFoundError:
                size = 0
            if pending and pending + size > max_bytes:
                cuts.append(base)
                pending = 0
            pending += size
        bounds = [rng.from_offset, *(c for c in cuts if rng.from_offset < c < rng.until_offset)]
        bounds.append(rng.until_offset)
        return [
            OffsetRange(rng.topic, rng.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]

    # ----------------------------------------------------------- records

    def read(
        self, rng: OffsetRange, include_headers: bool, fail_on_data_loss: bool
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``rng``, read segment by segment from the offset index's position."""
        tp = rng.topic_partition
        start, until = rng.from_offset, rng.until_offset
        part = self._partition(tp)
        latest = part.next_offset()
        earliest = self._earliest(tp, part, latest)

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
        aborted: reader.AbortedTransactions | None = None
        if self.read_committed:
            # Never past the last stable offset (not yet decided, so not lost).
            until = min(until, reader.last_stable_offset(part, latest))
            aborted = reader.AbortedTransactions(part, start)
        if start >= until:
            return
        builder = ColumnBuilder(tp.topic, tp.partition, include_headers)
        for base in part.segments_between(start, until):
            try:
                segment = part.open_segment(base)
            except FileNotFoundError:
                data_loss(
                    f"Segment {base} of {tp} was deleted while it was read", fail_on_data_loss
                )
                continue
            with segment:
                position = segment.position_for(start) if base <= start else 0
                yield from _read_segment(segment, position, start, until, builder, aborted)
        if len(builder):
            yield builder.build()


def _read_segment(
    segment: SegmentReader,
    position: int,
    start: int,
    until: int,
    builder: ColumnBuilder,
    aborted: reader.AbortedTransactions | None = None,
) -> Iterator[pa.RecordBatch]:
    """Add the records of ``[start, until)`` found from ``position`` on; yield full batches.

    Stops at the first entry past ``until`` or at the segment's tail.
    """
    for entry in segment.read_entries(position):
        header = entry.header
        if header is not None:
            if header.base_offset >= until:
                return
            if aborted is not None and aborted.holds(header):
                continue
            if header.last_offset >= start:
                builder.add_v2_batch(entry.buffer, entry.start, header, start, until)
        else:
            data = entry.data
            records = record_codec.decode_entry(data)
            if records and records[0].offset >= until:
                return
            builder.add_records(records, legacy.timestamp_type(data), start, until)
        if len(builder) >= BATCH_ROWS:
            yield builder.build()
