"""The segments of one partition on disk (Kafka's LocalLog).

Owns the segment list (oldest first, the last one active) and what it alone
decides: the log end offset and the recovery point of those files, appends to
the active segment, rolling to a new one (with its per-segment jitter),
removing segments, swapping cleaned segments in, the ``.txnindex`` files, and
fsyncing segments. It knows nothing of what clients see (high watermark, last
stable offset, log start offset), of batch validation or producers: that is
:class:`~seglog.storage.log.Log`, which owns a LocalLog and is its only caller.

Concurrency: LocalLog takes no lock. The owning log serialises every call that
changes it under its writer lock; readers take no lock. The segment list is a
tuple that is replaced, never mutated, so a reader keeps a consistent snapshot
(:attr:`LocalLog.segments` with :attr:`LocalLog.bases`, see :func:`read_from`)
for as long as it needs; a segment taken out of the list is renamed to
``.deleted`` and closed by the delete scheduler only after
``file.delete.delay.ms``, so a region a reader already holds stays readable.
"""

from __future__ import annotations

import bisect
import logging
import random
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from seglog.config import LONG_MAX, LogConfig
from seglog.errors import StorageError
from seglog.records import batch
from seglog.records.log_entries import EntryInfo
from seglog.storage import filenames, io, txn_index
from seglog.storage.producer_state import CompletedTxn
from seglog.storage.segment import LogSegment, SegmentRead, TimestampAndOffset

# The partition's messages keep the logger they have always been logged under.
logger = logging.getLogger("seglog.storage.log")

#: Called with segments taken out of the log (already renamed ``.deleted``)
#: and the delay in milliseconds after which to delete them.
DeleteScheduler = Callable[[Sequence[LogSegment], int], None]

_WRITE_BACK_CHUNK = 1 << 20


def delete_now(segments: Sequence[LogSegment], delay_ms: int) -> None:
    """The default :data:`DeleteScheduler`: delete at once, whatever the delay."""
    for segment in segments:
        segment.delete()


class LocalLog:
    """The segment files of ``directory``, with the offsets they define.

    ``segments`` must be loaded already (see :mod:`seglog.storage.recovery`)
    and not empty.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: Sequence[LogSegment],
        *,
        recovery_point: int,
        now_ms: int,
        env: io.Env,
        delete_scheduler: DeleteScheduler = delete_now,
    ) -> None:
        self.directory = directory
        self.name = directory.name
        #: Every file operation of the segments goes through this environment.
        self.env = env
        #: The topic's log config (segment sizes, roll and deletion delays).
        self.config = config
        self._delete_scheduler = delete_scheduler
        #: A snapshot of the segment list, oldest first; replaced, never mutated.
        self.segments: tuple[LogSegment, ...] = tuple(segments)
        #: The base offsets of :attr:`segments`, for bisection.
        self.bases: tuple[int, ...] = tuple(s.base_offset for s in segments)
        #: The next offset to be written (LEO).
        self.log_end_offset = self.segments[-1].read_next_offset()
        #: Offsets below this are flushed to disk.
        self.recovery_point = min(recovery_point, self.log_end_offset)
        #: Records appended since the last flush that reached the LEO.
        self.unflushed_messages = 0
        #: When the last flush ended (ms), for ``flush.ms``.
        self.last_flush_ms = now_ms
        # The active segment's roll jitter, drawn once per segment (see _roll_jitter).
        self._jitter_segment: LogSegment | None = None
        self._jitter_ms = 0
        # Transaction indexes written since the last flush, synced by the next.
        self._unsynced_txn_indexes: set[Path] = set()
        #: Whether any segment may have a .txnindex: read_committed fetches of
        #: logs that never saw an abort then read no file.
        names = env.listdir(directory)
        self.has_txn_index = any(name.endswith(filenames.TXN_INDEX_SUFFIX) for name in names)
        #: The key index's slot count when fixed (tests force collisions); None: sized to fit.
        self.key_index_slot_count: int | None = None
        # A topic whose key index was turned off while the process was down
        # loses its files now; one that never had any costs no unlink per segment.
        self.configure_key_index(
            files_present=any(name.endswith(filenames.KEY_INDEX_SUFFIX) for name in names)
        )

    # -------------------------------------------------------------- segments

    @property
    def size(self) -> int:
        """Total bytes of all segments' ``.log`` files."""
        return sum(s.size for s in self.segments)

    def _set_segments(self, segments: Iterable[LogSegment]) -> None:
        ordered = tuple(sorted(segments, key=lambda s: s.base_offset))
        self.segments = ordered
        self.bases = tuple(s.base_offset for s in ordered)

    def segments_overlapping(self, start: int, end: int) -> list[LogSegment]:
        """Segments holding any offset in [start, end): segment i spans [base_i, base_i+1)."""
        segments = self.segments
        result = []
        for i, segment in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if (upper is None or upper > start) and segment.base_offset < end:
                result.append(segment)
        return result

    def configure_key_index(self, *, files_present: bool = True) -> None:
        """Make every segment keep a key index, or none, as ``key.index.enable`` says.

        Turning it on only marks the segments (the active one indexes in
        memory from now on; the others are indexed by the background indexer
        or the first lookup); turning it off unlinks every ``.keyindex``
        (unless ``files_present`` is False: there is none to unlink).
        """
        enabled = self.config.key_index_enable
        segments = self.segments
        for i, segment in enumerate(segments):
            segment.enable_key_index(
                enabled,
                active=i == len(segments) - 1,
                slot_count=self.key_index_slot_count,
                unlink=files_present,
            )

    def _schedule_deletion(self, doomed: Sequence[LogSegment]) -> None:
        self._delete_scheduler(doomed, self.config.file_delete_delay_ms)

    # ---------------------------------------------------------- append, roll

    def append(
        self,
        chunks: Sequence[bytes | bytearray | memoryview],
        entries: Sequence[EntryInfo],
        size: int,
        last_offset: int,
        record_count: int,
    ) -> None:
        """Append whole entries (``record_count`` records) to the active segment; the
        LEO moves past ``last_offset``.

        All or nothing, as :meth:`LogSegment.append`: on an error the segment
        is as it was and the LEO has not moved.
        """
        self.segments[-1].append(chunks, entries, size)
        self.log_end_offset = last_offset + 1
        self.unflushed_messages += record_count

    def should_roll(self, size: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        """Whether an append of ``size`` bytes must go to a new segment (Kafka's rules)."""
        segment = self.segments[-1]
        config = self.config
        jitter = (
            self._jitter_ms
            if self._jitter_segment is segment
            else self._roll_jitter(segment, config)
        )
        return segment.should_roll(
            size, max_timestamp, last_offset, now, config.segment_bytes, config.segment_ms, jitter
        )

    def _roll_jitter(self, segment: LogSegment, config: LogConfig) -> int:
        """The roll jitter of the active ``segment``: one random draw per segment.

        Kafka draws each segment's jitter uniformly in [0, min(segment.jitter.ms,
        segment.ms)) so that partitions created together do not all roll at the
        same instant; the draw is kept for the segment's life.
        """
        if self._jitter_segment is not segment:
            self._jitter_segment = segment
            bound = min(config.segment_jitter_ms, config.segment_ms)
            self._jitter_ms = random.randrange(bound) if bound > 0 else 0
        return self._jitter_ms

    def roll(self, new_base: int) -> LogSegment:
        """Start a new active segment at ``new_base``; returns it.

        An empty active segment already at ``new_base`` is returned as it is;
        an empty one elsewhere is replaced rather than kept behind the new one.
        """
        active = self.segments[-1]
        if active.is_empty and active.base_offset == new_base:
            return active
        if new_base in self.bases:
            # Only an empty active segment may sit at the new base (handled above).
            raise StorageError(f"cannot roll {self.name} to {new_base}: a segment exists there")
        active.on_become_inactive()
        new_segment = self._create_segment(new_base)
        segments = self.segments
        if active.is_empty:
            segments = segments[:-1]
            self._delete_scheduler([active], 0)
        self._set_segments((*segments, new_segment))
        return new_segment

    def _create_segment(self, base_offset: int) -> LogSegment:
        config = self.config
        segment = LogSegment.create(
            self.directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            env=self.env,
        )
        if config.key_index_enable:
            segment.enable_key_index(True, active=True, slot_count=self.key_index_slot_count)
        return segment

    # ----------------------------------------------------------------- flush

    def flush(self, target: int, *, sync_dir: bool) -> None:
        """fsync every segment holding offsets in [recovery point, ``target``).

        The directory is synced too when ``sync_dir`` (a file the caller wrote
        needs its name durable) or, Kafka's rule, when a segment created since
        the last flush is among them. The recovery point is left to
        :meth:`mark_flushed`, once the caller's own files are synced too.
        """
        start = self.recovery_point
        flushed = self.segments_overlapping(start, target)
        for segment in flushed:
            segment.flush()
        if sync_dir or any(s.base_offset >= start for s in flushed):
            self.env.fsync_dir(self.directory)

    def mark_flushed(self, offset: int, now_ms: int) -> None:
        """Record a flush that ended at ``now_ms``: the recovery point moves up to
        ``offset`` (never down)."""
        self.recovery_point = max(self.recovery_point, offset)
        if self.recovery_point >= self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = now_ms

    def flush_due(self, now_ms: int) -> bool:
        """Whether ``flush.ms`` has passed since the last flush with bytes unflushed."""
        flush_ms = self.config.flush_ms
        if flush_ms == LONG_MAX or self.recovery_point >= self.log_end_offset:
            return False
        return now_ms - self.last_flush_ms >= flush_ms

    def write_back_unflushed(self) -> None:
        """Write the unflushed bytes again and fsync them (at close of an offline log).

        After a failed fsync the kernel may keep the failed pages in its cache
        marked clean: they read back fine, so the next start's recovery would
        keep them, yet they are not on disk and no later fsync writes them.
        Writing them again makes them dirty, so this fsync (if the disk now
        takes it) makes them durable. A failure here is logged and the bytes
        stay in doubt, as they were: nothing depends on them.
        """
        start = self.recovery_point
        env = self.env
        try:
            written_back = self.segments_overlapping(start, self.log_end_offset)
            for segment in written_back:
                position = 0
                if segment.base_offset < start:
                    found = segment.translate_offset(start)
                    position = segment.size if found is None else found.position
                while position < segment.size:
                    length = min(_WRITE_BACK_CHUNK, segment.size - position)
                    data = env.pread(segment.fd, length, position, name=segment.log_path)
                    if not data:
                        break
                    view = memoryview(data)
                    while view:
                        written = env.pwritev(segment.fd, [view], position, name=segment.log_path)
                        if written <= 0:
                            raise StorageError(f"{segment.log_path} accepted no bytes")
                        view = view[written:]
                        position += written
                env.fsync(segment.fd, name=segment.log_path)
            # As flush does: a segment created since the last flush has a name that
            # is durable only once the directory is synced (the failed flush did not).
            if any(segment.base_offset >= start for segment in written_back):
                env.fsync_dir(self.directory)
        except StorageError as exc:
            logger.error(
                "cannot write back the unflushed bytes of offline partition %s: %s",
                self.name,
                exc,
            )

    def active_is_whole(self) -> bool:
        """The active ``.log`` holds exactly what the segment says (a failed write was cut)."""
        segment = self.segments[-1]
        try:
            return self.env.file_size(segment.fd) == segment.size
        except (StorageError, OSError):
            return False

    # ------------------------------------------------- truncation and removal

    def truncate_to(self, offset: int) -> None:
        """Remove everything at or after ``offset``, which the first segment must not pass.

        Later segments go (``.deleted``, then the delete scheduler); the one
        holding ``offset`` is cut and grown again to take appends. The LEO
        becomes that segment's end and the recovery point is kept below it.
        """
        doomed = [s for s in self.segments if s.base_offset > offset]
        keep = [s for s in self.segments if s.base_offset <= offset]
        for segment in doomed:
            segment.change_suffix(filenames.DELETED_SUFFIX)
        self._schedule_deletion(doomed)
        keep[-1].truncate_to(offset)
        keep[-1].resize_indexes(self.config.segment_index_bytes)
        txn_index.truncate_to(keep[-1].txn_index_path, offset, env=self.env)
        self._set_segments(keep)
        self.log_end_offset = keep[-1].read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully(self, offset: int) -> None:
        """Drop every segment and start one empty segment at ``offset``."""
        doomed = list(self.segments)
        for segment in doomed:
            segment.change_suffix(filenames.DELETED_SUFFIX)
        self._schedule_deletion(doomed)
        fresh = self._create_segment(offset)
        self._set_segments([fresh])
        self.log_end_offset = offset
        self.recovery_point = offset

    def delete_oldest(self, count: int) -> list[LogSegment]:
        """Take the ``count`` oldest segments out (``.deleted``, then the delete scheduler).

        The caller keeps at least one segment. Returns those removed.
        """
        doomed = list(self.segments[:count])
        for segment in doomed:
            segment.change_suffix(filenames.DELETED_SUFFIX)
        self._set_segments(self.segments[count:])
        self._schedule_deletion(doomed)
        return doomed

    def replace_segments(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        removed_markers: Collection[int],
    ) -> None:
        """Swap cleaned segments (suffix ``.cleaned``) in for ``old_segments``, crash-safely.

        The order is Kafka's: ``.cleaned`` → ``.swap`` (descending base),
        originals → ``.deleted``, ``.swap`` → final names, fsync the directory.
        A crash at any step leaves files that :func:`recovery.load_segments`
        completes or rolls back. ``removed_markers`` are the offsets of the
        transaction markers the cleaning dropped: their aborted transactions
        leave the ``.txnindex``.
        """
        current = set(map(id, self.segments))
        if any(id(s) not in current for s in old_segments):
            raise StorageError(f"segments of {self.name} changed while being cleaned")
        self._carry_txn_indexes(new_segments, old_segments, set(removed_markers))
        for segment in sorted(new_segments, key=lambda s: -s.base_offset):
            segment.flush()
            segment.change_suffix(filenames.SWAP_SUFFIX)
        self.env.fsync_dir(self.directory)
        old_ids = set(map(id, old_segments))
        for segment in old_segments:
            segment.change_suffix(filenames.DELETED_SUFFIX)
        for segment in new_segments:
            segment.change_suffix("")
        self.env.fsync_dir(self.directory)
        kept = [s for s in self.segments if id(s) not in old_ids]
        self._set_segments([*kept, *new_segments])
        self._schedule_deletion(list(old_segments))

    def _carry_txn_indexes(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        removed_markers: set[int],
    ) -> None:
        """Give cleaned segments the aborted transactions of the ones they replace.

        Each entry goes to the new segment that holds its marker's offset, but
        for those whose marker the cleaning removed (their data went before
        the marker could).
        """
        env = self.env
        entries = [
            e
            for old in old_segments
            for e in txn_index.read(old.txn_index_path, env=env)
            if e.last_offset not in removed_markers
        ]
        if not entries or not new_segments:
            return
        ordered = sorted(new_segments, key=lambda s: s.base_offset)
        bases = [s.base_offset for s in ordered]
        by_segment: dict[int, list[txn_index.AbortedTxn]] = {}
        for entry in sorted(entries, key=lambda e: e.last_offset):
            index = max(bisect.bisect_right(bases, entry.last_offset) - 1, 0)
            by_segment.setdefault(index, []).append(entry)
        for index, found in by_segment.items():
            path = ordered[index].txn_index_path
            txn_index.append(path, found, env=env)
            txn_index.sync(path, env=env)

    # ---------------------------------------------------- transaction index

    def index_aborted(
        self, segment: LogSegment, completed: CompletedTxn, last_stable_offset: int
    ) -> None:
        """Add an aborted transaction to ``segment``'s ``.txnindex`` (marker order).

        ``last_stable_offset`` is the LSO once the transaction ended; the
        next :meth:`sync_txn_indexes` makes the entry durable.
        """
        entry = txn_index.AbortedTxn(
            completed.producer_id,
            completed.first_offset,
            completed.last_offset,
            last_stable_offset,
        )
        path = segment.txn_index_path
        txn_index.append(path, [entry], env=self.env)
        self.has_txn_index = True
        self._unsynced_txn_indexes.add(path)

    def truncate_txn_index(self, segment: LogSegment, offset: int) -> None:
        """Drop ``segment``'s aborted transactions whose marker is at or after ``offset``."""
        if self.has_txn_index:
            txn_index.truncate_to(segment.txn_index_path, offset, env=self.env)

    def sync_txn_indexes(self) -> None:
        """fsync the transaction indexes written since the last call."""
        for path in list(self._unsynced_txn_indexes):
            self._unsynced_txn_indexes.discard(path)
            txn_index.sync(path, env=self.env)

    def aborted_transactions(
        self, fetch_offset: int, upper_bound: int
    ) -> list[txn_index.AbortedTxn]:
        """Aborted transactions overlapping [``fetch_offset``, ``upper_bound``), by first offset.

        Read from the ``.txnindex`` of the segment holding ``fetch_offset`` and
        every later one (a transaction's marker follows its data).
        """
        if not self.has_txn_index:
            return []
        segments, bases = self.segments, self.bases
        index = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
        found: list[txn_index.AbortedTxn] = []
        for segment in segments[index:]:
            try:
                entries = txn_index.read(segment.txn_index_path, env=self.env)
            except StorageError as exc:
                logger.warning("cannot read %s: %s", segment.txn_index_path, exc)
                continue
            found.extend(txn_index.collect_aborted(entries, fetch_offset, upper_bound))
        found.sort(key=lambda entry: entry.first_offset)
        return found

    # ------------------------------------------------------------- lifecycle

    def close(self) -> StorageError | None:
        """Close every segment, even if one fails; returns the first failure, if any.

        A segment that fails (a full disk refusing a final time-index entry)
        must not keep its descriptor past the log.
        """
        failure: StorageError | None = None
        for segment in self.segments:
            try:
                segment.close()
            except StorageError as exc:
                failure = failure or exc
        return failure

    def delete(self) -> None:
        """Delete every segment's files now; the log is left with no segment."""
        for segment in self.segments:
            segment.delete()
        self.segments = ()
        self.bases = ()


def read_from(
    segments: tuple[LogSegment, ...],
    bases: tuple[int, ...],
    start_offset: int,
    max_bytes: int,
    limit_offset: int | None,
    min_one_message: bool,
) -> SegmentRead | None:
    """Read from a snapshot of the segment list: the bytes from the entry holding
    ``start_offset``, at most ``max_bytes``, none from ``limit_offset`` on (None:
    to the end of the last segment).

    ``segments`` and ``bases`` are a snapshot (:attr:`LocalLog.segments`,
    :attr:`LocalLog.bases`) taken by the reader before it read the offsets it
    checked ``start_offset`` against.
    """
    index = bisect.bisect_right(bases, start_offset) - 1
    index = max(index, 0)
    while index < len(segments):
        segment = segments[index]
        max_position = (
            None
            if limit_offset is None
            else _position_limit(segment, segments, index, limit_offset)
        )
        data = segment.read(start_offset, max_bytes, max_position, min_one_message)
        if data is not None:
            return data
        index += 1
    return None


def _position_limit(
    segment: LogSegment, segments: tuple[LogSegment, ...], index: int, limit_offset: int
) -> int | None:
    # Only the segment that holds the read limit needs a position bound.
    next_base = segments[index + 1].base_offset if index + 1 < len(segments) else None
    if next_base is not None and next_base <= limit_offset:
        return None
    found = segment.translate_offset(limit_offset)
    return None if found is None else found.position


def first_at_or_after(
    segments: tuple[LogSegment, ...], timestamp: int, start_offset: int
) -> TimestampAndOffset | None:
    """The first record of a snapshot of the segment list with a timestamp of at
    least ``timestamp`` and an offset of at least ``start_offset``, or None."""
    for segment in segments:
        # A segment with a record timestamp at all (its largest timestamp is
        # then the largest record timestamp) reaching the target.
        largest = segment.max_timestamp_so_far
        if largest >= timestamp and largest >= 0:
            found = segment.find_offset_by_timestamp(timestamp, start_offset)
            if found is not None:
                return found
    return None


def max_timestamp_record(segments: tuple[LogSegment, ...]) -> TimestampAndOffset | None:
    """The record carrying the largest timestamp of a snapshot of the segment list
    (the first of them), or None when no segment has a timestamp."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.max_timestamp_so_far != batch.NO_TIMESTAMP and (
            best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far
        ):
            best = segment
    if best is None:
        return None
    # Kafka answers with the batch holding the max timestamp: that batch's
    # record carrying it, found by decoding just that batch.
    found = best.find_offset_by_timestamp(best.max_timestamp_so_far, best.base_offset)
    if found is not None:
        return found
    return TimestampAndOffset(best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far)


__all__ = [
    "DeleteScheduler",
    "LocalLog",
    "delete_now",
    "first_at_or_after",
    "max_timestamp_record",
    "read_from",
]
