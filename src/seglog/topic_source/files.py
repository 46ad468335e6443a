"""A topic source over a log directory's files, read in place and read-only.

The directory may belong to a running broker (seglog's or Kafka's); every
file is read through :mod:`seglog.storage.reader`, which never writes, locks
or keeps a file mapped, and which defines what a reader sees: the segments of
a partition, the tail of its last segment (a batch cut short at the end of
the active segment is not yet written and ends the read), lookups by offset
and by time. A segment that vanishes while it is read (retention) is data
the read lost, reported to its ``lost`` callback.

Bounds are applied through the indexes so that untouched segments are never
opened: a range ``[start, until)`` opens only the segments whose base offsets
say they overlap it, and starts inside the first one at the position the
offset index gives; a lookup by time takes the segments' largest timestamps
from the last entries of their time indexes (as Kafka does) and walks only
the segment that holds the answer.

Offsets, as a broker would answer them:

* earliest: the first segment's base, or the ``log-start-offset-checkpoint``
  entry when larger (after DeleteRecords), never past the tail;
* latest: the tail of the last segment; read_committed, the last stable
  offset instead: the first offset of the oldest transaction without a marker
  (from the newest producer ``.snapshot`` and the batch headers after it),
  never below the log start, as Kafka keeps it;
* a partition that ``seglog-topics.json`` defines but that has no directory
  yet is empty (0, 0); one neither defined nor present is unknown.

The read_committed loop (:func:`_chunks`): batches are walked in order from
the offset index's position; control batches are dropped, those of aborted
transactions (from the ``.txnindex`` files) skipped, and the read never goes
past the last stable offset, so undecided data waits for its marker.

Committed group offsets are the replay of ``__consumer_offsets``: the last
commit of each (group, topic, partition), with a null value (a deleted offset
or group) removing what came before, and the commits of a transaction counted
only once it committed, as the group coordinator loads them. The record
layout is :mod:`seglog.coordinator.offset_store`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path

from seglog.coordinator import offset_store
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import legacy
from seglog.storage import filenames, key_lookup, reader
from seglog.storage.filenames import is_internal
from seglog.storage.reader import PartitionReader
from seglog.topic_source.base import (
    Chunk,
    LostCallback,
    Rows,
    StoredBatch,
    TopicInfo,
    TopicPartition,
    TopicSource,
    UnknownPartitionError,
    clip,
)

__all__ = ["FilesTopicSource", "NotALogDirectoryError"]


class NotALogDirectoryError(SeglogError, FileNotFoundError):
    """The path given as a log directory is not a directory."""


class FilesTopicSource(TopicSource):
    """The topics of one log directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, read_committed: bool = False) -> None:
        self.root = Path(root)
        self.read_committed = read_committed
        if not self.root.is_dir():
            raise NotALogDirectoryError(f"{self.root} is not a log directory")
        self.description = str(self.root)

    # ----------------------------------------------------------------- layout

    def _partition(self, topic: str, partition: int) -> PartitionReader | None:
        """The partition's reader; None for a defined partition not yet written."""
        directory = self.root / filenames.partition_dir_name(topic, partition)
        try:
            return PartitionReader(directory)
        except FileNotFoundError:
            spec = reader.topic_definitions(self.root).get(topic)
            if spec is not None and 0 <= partition < spec.partitions:
                return None
            raise UnknownPartitionError(
                f"{TopicPartition(topic, partition)} is not a partition of {self.root}"
            ) from None

    def partitions(self) -> list[TopicPartition]:
        """The partition directories."""
        return sorted(TopicPartition(*tp) for tp in reader.partition_dirs(self.root))

    def topics(self) -> dict[str, TopicInfo]:
        """The partition directories, with seglog's topic definitions where it has them.

        A directory written by Kafka has no definitions file: the partition
        count is then the highest partition directory plus one, and the
        overrides are unknown (empty).
        """
        defined = reader.topic_definitions(self.root)
        seen: dict[str, int] = {}
        for topic, partition in reader.partition_dirs(self.root):
            seen[topic] = max(seen.get(topic, 0), partition + 1)
        out: dict[str, TopicInfo] = {}
        for name in sorted(set(seen) | set(defined)):
            if is_internal(name):
                continue
            spec = defined.get(name)
            count = max(seen.get(name, 0), spec.partitions if spec else 0)
            out[name] = TopicInfo(name, count, dict(spec.configs) if spec else {})
        return out

    # ---------------------------------------------------------------- offsets

    def _start(
        self,
        tp: TopicPartition,
        part: PartitionReader,
        tail: int,
        starts: Mapping[tuple[str, int], int] | None = None,
    ) -> int:
        """The log start offset; ``starts`` is the checkpoint when the caller has read it."""
        first = part.bases[0] if part.bases else 0
        if starts is None:
            starts = reader.log_start_offsets(self.root)
        return min(max(first, starts.get(tp, 0)), tail)

    def _end(self, part: PartitionReader, start: int, tail: int) -> int:
        if not self.read_committed:
            return tail
        return max(reader.last_stable_offset(part, tail), start)

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The log start offset and the tail (read_committed: the last stable offset)."""
        part = self._partition(topic, partition)
        if part is None:
            return 0, 0
        tail = part.next_offset()
        start = self._start(TopicPartition(topic, partition), part, tail)
        return start, self._end(part, start, tail)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offsets, without looking for open transactions."""
        starts = reader.log_start_offsets(self.root)
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            part = self._partition(*tp)
            out[tp] = 0 if part is None else self._start(tp, part, part.next_offset(), starts)
        return out

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Lookups through the time indexes; only the segment holding the answer is walked."""
        starts = reader.log_start_offsets(self.root)
        out: dict[TopicPartition, int | None] = {}
        for tp, timestamp in timestamps.items():
            part = self._partition(*tp)
            if part is None:
                out[tp] = None
                continue
            floor = self._start(tp, part, part.next_offset(), starts)
            out[tp] = part.offset_for_time(timestamp, floor)
        return out

    def segment_sizes(
        self, topic: str, partition: int, start: int, until: int
    ) -> list[tuple[int, int]]:
        """(base offset, bytes of its ``.log``) of each segment that may hold offsets in
        ``[start, until)``; 0 bytes for one deleted since the listing."""
        part = self._partition(topic, partition)
        if part is None:
            return []
        out = []
        for base in part.segments_between(start, until):
            try:
                size = filenames.log_path(part.directory, base).stat().st_size
            except FileNotFoundError:
                size = 0
            out.append((base, size))
        return out

    # ---------------------------------------------------------------- records

    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        until: int,
        *,
        headers: bool = True,
        lost: LostCallback | None = None,
    ) -> Iterator[Chunk]:
        """The chunks of ``[start, until)``, segment by segment from the offset index's
        position (see the module docstring)."""
        tp = TopicPartition(topic, partition)
        part = self._partition(topic, partition)
        tail = 0 if part is None else part.next_offset()
        earliest = 0 if part is None else self._start(tp, part, tail)
        start, until = clip(tp, start, until, earliest, tail, lost)
        if part is None:
            return
        aborted: reader.AbortedTransactions | None = None
        if self.read_committed:
            # Never past the last stable offset (not yet decided, so not lost).
            until = min(until, self._end(part, earliest, tail))
            aborted = reader.AbortedTransactions(part, start)
        if start < until:
            yield from _chunks(part, tp, start, until, aborted, lost=lost)

    def read_keys(
        self,
        topic: str,
        partition: int,
        start: int,
        until: int,
        keys: Collection[bytes],
        *,
        headers: bool = True,
        lost: LostCallback | None = None,
    ) -> Iterator[Rows]:
        """The records of ``[start, until)`` whose key is one of ``keys``, found through the
        segments' key indexes (:mod:`seglog.storage.key_lookup`): what :meth:`read` gives,
        less every other key's records, without reading them."""
        tp = TopicPartition(topic, partition)
        part = self._partition(topic, partition)
        tail = 0 if part is None else part.next_offset()
        earliest = 0 if part is None else self._start(tp, part, tail)
        start, until = clip(tp, start, until, earliest, tail, lost)
        if part is None or start >= until:
            return
        rows = Rows()
        for record, timestamp_type in key_lookup.find_keys_in_range(
            part, keys, start, until, log_start=earliest, read_committed=self.read_committed
        ):
            rows.offsets.append(record.offset)
            rows.timestamps.append(record.timestamp)
            rows.timestamp_types.append(timestamp_type)
            rows.keys.append(record.key)
            rows.values.append(record.value)
            if headers:
                rows.headers.append(list(record.headers) or None)
        if len(rows):
            yield rows

    def keeps_key_index(self, topic: str) -> bool:
        """Whether ``topic`` keeps key indexes (``key.index.enable``), so that a lookup by key
        reads only the records of the key rather than scanning."""
        return key_lookup.topic_keeps_key_index(self.root, topic)

    # ----------------------------------------------------------------- groups

    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The replay of ``__consumer_offsets`` (see the module docstring)."""
        out: dict[str, dict[tuple[str, int], int]] = {}
        dirs = reader.partition_dirs(self.root)
        for (topic, partition), directory in sorted(dirs.items()):
            if topic != offset_store.TOPIC:
                continue
            part = PartitionReader(directory)
            end = part.next_offset()
            # Offsets of an open transaction are not committed yet (the coordinator
            # holds them until the marker); those after it are.
            undecided = reader.open_transactions(part, end)
            aborted = reader.AbortedTransactions(part, 0)
            tp = TopicPartition(topic, partition)
            for chunk in _chunks(part, tp, 0, end, aborted, undecided):
                for rec in chunk.records():
                    if rec.key is not None:
                        _replay(out, groups, rec.key, rec.value)
        return {group: offsets for group, offsets in out.items() if offsets}


def _replay(
    out: dict[str, dict[tuple[str, int], int]],
    groups: re.Pattern[str],
    key_bytes: bytes,
    value_bytes: bytes | None,
) -> None:
    """Apply one record of ``__consumer_offsets`` to ``out``."""
    try:
        key = offset_store.parse_key(key_bytes)
    except CorruptRecordError:
        return  # a record kind this version does not know (KIP-848...)
    if isinstance(key, str):
        if value_bytes is None:
            out.pop(key, None)  # the whole group was deleted
        return
    group, topic, partition = key
    if not groups.fullmatch(group):
        return
    if value_bytes is None:
        out.get(group, {}).pop((topic, partition), None)
        return
    try:
        value = offset_store.parse_offset_value(value_bytes)
    except CorruptRecordError:
        return
    out.setdefault(group, {})[(topic, partition)] = value.offset


def _chunks(
    part: PartitionReader,
    tp: TopicPartition,
    start: int,
    until: int,
    aborted: reader.AbortedTransactions | None,
    undecided: Mapping[int, int] | None = None,
    *,
    lost: LostCallback | None = None,
) -> Iterator[Chunk]:
    """The data batches and legacy entries of ``[start, until)`` but markers, aborted
    transactions' and those of ``undecided`` (open transactions: producer id → first
    offset)."""
    for base in part.segments_between(start, until):
        try:
            segment = part.open_segment(base)
        except FileNotFoundError:
            # Retention removed it since the listing: its records are gone.
            if lost is not None:
                lost(f"Segment {base} of {tp} was deleted while it was read")
            continue
        with segment:
            position = segment.position_for(start) if base <= start else 0
            for entry in segment.read_entries(position):
                header = entry.header
                if header is None:
                    records = legacy.decode_legacy(entry.data)
                    if records and records[0].offset >= until:
                        return
                    rows = Rows()
                    rows.add_records(
                        (r for r in records if start <= r.offset < until),
                        legacy.timestamp_type(entry.data),
                    )
                    if len(rows):
                        yield rows
                    continue
                if header.base_offset >= until:
                    return
                if (
                    header.last_offset < start
                    or header.is_control
                    or header.record_count == 0
                    or (aborted is not None and aborted.holds(header))
                ):
                    continue
                if (
                    undecided
                    and header.is_transactional
                    and header.base_offset >= undecided.get(header.producer_id, until)
                ):
                    continue
                yield StoredBatch(entry.buffer, entry.start, header, start, until)
