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

Both passes walk each batch's records once with
:func:`~seglog.records.record.scan_slots`, which reads a record's length,
deltas and key and skips its value and headers; no record object is built. A
rebuilt batch is made of its survivors' bytes as they are
(:func:`~seglog.records.builder.rebuild_from_slots`); only when its base
timestamp moves (the first record went, or a delete horizon comes or goes) is
each survivor's timestamp delta written anew. A LogAppendTime batch and a
legacy entry are still rebuilt from decoded records: both are rare here.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seglog.errors import SeglogError, StorageError
from seglog.records import batch, control, log_entries
from seglog.records import builder as batch_builder
from seglog.records import record as record_codec
from seglog.records.compression import Codec
from seglog.storage import checkpoints, filenames, reader
from seglog.storage.log import Log
from seglog.storage.segment import LogSegment

if TYPE_CHECKING:
    from seglog.storage.log_dir import LogDir, LogDirSettings

logger = logging.getLogger(__name__)

_SLOT_BYTES = 24
_LOAD_FACTOR = 0.9
_MAX_RELATIVE_OFFSET = 2**31 - 1
_WRITE_CHUNK = 8 << 20  # bytes of cleaned entries gathered per write


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
        #: The map itself, for the loops that fill or read it once per record.
        self.entries: dict[bytes, int] = {}
        self.latest_offset = -1
        #: The keys of mapped batches that may stay whole, by base offset, with
        #: their CRC: see :meth:`remember`.
        self.batch_keys: dict[int, tuple[int, Sequence[bytes]]] = {}
        self._remembered = 0

    def remember(
        self, header: batch.BatchHeader, offsets: Sequence[int], keys: Sequence[bytes | None]
    ) -> None:
        """Keep the keys of a mapped batch, so that the copy need not walk it again.

        Only for a batch with no tombstone (the caller's test) whose records are
        keyed, at offsets ``base_offset, base_offset + 1, ...`` as a producer
        writes them: such a batch stays whole exactly when every key maps to its
        own record, which the copy checks with one lookup per key. The keys kept
        are at most ``capacity``, so this costs the map's order of memory at most.
        """
        count = len(keys)
        base = header.base_offset
        if (
            count != header.last_offset_delta + 1
            or self._remembered + count > self.capacity
            or None in keys
            or tuple(offsets) != tuple(range(base, base + count))
        ):
            return
        self.batch_keys[base] = (header.crc, keys)  # type: ignore[assignment]
        self._remembered += count

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def full(self) -> bool:
        """True when no new key may be added."""
        return len(self.entries) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the newest for ``key``."""
        self.entries[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The newest offset of ``key``, or -1."""
        return self.entries.get(key, -1)


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


def _records_of(entry_bytes: reader.EntryBytes) -> tuple[bytes, int, int]:
    """The records block of a v2 batch as ``(data, start, end)``, decompressed if need be.

    An uncompressed batch is not copied: ``data`` is the chunk it was read in.
    """
    header = entry_bytes.header
    assert header is not None
    if header.compression == Codec.NONE:
        buffer = entry_bytes.buffer
        chunk = buffer.obj
        start = entry_bytes.start
        if isinstance(chunk, bytes) and len(chunk) == buffer.nbytes:
            return chunk, start + batch.HEADER_SIZE, start + entry_bytes.size
        data = bytes(buffer[start + batch.HEADER_SIZE : start + entry_bytes.size])
        return data, 0, len(data)
    if header.record_count == 0:
        return b"", 0, 0
    data = bytes(record_codec.records_block(entry_bytes.buffer, entry_bytes.start, header))
    return data, 0, len(data)


def _slots(entry_bytes: reader.EntryBytes) -> list[record_codec.RecordSlot]:
    """Each record of a v2 batch: offset, key, tombstone flag and where its bytes are."""
    header = entry_bytes.header
    assert header is not None
    data, start, end = _records_of(entry_bytes)
    return record_codec.scan_slots(data, start, end, header.base_offset, header.record_count)


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
    keys = offset_map.entries
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        if upper <= start or segment.base_offset >= end:
            continue
        for entry_bytes in _entries(segment):
            header = entry_bytes.header
            if header is None:  # a legacy entry: decoded whole
                entry = entry_bytes.describe()
                base_offset, last_offset = entry.base_offset, entry.last_offset
            else:
                base_offset, last_offset = header.base_offset, header.last_offset
            if last_offset < start:
                continue
            if base_offset >= end:
                return end, records_read
            if header is not None and (
                header.is_control or (aborted is not None and header in aborted)
            ):
                offset_map.latest_offset = max(offset_map.latest_offset, last_offset)
                continue
            tombstones: Sequence[bool] = ()
            if header is None:
                records = record_codec.decode_entry(entry_bytes.data)
                offsets: Sequence[int] = [r.offset for r in records]
                batch_keys: Sequence[bytes | None] = [r.key for r in records]
            else:
                slots = _slots(entry_bytes)
                offsets = batch_keys = ()
                if slots:
                    # The slots' first three columns, each transposed in C.
                    columns = zip(*slots, strict=True)
                    offsets, batch_keys, tombstones = next(columns), next(columns), next(columns)
            if offset_map.full and any(key is not None and key not in keys for key in batch_keys):
                # Stop before a batch that would not fit: clean up to here.
                return base_offset, records_read
            records_read += len(offsets)
            if base_offset >= start:
                if header is not None and True not in tombstones:
                    offset_map.remember(header, offsets, batch_keys)
                if None in batch_keys:
                    keys.update(
                        (key, offset)
                        for key, offset in zip(batch_keys, offsets, strict=True)
                        if key is not None
                    )
                else:
                    keys.update(zip(batch_keys, offsets, strict=True))  # type: ignore[arg-type]
            else:
                keys.update(
                    (key, offset)
                    for key, offset in zip(batch_keys, offsets, strict=True)
                    if key is not None and offset >= start
                )
            offset_map.latest_offset = max(offset_map.latest_offset, last_offset)
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
                if log.config.key_index_enable:
                    # Built and written (.keyindex.cleaned) before the swap, which
                    # renames it along with the segment's other files.
                    cleaned.enable_key_index(True, slot_count=log.key_index_slot_count)
                    cleaned.seal_key_index()
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
        written = kept_records = 0
        latest = offset_map.latest_offset
        newest = offset_map.entries.get
        batch_keys = offset_map.batch_keys
        for entry_bytes in _entries(source):
            if len(out) >= _WRITE_CHUNK:
                # Written as it goes: memory stays bounded whatever segment.bytes is.
                dest.append([out], out_entries)
                written += len(out)
                out = bytearray()
                out_entries = []
            chunk: bytes | memoryview = entry_bytes.data
            header = entry_bytes.header
            if header is None:
                new_legacy, count = _clean_legacy(entry_bytes, offset_map, horizon)
                if new_legacy is None:
                    continue
                info = log_entries.read_entry(new_legacy, 0, check_crc=False)
                out_entries.append(info._replace(position=len(out)))
                out += new_legacy
                kept_records += count
                continue
            if header.is_control:
                # A transaction marker: what readers and recovery need to end it,
                # while its transaction may have data left (see the module doc).
                entry = entry_bytes.describe()
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
            remembered = batch_keys.pop(header.base_offset, None)
            if remembered is not None and remembered[0] == header.crc:
                # Keyed records at consecutive offsets, no tombstone: the batch
                # stays whole if each key's newest record is its own.
                base = header.base_offset
                batch_of_keys = remembered[1]
                if list(map(newest, batch_of_keys)) == list(range(base, base + len(batch_of_keys))):
                    out_entries.append(_entry_info(header, len(out)))
                    out += chunk
                    kept_records += len(batch_of_keys)
                    continue
            dropped = header in aborted  # every record of an aborted transaction goes
            slots = [] if dropped else _slots(entry_bytes)
            existing_horizon = header.delete_horizon_ms if header.has_delete_horizon else None
            # The per-record rule, in two forms so that the common one has no
            # horizon test: a record past the map's end stays; an unkeyed one
            # goes; a keyed one stays if no newer record of its key is mapped,
            # unless it is a tombstone whose batch's delete horizon has passed.
            if existing_horizon is not None and now_ms >= existing_horizon:
                keep = [
                    slot
                    for slot in slots
                    if slot[0] > latest
                    or (slot[1] is not None and not slot[2] and slot[0] >= newest(slot[1], -1))
                ]
            else:
                keep = [
                    slot
                    for slot in slots
                    if slot[0] > latest or (slot[1] is not None and slot[0] >= newest(slot[1], -1))
                ]
            has_tombstone = any(slot[2] for slot in keep)
            needs_horizon = has_tombstone and existing_horizon is None
            if len(keep) == len(slots) and not needs_horizon and not dropped:
                new_bytes: bytes | memoryview = chunk
            elif not keep and not _retain_empty(header, last_offsets):
                continue
            else:
                new_horizon = (
                    horizon if needs_horizon else existing_horizon if has_tombstone else None
                )
                if header.timestamp_type == batch.CREATE_TIME:
                    data, _, _ = _records_of(entry_bytes) if keep else (b"", 0, 0)
                    new_bytes = batch_builder.rebuild_from_slots(
                        header, data, keep, delete_horizon_ms=new_horizon
                    )
                else:
                    # LogAppendTime: every record takes the batch's time, rebuilt from values.
                    offsets = {slot[0] for slot in keep}
                    new_bytes = batch_builder.rebuild_batch(
                        header,
                        [r for r in record_codec.decode_entry(chunk) if r.offset in offsets],
                        base_offset=header.base_offset,
                        last_offset=header.last_offset,
                        delete_horizon_ms=new_horizon,
                    )
            if new_bytes is chunk:
                out_entries.append(_entry_info(header, len(out)))
            else:
                info = log_entries.read_entry(new_bytes, 0, check_crc=False)
                out_entries.append(info._replace(position=len(out)))
            out += new_bytes
            kept_records += len(keep)
        if out:
            dest.append([out], out_entries)
            written += len(out)
        return source.size, written, kept_records


def _entry_info(header: batch.BatchHeader, position: int) -> log_entries.EntryInfo:
    """What an append needs of a v2 batch copied as it is, from its header."""
    return log_entries.EntryInfo(
        position,
        header.size,
        batch.CURRENT_MAGIC,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
        header.record_count,
    )


def _clean_legacy(
    entry_bytes: reader.EntryBytes, offset_map: OffsetMap, horizon: int
) -> tuple[bytes | None, int]:
    """A legacy (magic 0 or 1) entry cleaned: rebuilt as a v2 batch, or None if emptied.

    A legacy entry has no delete horizon, so its tombstones stay and get one.
    """
    entry = entry_bytes.describe()
    keep = [
        rec
        for rec in record_codec.decode_entry(entry_bytes.data)
        if rec.offset > offset_map.latest_offset
        or (rec.key is not None and rec.offset >= offset_map.get(rec.key))
    ]
    if not keep:
        return None, 0
    rebuilt = batch_builder.rebuild_batch(
        None,
        keep,
        base_offset=entry.base_offset,
        last_offset=entry.last_offset,
        delete_horizon_ms=horizon if any(r.value is None for r in keep) else None,
    )
    return rebuilt, len(keep)


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

    def reconfigure(self, settings: LogDirSettings) -> None:
        """Take changed cleaner settings (``LogDirSettings``); the next cleaning uses them.

        The back-off is read from the log directory's settings at each pause.
        """
        self._cleaner.dedupe_buffer_size = settings.log_cleaner_dedupe_buffer_size

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
