"""A log directory's background work: retention, delayed deletion, flush.ms, checkpoints,
key indexes.

Kafka's ``LogManager`` schedules the same duties, each at its own interval:
retention (``log.retention.check.interval.ms``), the flush of partitions
whose ``flush.ms`` has passed, the unlinking of ``.deleted`` segments once
``file.delete.delay.ms`` has passed, the expiration of idle producer ids
(``producer.id.expiration.check.interval.ms``) and the offset checkpoints
(``log.flush.offset.checkpoint.interval.ms``).

:meth:`Maintenance.run` is one pass of whichever are due; a caller may run it
on its own schedule (tests do, with their own clock), or :meth:`Maintenance.start`
runs it on a thread, with the compaction cleaner on another and the key
indexer (:class:`KeyIndexer`) on a third.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from seglog.errors import StorageError
from seglog.storage import retention
from seglog.storage._dir_state import DirState
from seglog.storage.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass(order=True)
class _PendingDeletion:
    due_ms: int
    sequence: int
    segments: Sequence[LogSegment] = field(compare=False)


class PendingDeletions:
    """Segments renamed ``.deleted`` that wait for ``file.delete.delay.ms`` to be unlinked.

    Readers that were handed one of their regions may still be sending it: the
    delay lets them finish, as Kafka's does.
    """

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self._pending: list[_PendingDeletion] = []
        self._lock = threading.Lock()
        self._sequence = itertools.count()

    def schedule(self, segments: Sequence[LogSegment], delay_ms: int) -> None:
        """Unlink ``segments`` once ``delay_ms`` has passed (at once when it is not positive)."""
        due = int(self._clock() * 1000) + delay_ms
        with self._lock:
            heapq.heappush(self._pending, _PendingDeletion(due, next(self._sequence), segments))
        if delay_ms <= 0:
            self.run()

    def run(self, now_ms: int | None = None) -> int:
        """Unlink ``.deleted`` segments whose delay has passed; returns how many."""
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        due: list[_PendingDeletion] = []
        with self._lock:
            while self._pending and self._pending[0].due_ms <= now:
                due.append(heapq.heappop(self._pending))
        count = 0
        for item in due:
            for segment in item.segments:
                try:
                    segment.delete()
                    count += 1
                except StorageError as exc:
                    logger.error("cannot delete %s: %s", segment.log_path, exc)
        return count


class KeyIndexProgress(NamedTuple):
    """How far one partition's key indexes are: segments and log bytes covered, of all."""

    segments_done: int
    segments: int
    bytes_done: int
    bytes: int


#: A pass that found at least this much to index is followed at once by the next.
CONTINUOUS_PASS_BYTES = 1 << 20


class KeyIndexer:
    """Keeps the key indexes of ``key.index.enable`` topics up to date, off the append path.

    Each pass catches up the active segments' in-memory indexes, writes those
    of rolled segments, and builds the missing ones (a topic whose config was
    just turned on, segments recovery rebuilt): the compiled build loop
    releases the GIL, so it runs beside the appends on another core. A
    partition with bytes left logs its progress after every segment built.
    """

    def __init__(self, state: DirState) -> None:
        self._state = state
        self._progress: dict[tuple[str, int], KeyIndexProgress] = {}
        self._wake = threading.Event()
        # Log bytes the last pass found to index: the next pass starts at once
        # when they were many.
        self._last_pass_bytes = 0

    def wake(self) -> None:
        """Run the next pass now rather than at the next tick (a config was turned on)."""
        self._wake.set()

    def progress(self) -> dict[tuple[str, int], KeyIndexProgress]:
        """The progress of every indexed partition at the end of the last pass."""
        return dict(self._progress)

    def remaining_bytes(self) -> int:
        """Log bytes not covered by a key index yet, over every indexed partition, as now."""
        total = 0
        for log in list(self._state.logs.values()):
            if not log.closed:
                total += log.key_index_pending_bytes()
        return total

    def run(self, stop: threading.Event | None = None) -> int:
        """One pass over every partition; returns the segments it indexed or wrote."""
        worked = 0
        pass_bytes = 0
        progress: dict[tuple[str, int], KeyIndexProgress] = {}
        for key, log in sorted(self._state.logs.items()):
            if stop is not None and stop.is_set():
                break
            if log.closed or log.offline_reason is not None or not log.config.key_index_enable:
                continue
            segments = log.segments
            total_bytes = sum(s.size for s in segments)
            pending = sum(s.key_index_pending_bytes() for s in segments)
            pass_bytes += pending
            done_segments = sum(1 for s in segments if s.key_index_pending_bytes() == 0)
            built = False
            last_logged = (-1, -1)
            for segment in segments:
                if (stop is not None and stop.is_set()) or log.closed:
                    break
                before = segment.key_index_pending_bytes()
                try:
                    changed = segment.seal_key_index()
                except StorageError as exc:
                    if not segment.suffix:  # not merely removed while indexed
                        logger.warning("cannot index the keys of %s: %s", segment.log_path, exc)
                    continue
                if not changed:
                    continue
                worked += 1
                if before > 0 and segment is not segments[-1]:
                    # A whole segment built (not the active one's catch-up): progress.
                    pending -= before
                    done_segments += 1
                    built = True
                    last_logged = (done_segments, total_bytes - pending)
                    logger.info(
                        "key index of %s-%d: %d of %d segments, %d of %d bytes indexed",
                        key[0],
                        key[1],
                        done_segments,
                        len(segments),
                        total_bytes - pending,
                        total_bytes,
                    )
            segments = log.segments
            sizes = [(s.size, s.key_index_pending_bytes()) for s in segments]
            progress[key] = now = KeyIndexProgress(
                sum(1 for _, left in sizes if left == 0),
                len(sizes),
                sum(size - left for size, left in sizes),
                sum(size for size, _ in sizes),
            )
            if built and (now.segments_done, now.bytes_done) != last_logged:
                logger.info(
                    "key index of %s-%d: %d of %d segments, %d of %d bytes indexed",
                    key[0],
                    key[1],
                    now.segments_done,
                    now.segments,
                    now.bytes_done,
                    now.bytes,
                )
        self._progress = progress
        self._last_pass_bytes = pass_bytes
        return worked

    def start(self, stop: threading.Event, tick_seconds: float) -> threading.Thread:
        """Run :meth:`run` on a thread every ``tick_seconds`` (sooner when woken) until ``stop``."""

        def loop() -> None:
            while not stop.is_set():
                # While appends keep coming fast, index them as they come (on
                # this core, the kernel releases the GIL) rather than a tick's
                # worth at a time; a trickle waits for the tick.
                if self._last_pass_bytes < CONTINUOUS_PASS_BYTES:
                    self._wake.wait(tick_seconds)
                self._wake.clear()
                if stop.is_set():
                    return
                try:
                    self.run(stop)
                except Exception:
                    logger.exception("key indexing failed")

        thread = threading.Thread(target=loop, name="seglog-key-indexer", daemon=True)
        thread.start()
        return thread


class Maintenance:
    """The background duties of one log directory (see the module docstring)."""

    def __init__(
        self, state: DirState, deletions: PendingDeletions, checkpoint: Callable[[], None]
    ) -> None:
        self._state = state
        self._deletions = deletions
        self._checkpoint = checkpoint
        self._last_run: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: The key indexer: on its own thread once started, else run by each pass.
        self.key_indexer = KeyIndexer(state)

    def _now(self, now_ms: int | None) -> int:
        return int(self._state.clock() * 1000) if now_ms is None else now_ms

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply every partition's retention rules; returns segments removed."""
        now = self._now(now_ms)
        removed = 0
        for log in list(self._state.logs.values()):
            if not log.closed and log.offline_reason is None:
                removed += retention.delete_old_segments(log, now)
        return removed

    def run(self, now_ms: int | None = None) -> None:
        """One pass of every background duty whose interval has passed."""
        now = self._now(now_ms)
        settings = self._state.settings
        if self._due("retention", now, settings.log_retention_check_interval_ms):
            self.run_retention(now)
        for log in list(self._state.logs.values()):
            if not log.closed and log.offline_reason is None:
                log.flush_if_due(now)
        self._deletions.run(now)
        if self._due("producer-expiration", now, settings.producer_id_expiration_check_interval_ms):
            for log in list(self._state.logs.values()):
                if not log.closed:
                    log.remove_expired_producers(now)
        if self._due("checkpoint", now, settings.log_flush_offset_checkpoint_interval_ms):
            self._checkpoint()
        if not self._threads:
            # Driven pass by pass (tests, tools): the key indexes are kept here.
            self.key_indexer.run()

    def _due(self, task: str, now: int, interval: int) -> bool:
        last = self._last_run.get(task)
        if last is None:
            self._last_run[task] = now
            return False
        if now - last >= interval:
            self._last_run[task] = now
            return True
        return False

    @property
    def started(self) -> bool:
        """Whether :meth:`start` has run."""
        return bool(self._threads)

    def start(self, tick_seconds: float, cleaner: Any = None) -> None:
        """Run :meth:`run` on a thread every ``tick_seconds``, and ``cleaner`` on its own."""

        def loop() -> None:
            while not self._stop.wait(tick_seconds):
                try:
                    self.run()
                except Exception:
                    logger.exception("log maintenance failed")

        thread = threading.Thread(target=loop, name="seglog-maintenance", daemon=True)
        thread.start()
        self._threads.append(thread)
        self._threads.append(self.key_indexer.start(self._stop, tick_seconds))
        if cleaner is not None:
            self._threads.append(cleaner.start(self._stop))

    def stop(self) -> None:
        """Stop the threads and wait for them (each for at most 30 s)."""
        self._stop.set()
        self.key_indexer.wake()
        for thread in self._threads:
            thread.join(timeout=30)
