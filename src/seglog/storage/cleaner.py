"""Log compaction (``cleanup.policy=compact``): keep the newest record of every key.

Theory of operation
-------------------
Choosing a log. For each compacted partition the *first dirty offset* is where
the last cleaning stopped (``cleaner-offset-checkpoint``), reset to the log
start offset when the checkpoint is outside the log. The *first uncleanable
offset* is the smaller of the active segment's base and the base of the first
dirty segment holding a record younger than ``min.compaction.lag.ms``: the
active segment is never cleaned. The dirty ratio is
``dirty bytes / (clean bytes + dirty bytes)`` over whole segments; a log is
eligible when its ratio exceeds ``min.cleanable.dirty.ratio`` or its oldest
dirty data has waited longer than ``max.compaction.lag.ms``. The dirtiest
eligible log is cleaned first.

Cleaning one log, in two passes:

1. *Offset map.* The dirty segments are read and each key is mapped to the
   offset of its newest record. If the map reaches its capacity (the dedupe
   buffer, 24 bytes a slot at 90% load as in Kafka), the pass stops there and
   the cleaning ends at the last offset mapped: progress is made even with a
   small buffer.
2. *Copy.* Every segment from the start of the log up to that end is grouped
   greedily (a group fits ``segment.bytes`` and 32-bit relative offsets) and
   each group is rewritten into one ``.cleaned`` segment. A record is kept if
   it is past the map's end, or if its key maps to its own offset or lower and
   it is either a value or a tombstone still inside its delete horizon.
   Unkeyed records are dropped. A batch whose records all survive is copied
   byte for byte; otherwise it is rebuilt with the survivors, keeping its base
   offset, last offset, producer fields and codec.

Empty batches. A batch left with no records is dropped, except an idempotent
producer's *last* batch in the log (its last offset is the one the producer
state holds), which is kept as an empty header: its producer id, epoch and
sequences are what rebuilding the producer state from the log needs to go on
detecting that producer's duplicates. This is Kafka's ``RETAIN_EMPTY`` rule
(``LogCleaner``'s ``isBatchLastRecordOfProducer``). Keeping every empty batch
would leave segments of nothing but headers, and a Fetch answer holding no
record at all makes librdkafka report MSG_SIZE_TOO_LARGE.

Transactions. Only what lies below the last stable offset is cleaned (an
open transaction's records may still be aborted). The batches of aborted
transactions (known from the ``.txnindex``) take no part in the offset map,
so an aborted record never hides the committed one before it, and are
dropped by the copy, as Kafka's cleaner discards them. Transaction markers
(control batches) never enter the offset map. A marker stays as long as data
of the transaction it ends may remain: a cleaning that meets any batch of the
producer's transaction before the marker (one it keeps, or drops only now)
copies the marker as it is. The first cleaning that meets no such batch
stamps the marker with a delete horizon, like a tombstone's; a cleaning after
the horizon drops it, and the ``.txnindex`` entry of an aborted transaction
goes with its marker. This is Kafka's ``CleanedTransactionMetadata`` rule,
applied over the whole cleaning rather than one segment group at a time, so
that a marker is never dropped while its transaction's data sits in an earlier
group. A marker that is its producer's last batch in the producer state is
kept, as Kafka keeps such a batch (``RETAIN_EMPTY``) for rebuilding the state.

Tombstones. The first cleaning that meets a batch holding tombstones stamps it
with a delete horizon (``now + delete.retention.ms``, attribute bit 6 and the
base timestamp, as Kafka's v2 format does); a later cleaning after the horizon
drops those tombstones.

Swap. Cleaned segments replace the originals through
:meth:`~seglog.storage.log.Log.replace_segments` (``.cleaned`` → ``.swap`` →
final name), which a crash at any point leaves recoverable. Only that swap
takes the log's lock, so appends to this partition and every other go on while
a cleaning runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seglog.errors import SeglogError, StorageError
from seglog.records import batch, control, log_entries
from seglog.records import builder as batch_builder
from seglog.records import record as record_codec
from seglog.storage import checkpoints, filenames, reader
from seglog.storage.log import Log
from seglog.storage.segment import LogSegment

if TYPE_CHECKING:
    from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

_SLOT_BYTES = 24
_LOAD_FACTOR = 0.9
_MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CleanableLog:
    """A compacted log and the numbers that decide whether and where to clean it."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    max_lag_exceeded: bool

    @property
    def dirty_ratio(self) -> float:
        """Dirty bytes over all bytes below the first uncleanable offset."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """What one cleaning did."""

    partition: str
    start_offset: int
    end_offset: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    seconds: float


def cleanable_range(log: Log, first_dirty: int, now_ms: int) -> CleanableLog:
    """Compute the dirty range and ratio of ``log``, as the cleaner sees it now."""
    config = log.config
    segments = log.segments
    start = log.log_start_offset
    if first_dirty < start or first_dirty > log.log_end_offset:
        first_dirty = start
    uncleanable = segments[-1].base_offset
    # Kafka's rule: nothing at or past the first offset of an open transaction.
    unstable = log.producer_state.first_unstable_offset()
    if unstable is not None:
        uncleanable = min(uncleanable, unstable)
    max_lag_exceeded = False
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if upper <= first_dirty:
            continue
        if config.min_compaction_lag_ms > 0 and (
            now_ms - segment.largest_timestamp < config.min_compaction_lag_ms
        ):
            uncleanable = min(uncleanable, segment.base_offset)
            break
    clean_bytes = dirty_bytes = 0
    earliest_dirty_ts: int | None = None
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if upper <= first_dirty:
            clean_bytes += segment.size
        elif segment.base_offset < uncleanable:
            dirty_bytes += segment.size
            ts = segment.max_timestamp_so_far
            if ts >= 0 and (earliest_dirty_ts is None or ts < earliest_dirty_ts):
                earliest_dirty_ts = ts
    if (
        earliest_dirty_ts is not None
        and dirty_bytes > 0
        and now_ms - earliest_dirty_ts > config.max_compaction_lag_ms
    ):
        max_lag_exceeded = True
    return CleanableLog(log, first_dirty, uncleanable, clean_bytes, dirty_bytes, max_lag_exceeded)


class OffsetMap:
    """Key → offset of its newest record, with Kafka's capacity rule."""

    def __init__(self, memory_bytes: int) -> None:
        self.capacity = max(int(memory_bytes / _SLOT_BYTES * _LOAD_FACTOR), 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        """True when no new key may be added."""
        return len(self._map) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the newest for ``key``."""
        self._map[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The newest offset of ``key``, or -1."""
        return self._map.get(key, -1)


def _entries(segment: LogSegment) -> Iterator[reader.EntryBytes]:
    """The whole entries of ``segment`` with their bytes, a chunk at a time."""
    return reader.read_entries(segment.read_bytes, 0, segment.size, segment.log_path)


class AbortedBatches:
    """Which transactional batches belong to aborted transactions, from the ``.txnindex``."""

    def __init__(self, log: Log, end: int) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for aborted in log.aborted_transactions(log.log_start_offset, end):
            self._by_producer.setdefault(aborted.producer_id, []).append(
                (aborted.first_offset, aborted.last_offset)
            )

    def __contains__(self, header: object) -> bool:
        if not isinstance(header, batch.BatchHeader):
            return False
        if not header.is_transactional or header.is_control:
            return False
        spans = self._by_producer.get(header.producer_id)
        return spans is not None and any(
            first <= header.base_offset <= last for first, last in spans
        )


class MarkerTracker:
    """Which transaction markers a cleaning may let go (Kafka's ``CleanedTransactionMetadata``).

    Fed every batch of the cleaning in offset order: a producer's
    transactional data batch marks its open transaction as met; its marker
    ends that transaction and is removable only if no batch of it was met.
    """

    def __init__(self) -> None:
        self._met: set[int] = set()

    def on_data(self, header: batch.BatchHeader | None) -> None:
        """A data batch of the cleaning (kept or dropped)."""
        if header is not None and header.is_transactional and not header.is_control:
            self._met.add(header.producer_id)

    def on_marker(self, header: batch.BatchHeader, data: bytes | memoryview) -> bool:
        """A control batch: True if its transaction left no data the cleaning met."""
        if header.record_count == 0:
            return True  # already emptied
        try:
            marker = control.read_marker(data)
        except SeglogError:
            marker = None
        if marker is None:
            return False  # no transaction marker: kept as it is
        met = header.producer_id in self._met
        self._met.discard(header.producer_id)
        return not met


def build_offset_map(
    log: Log,
    start: int,
    end: int,
    offset_map: OffsetMap,
    aborted: AbortedBatches | None = None,
) -> tuple[int, int]:
    """Map keys of records in [start, end); returns (end offset reached, records read).

    Control batches and the batches of aborted transactions are not mapped.
    """
    records_read = 0
    segments = log.segments
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        if upper <= start or segment.base_offset >= end:
            continue
        for entry_bytes in _entries(segment):
            entry = entry_bytes.describe()
            if entry.last_offset < start:
                continue
            if entry.base_offset >= end:
                return end, records_read
            header = entry_bytes.header
            if header is not None and (
                header.is_control or (aborted is not None and header in aborted)
            ):
                offset_map.latest_offset = max(offset_map.latest_offset, entry.last_offset)
                continue
            records = record_codec.decode_entry(entry_bytes.data)
            if offset_map.full and any(
                r.key is not None and offset_map.get(r.key) < 0 for r in records
            ):
                # Stop before a batch that would not fit: clean up to here.
                return entry.base_offset, records_read
            for rec in records:
                records_read += 1
                if rec.offset >= start and rec.key is not None:
                    offset_map.put(rec.key, rec.offset)
            offset_map.latest_offset = max(offset_map.latest_offset, entry.last_offset)
    return end, records_read


def _group_segments(
    segments: list[LogSegment], max_size: int, uppers: list[int]
) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = 0
    for segment, upper in zip(segments, uppers, strict=True):
        span_ok = current and upper - 1 - current[0].base_offset <= _MAX_RELATIVE_OFFSET
        if current and (size + segment.size <= max_size) and span_ok:
            current.append(segment)
            size += segment.size
        else:
            if current:
                groups.append(current)
            current = [segment]
            size = segment.size
    if current:
        groups.append(current)
    return groups


def _retain_empty(header: batch.BatchHeader | None, last_offsets: dict[int, int]) -> bool:
    """Whether a batch the cleaning emptied stays as an empty header (see the module doc)."""
    if header is None or header.producer_id < 0:
        return False
    if header.is_control:
        return True
    return last_offsets.get(header.producer_id) == header.last_offset


class Cleaner:
    """Cleans one log at a time; see the module docstring."""

    def __init__(self, dedupe_buffer_size: int, clock: Callable[[], float] = time.time) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self._clock = clock

    def clean(self, target: CleanableLog) -> CleanerStats:
        """Compact ``target.log`` from its start to where the offset map ends."""
        began = time.monotonic()
        log = target.log
        now_ms = int(self._clock() * 1000)
        offset_map = OffsetMap(self.dedupe_buffer_size)
        aborted = AbortedBatches(log, target.first_uncleanable_offset)
        end, records_read = build_offset_map(
            log, target.first_dirty_offset, target.first_uncleanable_offset, offset_map, aborted
        )
        # Each producer's last batch: the only one kept if the cleaning empties it.
        # A copy taken without the log's lock (one C-level copy under the GIL);
        # an append racing with it only makes an older batch look last, which
        # keeps one empty batch more, never one fewer than needed.
        last_offsets = {
            pid: entry.last_offset for pid, entry in log.producer_state.producers.copy().items()
        }
        segments = log.segments
        chosen: list[LogSegment] = []
        uppers: list[int] = []
        for i, segment in enumerate(segments[:-1]):
            upper = segments[i + 1].base_offset
            if segment.base_offset >= end:
                break
            if upper > end:
                break
            chosen.append(segment)
            uppers.append(upper)
        stats_read = stats_written = kept = 0
        horizon = now_ms + log.config.delete_retention_ms
        markers = MarkerTracker()
        for group in _group_segments(chosen, log.config.segment_bytes, uppers):
            cleaned = LogSegment.create(
                log.directory,
                group[0].base_offset,
                index_interval_bytes=log.config.index_interval_bytes,
                max_index_size=log.config.segment_index_bytes,
                suffix=filenames.CLEANED_SUFFIX,
                env=log.env,
            )
            try:
                removed_markers: list[int] = []
                for segment in group:
                    read, written, count = self._copy_segment(
                        segment,
                        cleaned,
                        offset_map,
                        now_ms,
                        horizon,
                        last_offsets,
                        aborted,
                        markers,
                        removed_markers,
                    )
                    stats_read += read
                    stats_written += written
                    kept += count
                cleaned.on_become_inactive()
                cleaned.flush()
                # Retention by time falls back to the file's mtime: keep the original's.
                log.env.set_mtime(cleaned.log_path, log.env.stat(group[-1].log_path).st_mtime)
                log.replace_segments([cleaned], group, removed_markers=removed_markers)
            except BaseException:
                cleaned.delete()
                raise
        return CleanerStats(
            partition=log.directory.name,
            start_offset=target.first_dirty_offset,
            end_offset=end,
            bytes_read=stats_read,
            bytes_written=stats_written,
            records_read=records_read,
            records_kept=kept,
            seconds=time.monotonic() - began,
        )

    @staticmethod
    def _copy_segment(
        source: LogSegment,
        dest: LogSegment,
        offset_map: OffsetMap,
        now_ms: int,
        horizon: int,
        last_offsets: dict[int, int],
        aborted: AbortedBatches,
        markers: MarkerTracker,
        removed_markers: list[int],
    ) -> tuple[int, int, int]:
        out = bytearray()
        out_entries: list[log_entries.EntryInfo] = []
        kept_records = 0
        for entry_bytes in _entries(source):
            entry = entry_bytes.describe()
            chunk: bytes | memoryview = entry_bytes.data
            header = entry_bytes.header
            if header is not None and header.is_control:
                # A transaction marker: what readers and recovery need to end it,
                # while its transaction may have data left (see the module doc).
                removable = markers.on_marker(header, chunk) and (
                    last_offsets.get(header.producer_id) != header.last_offset
                )
                marker_horizon = header.delete_horizon_ms if header.has_delete_horizon else None
                if removable and marker_horizon is not None and now_ms >= marker_horizon:
                    removed_markers.append(header.last_offset)
                    continue
                if removable and marker_horizon is None:
                    chunk = batch_builder.rebuild_batch(
                        header,
                        record_codec.decode_entry(chunk),
                        base_offset=entry.base_offset,
                        last_offset=entry.last_offset,
                        delete_horizon_ms=horizon,
                    )
                    entry = log_entries.read_entry(chunk, 0, check_crc=False)
                out_entries.append(entry._replace(position=len(out)))
                out += chunk
                kept_records += header.record_count
                continue
            markers.on_data(header)
            dropped = header in aborted  # every record of an aborted transaction goes
            records = [] if dropped else record_codec.decode_entry(chunk)
            existing_horizon = (
                header.delete_horizon_ms
                if header is not None and header.has_delete_horizon
                else None
            )
            keep = []
            for rec in records:
                if rec.offset > offset_map.latest_offset:
                    keep.append(rec)
                    continue
                if rec.key is None:
                    continue
                if rec.offset < offset_map.get(rec.key):
                    continue
                if (
                    rec.value is None
                    and existing_horizon is not None
                    and now_ms >= existing_horizon
                ):
                    continue
                keep.append(rec)
            has_tombstone = any(r.value is None for r in keep)
            needs_horizon = has_tombstone and existing_horizon is None
            if (
                len(keep) == len(records)
                and not needs_horizon
                and header is not None
                and not dropped
            ):
                new_bytes: bytes | memoryview = chunk
            elif not keep and not _retain_empty(header, last_offsets):
                continue
            else:
                new_bytes = batch_builder.rebuild_batch(
                    header,
                    keep,
                    base_offset=entry.base_offset,
                    last_offset=entry.last_offset,
                    delete_horizon_ms=(
                        horizon if needs_horizon else existing_horizon if has_tombstone else None
                    ),
                )
            info = log_entries.read_entry(new_bytes, 0, check_crc=False)
            out_entries.append(info._replace(position=len(out)))
            out += new_bytes
            kept_records += len(keep)
        if out:
            dest.append([out], out_entries)
        return source.size, len(out), kept_records


class LogCleaner:
    """The background cleaner of a :class:`~seglog.storage.log_dir.LogDir`."""

    def __init__(self, log_dir: LogDir, clock: Callable[[], float] = time.time) -> None:
        self.log_dir = log_dir
        self._clock = clock
        self._cleaner = Cleaner(log_dir.settings.log_cleaner_dedupe_buffer_size, clock)
        self._uncleanable: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._checkpoint_unreadable = False  # warned about already
        self.history: list[CleanerStats] = []

    @property
    def checkpoint_path(self) -> Any:
        """The log directory's ``cleaner-offset-checkpoint``."""
        return self.log_dir.path / checkpoints.CLEANER_OFFSET_CHECKPOINT

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        """The checkpoint's offsets; a file that cannot be read counts as empty.

        As Kafka's ``LogCleanerManager.allCleanerCheckpoints`` does: without
        the checkpoint each log is cleaned again from its start, which costs
        work but loses nothing, whereas refusing it would stop compaction for
        good. The next cleaning rewrites the file whole. The warning is given
        once, not at every back-off, until the file reads again.
        """
        try:
            offsets = checkpoints.read_offset_checkpoint(self.checkpoint_path, env=self.log_dir.env)
        except StorageError as exc:  # CorruptCheckpointError, or the read failed
            if not self._checkpoint_unreadable:
                logger.warning(
                    "%s cannot be read; cleaning as if it were empty: %s",
                    self.checkpoint_path,
                    exc,
                )
                self._checkpoint_unreadable = True
            return {}
        self._checkpoint_unreadable = False
        return offsets

    def grab_filthiest_log(self, now_ms: int) -> CleanableLog | None:
        """The compacted log most in need of cleaning, or None."""
        first_dirty = self._read_checkpoint()
        best: CleanableLog | None = None
        for key, log in self.log_dir.logs().items():
            if (
                log.closed
                or log.offline_reason is not None
                or not log.config.compact
                or key in self._uncleanable
            ):
                continue
            candidate = cleanable_range(log, first_dirty.get(key, 0), now_ms)
            if candidate.dirty_bytes <= 0:
                continue
            if not (
                candidate.dirty_ratio > log.config.min_cleanable_dirty_ratio
                or candidate.max_lag_exceeded
            ):
                continue
            if best is None or candidate.dirty_ratio > best.dirty_ratio:
                best = candidate
        return best

    def clean_once(self) -> CleanerStats | None:
        """Clean the filthiest log, if any; update the checkpoint. Returns what was done."""
        with self._lock:
            now_ms = int(self._clock() * 1000)
            target = self.grab_filthiest_log(now_ms)
            if target is None:
                return None
            key = (target.log.topic, target.log.partition)
            try:
                stats = self._cleaner.clean(target)
            except StorageError as exc:
                logger.warning("cleaning of %s aborted: %s", target.log.directory.name, exc)
                return None
            except SeglogError as exc:
                logger.error("marking %s uncleanable: %s", target.log.directory.name, exc)
                self._uncleanable.add(key)
                return None
            offsets = self._read_checkpoint()
            offsets = {k: v for k, v in offsets.items() if k in self.log_dir.logs()}
            offsets[key] = stats.end_offset
            # Sharing the directory, other processes' lines are kept.
            self.log_dir.merge_checkpoint(checkpoints.CLEANER_OFFSET_CHECKPOINT, offsets)
            self.history.append(stats)
            logger.info(
                "cleaned %s [%d, %d): %d → %d bytes in %.2fs",
                stats.partition,
                stats.start_offset,
                stats.end_offset,
                stats.bytes_read,
                stats.bytes_written,
                stats.seconds,
            )
            return stats

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run cleanings until ``stop`` is set, backing off when there is nothing to do."""
        backoff = self.log_dir.settings.log_cleaner_backoff_ms / 1000

        def loop() -> None:
            while not stop.is_set():
                try:
                    done = self.clean_once()
                except Exception:
                    logger.exception("the log cleaner failed")
                    done = None
                if done is None:
                    stop.wait(backoff)

        thread = threading.Thread(target=loop, name="seglog-cleaner", daemon=True)
        thread.start()
        return thread
