"""One partition's log as its readers and writers see it (Kafka's UnifiedLog).

Theory of operation
-------------------
Offsets: the *log start offset* is the first offset a reader may fetch, the
*log end offset* (LEO) the next one to be written, the *high watermark* the end
of what consumers see (on a single broker it follows the LEO), and the
*recovery point* the offset below which everything is known to be on disk.

Structure: as Kafka's UnifiedLog over its LocalLog, a :class:`Log` is the
partition's public face (offsets, high watermark, last stable offset, producer
state, the rules of appends, reads, truncation and deletion) over a
:class:`~seglog.storage.local_log.LocalLog`, which owns the segment files
(the segment list, the log end offset and recovery point they define,
rolling, removing and swapping segments, fsyncs).

Concurrency: one lock serialises the writers (append, roll, truncate, segment
deletion and replacement); the local log is changed only under it. Readers
take no lock: they read a snapshot of the segment list (see
:mod:`seglog.storage.local_log`).

Durability: appends go to the page cache. When ``flush.messages`` appends are
unflushed, or :meth:`Log.flush_if_due` finds ``flush.ms`` has passed, the log
fsyncs. The fsync runs outside the writer lock and a flush that finds the
recovery point already past its target returns at once: callers waiting
behind one fsync are all covered by it (group commit).

Failure: the first I/O error on a write path takes the partition offline
(:mod:`seglog.storage.offline` has the rule and its reasons): it refuses
every write, keeps serving reads, and is recovered by the next start.

Loading (:meth:`Log.open`) is :mod:`seglog.storage.recovery`, Kafka's
LogLoader: the segments are loaded and repaired, then the producer state is
rebuilt from the newest snapshot and the batches after it.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from seglog.config import LogConfig
from seglog.errors import (
    CorruptRecordError,
    KeyIndexDisabledError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from seglog.records import batch, control
from seglog.records.log_entries import EntryInfo
from seglog.storage import io, recovery, txn_index
from seglog.storage.local_log import (
    DeleteScheduler,
    LocalLog,
    delete_now,
    first_at_or_after,
    max_timestamp_record,
    read_from,
)
from seglog.storage.offline import OfflineState
from seglog.storage.producer_state import ProducerEntry, ProducerStateManager
from seglog.storage.results import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    LogReadResult,
    TimestampAndOffset,
)
from seglog.storage.segment import MAX_SEGMENT_BYTES, LogSegment
from seglog.storage.validator import fast_rules, validate_and_assign, validate_single_batch

if TYPE_CHECKING:
    from seglog.storage.key_search import FoundRecord

logger = logging.getLogger(__name__)

#: How a lookup by key sees transactions: as Kafka's consumers' isolation.level.
Isolation = Literal["read_uncommitted", "read_committed"]

Clock = Callable[[], float]


def _now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


class Log:
    """One partition of one topic: ``<dir>/<topic>-<partition>``.

    Use :meth:`open`; the constructor takes already-loaded segments.
    """

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: Sequence[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        clock: Clock = time.time,
        delete_scheduler: DeleteScheduler = delete_now,
        producer_id_expiration_ms: int = 86_400_000,
        env: io.Env | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a log needs at least one segment")
        # The environment of the segments given, unless told otherwise: one log
        # does all its file I/O through one environment.
        self._env = segments[0].env if env is None else env
        self.directory = directory
        self._name = directory.name
        self.topic = topic
        self.partition = partition
        self._fast_rules = fast_rules(config)
        self._clock = clock
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._local = local = LocalLog(
            directory,
            config,
            segments,
            recovery_point=recovery_point,
            now_ms=_now_ms(clock),
            env=self._env,
            delete_scheduler=delete_scheduler,
        )
        self._log_start_offset = max(log_start_offset, local.segments[0].base_offset)
        self._high_watermark = local.log_end_offset
        self._closed = False
        self._offline = OfflineState(directory.name, self._lock)
        self._producer_state = ProducerStateManager(
            directory, expiration_ms=producer_id_expiration_ms, env=self._env
        )
        self._rebuild_producer_state()

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        clock: Clock = time.time,
        delete_scheduler: DeleteScheduler = delete_now,
        producer_id_expiration_ms: int = 86_400_000,
        env: io.Env | None = None,
    ) -> Log:
        """Load (or create) the partition in ``directory``, recovering as Kafka does.

        Every file operation of the log (segments, indexes, producer snapshots)
        goes through ``env``, the default environment when None.
        """
        env = io.env_or_default(env)
        loaded = recovery.load_partition(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            env=env,
        )
        return cls(
            directory,
            loaded.topic,
            loaded.partition,
            config,
            loaded.segments,
            log_start_offset=log_start_offset,
            recovery_point=loaded.recovery_point,
            clock=clock,
            delete_scheduler=delete_scheduler,
            producer_id_expiration_ms=producer_id_expiration_ms,
            env=env,
        )

    # ------------------------------------------------------------ properties

    @property
    def env(self) -> io.Env:
        """The environment every file operation of this log goes through."""
        return self._env

    @property
    def config(self) -> LogConfig:
        """The topic's current log config."""
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        """Apply a changed topic config; it takes effect for the next append or roll."""
        with self._lock:
            previous = self._local.config
            self._local.config = config
            self._fast_rules = fast_rules(config)
            if previous.key_index_enable != config.key_index_enable:
                # On: existing segments are indexed by the log directory's
                # background indexer (or the first lookup); off: the files go.
                self._local.configure_key_index()
                logger.info(
                    "key index of %s turned %s",
                    self._name,
                    "on" if config.key_index_enable else "off",
                )

    @property
    def key_index_slot_count(self) -> int | None:
        """The key index's fixed slot count (tests force collisions); None: sized to fit."""
        return self._local.key_index_slot_count

    @key_index_slot_count.setter
    def key_index_slot_count(self, slots: int | None) -> None:
        with self._lock:
            self._local.key_index_slot_count = slots
            self._local.configure_key_index()

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """A snapshot of the segment list, oldest first; the last one is active."""
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._local.segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written (LEO)."""
        return self._local.log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset readers may fetch."""
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        """The end of what consumers see."""
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Offsets below this are flushed to disk."""
        return self._local.recovery_point

    @property
    def size(self) -> int:
        """Total bytes of all segments' ``.log`` files."""
        return self._local.size

    def active_producers(self) -> list[ProducerEntry]:
        """The producers the log remembers (DescribeProducers), as copies."""
        with self._lock:
            return [copy.copy(entry) for entry in self._producer_state.producers.values()]

    @property
    def unflushed_messages(self) -> int:
        """Records appended since the last flush."""
        return self._local.unflushed_messages

    # ---------------------------------------------------------------- append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int | None = None,
        defer_flush: bool = False,
        from_client: bool = True,
    ) -> AppendInfo:
        """Validate ``records`` (v2 batches, or a legacy message set), assign offsets, write.

        Raises a :class:`~seglog.errors.SeglogError` with Kafka's error name if
        the append breaks a rule; nothing is written then. An append that
        reaches ``flush.messages`` fsyncs before returning, unless
        ``defer_flush``: then it says so in :attr:`AppendInfo.flush_needed`
        and the caller flushes (the broker does, off its event loop).
        Appends the broker makes itself (``from_client`` False: a
        transaction's offsets) skip the producers' sequence checks.
        """
        now = _now_ms(self._clock) if now_ms is None else now_ms
        with self._lock:
            if self._closed or self._offline.reason is not None:
                self._check_open()
            local = self._local
            config = local.config
            rules = self._fast_rules
            validated = (
                None
                if rules is None
                else validate_single_batch(records, rules, local.log_end_offset, now)
            )
            if validated is None:
                validated = validate_and_assign(
                    records, config, local.log_end_offset, now, self._name
                )
            (
                chunks,
                size,
                entries,
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max_timestamp,
                record_count,
                log_append_time,
                producer_batches,
            ) = validated
            if producer_batches:
                duplicate = self._producer_state.check(producer_batches, client=from_client)
                if duplicate is not None:
                    log_append = config.message_timestamp_type == "LogAppendTime"
                    return AppendInfo(
                        first_offset=duplicate.first_offset,
                        last_offset=duplicate.last_offset,
                        max_timestamp=duplicate.timestamp,
                        offset_of_max_timestamp=duplicate.last_offset,
                        log_append_time=duplicate.timestamp if log_append else batch.NO_TIMESTAMP,
                        log_start_offset=self._log_start_offset,
                        record_count=0,
                        size=0,
                        duplicate=True,
                    )
            # A segment never holds more than an int32 of bytes, whatever the config says.
            segment_limit = min(config.segment_bytes, MAX_SEGMENT_BYTES)
            if size > segment_limit:
                raise RecordBatchTooLargeError(
                    f"an append of {size} bytes is larger than the largest segment "
                    f"({segment_limit} bytes)"
                )
            try:
                # What _maybe_roll does, inline on the hot path.
                if local.should_roll(size, max_timestamp, last_offset, now):
                    self._roll(max(first_offset, local.log_end_offset))
                # All or nothing: a failed append leaves the segment as it was
                # (LogSegment.append undoes its writes), and nothing below runs.
                local.append(chunks, entries, size, last_offset, record_count)
            except StorageError as exc:
                self._on_write_error(exc, "append to", undone=True)
                raise
            if producer_batches:
                self._producer_state.update(producer_batches)
            needs_flush = local.unflushed_messages >= config.flush_messages
            if not needs_flush:
                self._high_watermark = local.log_end_offset
            # else consumers see the batch once the flush (here, or the caller's
            # with defer_flush) has made it durable: a failed flush leaves it
            # unseen (Kafka advances the high watermark after the append returns).
            # Positional, in AppendInfo's field order: one is built per append.
            info = AppendInfo(
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max_timestamp,
                log_append_time,
                self._log_start_offset,
                record_count,
                size,
                False,
                needs_flush and defer_flush,
            )
        if needs_flush and not defer_flush:
            self.flush(info.last_offset + 1)
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Write a COMMIT or ABORT control batch ending ``producer_id``'s transaction.

        An abort adds the transaction to the ``.txnindex`` of the segment the
        marker lands in. The caller flushes (the coordinator does before it
        answers EndTxn). Raises InvalidProducerEpochError for an epoch older
        than the producer's, TransactionCoordinatorFencedError for a
        coordinator epoch older than the producer's last marker's.
        """
        now = _now_ms(self._clock) if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            local = self._local
            state = self._producer_state
            state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            offset = local.log_end_offset
            data = control.build_marker(
                producer_id,
                producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
                timestamp=now,
                base_offset=offset,
            )
            segment = self._maybe_roll(len(data), now, offset, offset, now)
            entry = EntryInfo(0, len(data), 2, offset, offset, now, 1)
            local.append([data], [entry], len(data), offset, 1)
            completed = state.complete_txn(
                producer_id,
                producer_epoch,
                offset,
                now,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
            )
            if completed is not None and completed.is_aborted:
                local.index_aborted(segment, completed, state.last_stable_offset_after(completed))
            if self._high_watermark == offset:
                # Else earlier appends wait for their flush to be seen (defer_flush),
                # and the marker with them: the flush moves the HW past both.
                self._high_watermark = local.log_end_offset
            return AppendInfo(
                first_offset=offset,
                last_offset=offset,
                max_timestamp=now,
                offset_of_max_timestamp=offset,
                log_append_time=batch.NO_TIMESTAMP,
                log_start_offset=self._log_start_offset,
                record_count=1,
                size=len(data),
            )

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the first offset of the oldest open transaction, at most the HW.

        Never below the log start offset: retention or DeleteRecords may have
        removed the start of an open transaction (Kafka moves the first
        unstable offset up the same way).
        """
        first = self._producer_state.first_unstable_offset()
        hw = self._high_watermark
        return hw if first is None else max(min(first, hw), self._log_start_offset)

    def aborted_transactions(
        self, fetch_offset: int, upper_bound: int
    ) -> list[txn_index.AbortedTxn]:
        """Aborted transactions overlapping [``fetch_offset``, ``upper_bound``), by first offset.

        Read from the ``.txnindex`` of the segment holding ``fetch_offset`` and
        every later one (a transaction's marker follows its data).
        """
        return self._local.aborted_transactions(fetch_offset, upper_bound)

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now: int
    ) -> LogSegment:
        local = self._local
        if local.should_roll(size, max_timestamp, last_offset, now):
            return self._roll(max(first_offset, local.log_end_offset))
        return local.segments[-1]

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            try:
                return self._roll(self._local.log_end_offset)
            except StorageError as exc:
                self._on_write_error(exc, "roll", undone=True)
                raise

    def _roll(self, new_base: int) -> LogSegment:
        local = self._local
        active = local.segments[-1]
        new_segment = local.roll(new_base)
        if new_segment is active:
            return active
        # Kafka's rule: a producer snapshot named after the new segment, so that
        # a restart replays at most the active segment. Written here, fsynced by
        # the next flush that reaches it (as Kafka does, off the append path): a
        # snapshot lost in a crash only means replaying from an older one.
        self._producer_state.take_snapshot(new_base)
        logger.debug("rolled %s to a new segment at offset %d", self.directory.name, new_base)
        return new_segment

    # ----------------------------------------------------------------- flush

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: the LEO).

        Advances the recovery point. Concurrent callers share one fsync.
        """
        local = self._local
        target = local.log_end_offset if offset is None else offset
        with self._flush_lock:
            # After a failed fsync a successful one proves nothing (the kernel
            # may have dropped the failed pages): the recovery point stays put.
            self._offline.check()
            try:
                # Producer snapshots taken at roll, even when the data is flushed already.
                synced_snapshots = self._producer_state.sync_snapshots(target)
                local.sync_txn_indexes()
                if target <= local.recovery_point:
                    if synced_snapshots:
                        self._env.fsync_dir(self.directory)
                    return
                end = local.log_end_offset
                # A snapshot written since the last flush needs its name durable too.
                local.flush(target, sync_dir=bool(synced_snapshots))
            except StorageError as exc:
                self._on_write_error(exc, "flush")
                raise
            with self._lock:
                local.mark_flushed(min(end, target), _now_ms(self._clock))
                self._high_watermark = max(self._high_watermark, local.recovery_point)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush; True if it flushed."""
        now = _now_ms(self._clock) if now_ms is None else now_ms
        if self._local.flush_due(now):
            self.flush()
            return True
        return False

    # ------------------------------------------------------------------ read

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> LogReadResult:
        """Read from ``start_offset``: a file region of at most ``max_bytes``.

        Reads stop at the high watermark (or ``max_offset`` when given). Raises
        :class:`OffsetOutOfRangeError` outside [log start, LEO].
        """
        local = self._local
        segments, bases = local.segments, local.bases
        end_offset = local.log_end_offset
        hw = self._high_watermark
        log_start = self._log_start_offset
        limit_offset = hw if max_offset is None else min(max_offset, end_offset)
        if start_offset > end_offset or start_offset < log_start:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range for {self.directory.name}: "
                f"valid offsets are {log_start}..{end_offset}"
            )
        if start_offset >= limit_offset:
            return LogReadResult(None, hw, log_start, end_offset)
        data = read_from(
            segments,
            bases,
            start_offset,
            max_bytes,
            None if limit_offset >= end_offset else limit_offset,
            min_one_message,
        )
        return LogReadResult(data, hw, log_start, end_offset)

    def find_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets lookup: -2 earliest, -1 latest, -3 max timestamp, else by time.

        By time, the answer is the first record whose timestamp is at least
        ``timestamp``; None when there is none below the high watermark.
        """
        segments = self._local.segments
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(batch.NO_TIMESTAMP, self._log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(batch.NO_TIMESTAMP, self._high_watermark)
        if timestamp == MAX_TIMESTAMP:
            return max_timestamp_record(segments)
        found = first_at_or_after(segments, timestamp, self._log_start_offset)
        if found is not None and found.offset >= self._high_watermark:
            return None
        return found

    # ---------------------------------------------------------- key lookups

    def find(
        self,
        key: bytes,
        *,
        limit: int | None = None,
        start_offset: int | None = None,
        end_offset: int | None = None,
        from_ms: int | None = None,
        to_ms: int | None = None,
        isolation: Isolation = "read_uncommitted",
    ) -> list[FoundRecord]:
        """The records with ``key``, newest first, at most ``limit`` (None: all).

        Offsets in ``[start_offset, end_offset)`` and timestamps in
        ``[from_ms, to_ms]`` (each optional), never below the log start offset
        nor at or above the high watermark (``read_uncommitted``) or the last
        stable offset (``read_committed``, which also skips the records of
        aborted transactions). Raises :class:`~seglog.errors.KeyIndexDisabledError` when the
        topic keeps no key index (``key.index.enable=false``): a scan of the
        whole partition would answer, but at a cost the caller did not ask
        for. Segments whose index is not built yet are indexed on demand.
        """
        if not self._local.config.key_index_enable:
            raise KeyIndexDisabledError(
                f"{self._name} keeps no key index: set key.index.enable=true on topic "
                f"{self.topic} to look records up by key"
            )
        # A segment replaced while looked at (the cleaner's swap, a split) has
        # its records in the segments that replaced it: the lookup starts over
        # on the new list. Each retry follows a change of the list, so it ends.
        while True:
            segments = self._local.segments
            found = self._find_in(
                segments, key, limit, start_offset, end_offset, from_ms, to_ms, isolation
            )
            if found is not None:
                return found
            with self._lock:
                # Under the lock a replacement under way has finished: the list
                # must have changed, else the error was not a removal.
                unchanged = self._local.segments is segments
            if unchanged:
                raise StorageError(
                    f"{self._name}: a segment vanished but the segment list did not change"
                )

    def _find_in(
        self,
        segments: Sequence[LogSegment],
        key: bytes,
        limit: int | None,
        start_offset: int | None,
        end_offset: int | None,
        from_ms: int | None,
        to_ms: int | None,
        isolation: Isolation,
    ) -> list[FoundRecord] | None:
        """:meth:`find` over ``segments``; None when one of them was removed meanwhile."""
        lower = self._log_start_offset
        upper = self._high_watermark if isolation == "read_uncommitted" else self.last_stable_offset
        if start_offset is not None:
            lower = max(lower, start_offset)
        if end_offset is not None:
            upper = min(upper, end_offset)
        aborted: dict[int, list[tuple[int, int]]] = {}
        if isolation == "read_committed" and lower < upper:
            for txn in self._local.aborted_transactions(lower, upper):
                aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        found: list[FoundRecord] = []
        for i in range(len(segments) - 1, -1, -1):
            if limit is not None and len(found) >= limit:
                break
            segment = segments[i]
            segment_end = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if segment_end is not None and segment_end <= lower:
                break  # this one and every older one lie below the range
            if segment.base_offset >= upper:
                continue
            want = None if limit is None else limit - len(found)
            try:
                records = segment.find_key(
                    key,
                    limit=None if aborted else want,
                    start_offset=lower,
                    end_offset=upper,
                    from_ms=from_ms,
                    to_ms=to_ms,
                )
            except (StorageError, CorruptRecordError):
                if not segment.suffix:
                    raise
                return None
            if segment.suffix:
                # Removed while looked at (retention, compaction; it is renamed
                # before its files go): below the log start offset now, or its
                # records live in a segment that replaced it, and what was read
                # may be cut short. The caller looks again over the new list.
                return None
            if records is None:
                continue  # turned off under us: the next lookup refuses
            for record in records:
                if (
                    aborted
                    and record.transactional
                    and _in_spans(aborted.get(record.producer_id), record.offset)
                ):
                    continue
                found.append(record)
                if limit is not None and len(found) >= limit:
                    break
        return [dataclasses.replace(r, topic=self.topic, partition=self.partition) for r in found]

    def index_keys(self) -> int:
        """What the background indexer does for this log, here and now.

        Catches up the active segment's key index, writes those of rolled
        segments and builds the missing ones; returns the segments it read or
        wrote. A segment that cannot be indexed (an I/O error) is logged and
        left for the next pass: key indexes never take a partition offline.
        """
        if not self._local.config.key_index_enable:
            return 0
        worked = 0
        for segment in self._local.segments:
            if self._closed:
                break
            try:
                worked += segment.seal_key_index()
            except StorageError as exc:
                if not segment.suffix:  # not merely removed while indexed
                    logger.warning("cannot index the keys of %s: %s", segment.log_path, exc)
        return worked

    def key_index_pending_bytes(self) -> int:
        """Log bytes of this partition its key indexes do not cover yet (0 when off)."""
        if not self._local.config.key_index_enable:
            return 0
        return sum(s.key_index_pending_bytes() for s in self._local.segments)

    # ------------------------------------------------- truncation and removal

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or after ``offset``; True if anything was removed."""
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            local = self._local
            if offset >= local.log_end_offset:
                return False
            if offset < local.segments[0].base_offset:
                self._truncate_fully(offset)
                return True
            local.truncate_to(offset)
            end = local.log_end_offset
            self._high_watermark = min(self._high_watermark, end)
            self._log_start_offset = min(self._log_start_offset, end)
            self._rebuild_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start an empty log at ``offset``."""
        with self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._local.truncate_fully(offset)
        self._high_watermark = offset
        self._log_start_offset = offset
        # Nothing of the old log is left for a snapshot to describe.
        self._producer_state.delete_snapshots_outside(offset + 1, offset)
        self._producer_state.clear()

    def increment_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (at most the HW).

        Returns the new log start offset. Whole segments below it are removed by
        the next retention pass (:func:`seglog.storage.retention.delete_old_segments`).
        """
        with self._lock:
            self._check_open()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records up to {offset} in {self.directory.name}: "
                    f"the high watermark is {self._high_watermark}"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
            return self._log_start_offset

    def delete_segments_prefix(self, count: int, reason: str) -> int:
        """Remove the ``count`` oldest segments; rolls first if that would take them all.

        The log start offset moves to the base of the first remaining segment.
        Returns the number removed.
        """
        with self._lock:
            self._check_open()
            if count <= 0:
                return 0
            local = self._local
            if count >= len(local.segments):
                if local.segments[-1].is_empty:
                    count = len(local.segments) - 1
                else:
                    self._roll(local.log_end_offset)
            if count <= 0:
                return 0
            first_kept = local.segments[count].base_offset
            self._log_start_offset = max(self._log_start_offset, first_kept)
            removed = len(local.delete_oldest(count))
            # Snapshots go with the segments they were taken for.
            self._producer_state.delete_snapshots_outside(first_kept, local.log_end_offset)
            logger.info(
                "deleted %d segment(s) of %s (%s); log start offset is now %d",
                removed,
                self.directory.name,
                reason,
                self._log_start_offset,
            )
            return removed

    def replace_segments(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        *,
        removed_markers: Collection[int] = (),
    ) -> None:
        """Swap cleaned segments (suffix ``.cleaned``) in for ``old_segments``, crash-safely.

        See :meth:`LocalLog.replace_segments <seglog.storage.local_log.LocalLog.replace_segments>`
        for the order of renames; ``removed_markers`` are the offsets of the
        transaction markers the cleaning dropped.
        """
        with self._lock:
            self._check_open()
            self._local.replace_segments(new_segments, old_segments, removed_markers)

    # -------------------------------------------------------- producer state

    def _rebuild_producer_state(self) -> None:
        recovery.rebuild_producer_state(
            self._producer_state, self._local, self._log_start_offset, _now_ms(self._clock)
        )

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers' state of this partition (read it under no lock)."""
        return self._producer_state

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        now = _now_ms(self._clock) if now_ms is None else now_ms
        with self._lock:
            return self._producer_state.remove_expired(now)

    # ------------------------------------------------------------- lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the log {self.directory.name} is closed")
        self._offline.check()

    @property
    def offline_reason(self) -> str | None:
        """Why the log refuses writes after an I/O error; None while it takes them."""
        return self._offline.reason

    def take_offline(self, reason: str) -> None:
        """Refuse every write from now on (reads go on) until a restart recovers the log."""
        self._offline.take_offline(reason)

    def _on_write_error(self, exc: StorageError, action: str, *, undone: bool = False) -> None:
        """Take the log offline if ``exc`` may have left data in doubt (see
        :meth:`seglog.storage.offline.OfflineState.on_write_error`)."""
        whole = self._local.active_is_whole
        self._offline.on_write_error(exc, action, undone=undone, is_whole=whole)

    def close(self) -> None:
        """Flush and close every segment (a clean shutdown of this partition).

        An offline log is closed without a flush or a snapshot, as Kafka
        closes the handlers of a failed log directory: its next start recovers it.
        """
        with self._lock:
            if self._closed:
                return
            failure: BaseException | None = None
            if self._offline.reason is None:
                try:
                    self.flush()
                    self._producer_state.take_snapshot(self._local.log_end_offset, sync=True)
                except StorageError as exc:
                    self._on_write_error(exc, "close")
                    failure = exc
            else:
                self._local.write_back_unflushed()
            self._closed = True
            closing = self._local.close()
            failure = failure or closing
            if failure is not None:
                raise failure

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`delete`."""
        return self._closed

    def delete(self) -> None:
        """Close the log and remove its files (the directory is left to the caller)."""
        with self._lock:
            self._closed = True
            self._local.delete()

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._local.log_end_offset}, segments={len(self._local.segments)})"
        )


def _in_spans(spans: list[tuple[int, int]] | None, offset: int) -> bool:
    return spans is not None and any(first <= offset <= last for first, last in spans)


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "Isolation",
    "Log",
    "LogReadResult",
]
