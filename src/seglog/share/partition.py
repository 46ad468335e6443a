"""One share-partition's state machine: which records are in flight, and with whom.

Theory of operation
-------------------

A share group reads a topic partition together. The share-partition keeps
the *in-flight window* ``[start_offset, end_offset)``: every offset below
``start_offset`` is done (acknowledged or archived) and every offset at or
above ``end_offset`` has never been handed out. Inside the window each offset
has a delivery state, a delivery count, and while it is ACQUIRED an owning
member and an acquisition lock.

The window is kept as sorted, non-overlapping *runs* of offsets that tile it
exactly (no holes), found by :mod:`bisect` over their first offsets. A run
stands for a whole range, so 500 records acquired together are one object;
a run splits only where an operation cuts it (an acknowledgement of part of
it, a release, an acquisition of part of an available run). The runs that
lead the window and are ACKNOWLEDGED or ARCHIVED leave it: ``start_offset``
moves past them after every change.

Transitions (Kafka's ``RecordState`` numbers; *limit* is the group's
``share.delivery.count.limit``)::

    from          input                         to            delivery count
    ------------  ----------------------------  ------------  --------------
    (new)         acquire                       ACQUIRED      1
    (new)         acquire, skip batch or hole   ARCHIVED      0
    AVAILABLE     acquire, count < limit        ACQUIRED      +1
    AVAILABLE     acquire, count >= limit       ARCHIVED      = (dead letter)
    AVAILABLE     acquire, skip batch or hole   ARCHIVED      =
    ACQUIRED      ack GAP                       ARCHIVED      =
    ACQUIRED      ack ACCEPT                    ACKNOWLEDGED  =
    ACQUIRED      ack RELEASE, count < limit    AVAILABLE     =
    ACQUIRED      ack RELEASE, count >= limit   ARCHIVED      = (dead letter)
    ACQUIRED      ack REJECT                    ARCHIVED      = (dead letter)
    ACQUIRED      lock expired, count < limit   AVAILABLE     =
    ACQUIRED      lock expired, count >= limit  ARCHIVED      = (dead letter)
    ACQUIRED      member released               AVAILABLE     -1
    any           log start moved past it       ARCHIVED      =

ACKNOWLEDGED and ARCHIVED are final. A *hole* is an offset inside the fetched
range that no fetched batch holds (compacted away, or below the log start).

Acquisition follows Kafka's batch-optimised rule: first the AVAILABLE runs the
fetched batches cover, then new batches from ``end_offset``, always whole
batches (so it may hand out more than ``max_records`` to finish one), and new
batches only while the window is smaller than ``share.partition.max.record.locks``.
Each acquire call starts one lock timer for everything it acquired; when it
fires, what is still ACQUIRED under it becomes AVAILABLE again (or ARCHIVED
at the limit) and ``on_change`` tells the broker.

Persistence: like Kafka, the ACQUIRED state is never written. Every run whose
persisted view changed is marked dirty; :meth:`SharePartition.take_update`
hands out the dirty runs as they would be persisted (an ACQUIRED run as the
AVAILABLE state it was acquired from) with the new start offset. A
share-partition built from the folded :class:`~seglog.share.state.PersistedState`
therefore shows the same picture, except that records acquired at the time
are AVAILABLE again; offsets between the persisted runs (acquired, never
settled) come back as AVAILABLE with delivery count 0, as Kafka's read gap.

Everything runs on the caller's thread; clock and timers are injected.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seglog.coordinator.requests import Cancellable
from seglog.share.state import (
    AcknowledgeType,
    PersistedState,
    RecordState,
    SharePartitionKey,
    StateBatch,
    StateUpdate,
    merge_adjacent,
)

__all__ = [
    "AckBatch",
    "AcquiredRange",
    "ArchivedRange",
    "FetchedBatch",
    "PartitionSummary",
    "SharePartition",
    "ShareSettings",
]

REJECTED = "rejected"
"""The reason of an archived range a consumer rejected."""
DELIVERY_COUNT_LIMIT = "delivery_count_limit"
"""The reason of an archived range delivered ``share.delivery.count.limit`` times."""

_AVAILABLE = RecordState.AVAILABLE
_ACQUIRED = RecordState.ACQUIRED
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_ARCHIVED = RecordState.ARCHIVED
_FINAL = (_ACKNOWLEDGED, _ARCHIVED)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The group's settings the share-partition obeys, read again on every call."""

    record_lock_duration_ms: int
    """``share.record.lock.duration.ms``: how long a member holds what it acquired."""
    delivery_count_limit: int
    """``share.delivery.count.limit``: deliveries before a record is archived."""
    max_record_locks: int
    """``share.partition.max.record.locks``: the most offsets in flight at once."""


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """One batch header read from the log, in offset order."""

    base_offset: int
    last_offset: int
    skip: bool
    """A control batch, or (read_committed) an aborted one: never delivered, archived at once."""


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """One entry of ShareFetch's ``acquired_records``."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One acknowledgement batch of a ShareFetch or ShareAcknowledge request."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]
    """One acknowledge type for the whole range, or one per offset."""


@dataclass(frozen=True, slots=True)
class ArchivedRange:
    """Records archived as undeliverable, for the dead-letter topic."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: str
    """:data:`REJECTED` or :data:`DELIVERY_COUNT_LIMIT`."""


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """Counts of the in-flight window by state, for describe and metrics."""

    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    available: int
    acknowledged: int
    archived: int


class _Lock:
    """One acquire call's acquisition lock: its timer and how many records it still holds."""

    __slots__ = ("first", "held", "last", "timer")

    def __init__(self, first: int) -> None:
        self.first = first
        self.last = first - 1
        #: Records still ACQUIRED under this lock; the timer is cancelled at 0.
        self.held = 0
        self.timer: Cancellable | None = None


class _Run:
    """Offsets ``first..last`` sharing one state, delivery count, owner and lock."""

    __slots__ = ("count", "dirty", "first", "last", "lock", "member", "state")

    def __init__(
        self,
        first: int,
        last: int,
        state: RecordState,
        count: int,
        member: str | None = None,
        lock: _Lock | None = None,
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.lock = lock
        #: The persisted view changed since the last take_update.
        self.dirty = False

    def __repr__(self) -> str:
        return f"_Run({self.first}-{self.last} {self.state.name} x{self.count} {self.member})"


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class SharePartition:
    """A share group's in-flight records of one topic partition (see the module docstring).

    ``state`` is what was persisted (its ``start_offset`` must be set: the
    broker initializes the share-partition first). ``settings`` is read on
    every call, so group config changes apply at once. ``schedule(delay_ms,
    callback)`` starts a timer; ``on_change()`` is called after a timer
    changed state: records may be available again and there is an update to
    persist. ``now_ms`` is the clock of the contract; the lock timers do all the
    timing, so nothing reads it yet.
    """

    def __init__(
        self,
        key: SharePartitionKey,
        topic: str,
        state: PersistedState,
        *,
        settings: Callable[[], ShareSettings],
        now_ms: Callable[[], int],
        schedule: Callable[[int, Callable[[], None]], Cancellable],
        on_change: Callable[[], None],
    ) -> None:
        if state.start_offset < 0:
            raise ValueError(f"share-partition {key} has no start offset yet")
        self.key = key
        self.topic = topic
        self._settings = settings
        self._now_ms = now_ms
        self._schedule = schedule
        self._on_change = on_change
        self._leader_epoch = state.leader_epoch
        self._runs: list[_Run] = []
        #: ``_runs[i].first`` for each i, the key bisect searches.
        self._firsts: list[int] = []
        self._start = state.start_offset
        self._end = state.start_offset
        self._persisted_start = state.start_offset
        self._dirty: list[_Run] = []
        self._archived: list[ArchivedRange] = []
        self._locks: set[_Lock] = set()
        self._closed = False
        #: Cumulative record counts: acquired, acknowledged (ACCEPT), released
        #: (RELEASE, lock expiry and member release), rejected, archived (every
        #: record that became ARCHIVED, rejected ones included), redelivered.
        self.counters: dict[str, int] = dict.fromkeys(
            ("acquired", "acknowledged", "released", "rejected", "archived", "redelivered"), 0
        )
        for batch in state.batches:
            if batch.last_offset < self._start:
                continue
            first = max(batch.first_offset, self._start)
            if first > self._end:
                # Offsets between persisted runs were acquired and never settled:
                # they are delivered again, as if new (Kafka's read gap window).
                self._append(_Run(self._end, first - 1, _AVAILABLE, 0))
            # ACQUIRED is never persisted; should it appear, it is available again.
            run_state = _AVAILABLE if batch.delivery_state == _ACQUIRED else batch.delivery_state
            self._append(_Run(first, batch.last_offset, run_state, batch.delivery_count))
        self._advance_start()

    # ------------------------------------------------------------ reading

    @property
    def start_offset(self) -> int:
        """The first offset not yet acknowledged or archived."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The first offset never handed out (one past the in-flight window)."""
        return self._end

    def next_fetch_offset(self) -> int:
        """The lowest AVAILABLE in-flight offset, else ``end_offset``: where to read the log."""
        for run in self._runs:
            if run.state is _AVAILABLE:
                return run.first
        return self._end

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: AVAILABLE records, or room for new ones."""
        if self._end - self._start < self._settings().max_record_locks:
            return True
        return any(run.state is _AVAILABLE for run in self._runs)

    def summary(self) -> PartitionSummary:
        """The window's bounds and its records by state."""
        by_state = dict.fromkeys(RecordState, 0)
        for run in self._runs:
            by_state[run.state] += run.last - run.first + 1
        return PartitionSummary(
            start_offset=self._start,
            end_offset=self._end,
            in_flight=self._end - self._start,
            acquired=by_state[_ACQUIRED],
            available=by_state[_AVAILABLE],
            acknowledged=by_state[_ACKNOWLEDGED],
            archived=by_state[_ARCHIVED],
        )

    def in_flight(self) -> list[StateBatch]:
        """The window as runs of (first, last, state, delivery count), merged where equal.

        For describing and testing; the broker's hot path does not need it.
        """
        return merge_adjacent(StateBatch(r.first, r.last, r.state, r.count) for r in self._runs)

    def check(self) -> list[str]:
        """What is wrong with the internal structure (empty when consistent); for tests."""
        problems: list[str] = []
        expected = self._start
        for index, run in enumerate(self._runs):
            if self._firsts[index] != run.first:
                problems.append(f"index key {self._firsts[index]} for {run}")
            if run.first != expected or run.last < run.first:
                problems.append(f"{run} does not follow {expected - 1}")
            expected = run.last + 1
            if (run.state is _ACQUIRED) != (run.lock is not None and run.member is not None):
                problems.append(f"{run} has a lock/member that does not match its state")
        if expected != self._end:
            problems.append(f"runs end at {expected}, end offset is {self._end}")
        if self._runs and self._runs[0].state in _FINAL:
            problems.append(f"start offset {self._start} not moved past {self._runs[0]}")
        held: dict[_Lock, int] = {}
        for run in self._runs:
            if run.lock is not None:
                held[run.lock] = held.get(run.lock, 0) + run.last - run.first + 1
        for lock in self._locks:
            if held.get(lock, 0) != lock.held:
                problems.append(f"lock holds {lock.held} records, runs say {held.get(lock, 0)}")
        if set(held) - self._locks:
            problems.append("a run refers to a lock no longer kept")
        return problems

    # ------------------------------------------------------------ acquiring

    def acquire(
        self, member_id: str, batches: Sequence[FetchedBatch], max_records: int
    ) -> list[AcquiredRange]:
        """Acquire records of ``batches`` (read from the log at ``next_fetch_offset()``).

        Returns the acquired ranges in offset order, each with its delivery
        count. Whole batches are acquired, so the total may exceed
        ``max_records``; skip batches and holes between batches are archived.
        """
        if self._closed or max_records <= 0 or not batches:
            return []
        settings = self._settings()
        limit = settings.delivery_count_limit
        low = max(batches[0].base_offset, self._start)
        high = batches[-1].last_offset
        if high < low:
            return []
        lock = _Lock(low)
        taken: list[_Run] = []
        budget = [max_records]  # records still wanted, shared by both phases

        # The broker reads from next_fetch_offset(); when the log answers from a
        # later offset, the available records before it no longer exist
        # (compacted away), as Kafka's maybeArchiveStaleBatches assumes.
        fetch_offset = self.next_fetch_offset()
        if fetch_offset < low and fetch_offset < self._end:
            self._archive_range(fetch_offset, min(low, self._end) - 1, only_available=True)

        # Phase 1: available in-flight records the batches cover.
        if low < self._end:
            bases = [batch.base_offset for batch in batches]
            position = low
            for batch in batches:
                if position >= self._end:
                    break
                first = max(batch.base_offset, position)
                last = min(batch.last_offset, self._end - 1)
                if first > position:
                    self._archive_range(position, first - 1, only_available=True)
                if last < first:
                    continue
                if batch.skip:
                    self._archive_range(first, last, only_available=True)
                elif budget[0] > 0:
                    self._acquire_available(
                        member_id, lock, first, last, limit, budget, taken, batches, bases
                    )
                position = last + 1

        # Phase 2: new batches from end_offset, while the window has room.
        if high >= self._end and budget[0] > 0:
            start_index = bisect.bisect_right([b.last_offset for b in batches], self._end - 1)
            for batch in batches[start_index:]:
                position = self._end
                first = max(batch.base_offset, position)
                if budget[0] <= 0 or position - self._start >= settings.max_record_locks:
                    break
                if first > position:
                    # A hole: these offsets are not in the log.
                    self._append_new(_Run(position, first - 1, _ARCHIVED, 0))
                if batch.skip:
                    self._append_new(_Run(first, batch.last_offset, _ARCHIVED, 0))
                    self.counters["archived"] += batch.last_offset - first + 1
                    continue
                run = self._extend_acquired(member_id, lock, first, batch.last_offset)
                if not taken or taken[-1] is not run:
                    taken.append(run)
                budget[0] -= batch.last_offset - first + 1

        if lock.held:
            self._locks.add(lock)
            lock.timer = self._schedule(
                settings.record_lock_duration_ms, lambda: self._lock_expired(lock)
            )
        self._advance_start()
        return _acquired_ranges(taken)

    def _acquire_available(
        self,
        member_id: str,
        lock: _Lock,
        first: int,
        last: int,
        limit: int,
        budget: list[int],
        taken: list[_Run],
        batches: Sequence[FetchedBatch],
        bases: list[int],
    ) -> None:
        """Acquire the AVAILABLE records in ``first..last``, one fetched batch's in-flight part."""
        index = self._index_of(first)
        while index < len(self._runs) and self._runs[index].first <= last:
            run = self._runs[index]
            if run.state is not _AVAILABLE:
                index += 1
                continue
            if budget[0] <= 0:
                return
            piece_first = max(run.first, first)
            piece_last = min(run.last, last)
            wanted_last = piece_first + budget[0] - 1
            if wanted_last < piece_last:
                # Finish the fetched batch the cut falls in, never more.
                batch = batches[bisect.bisect_right(bases, wanted_last) - 1]
                piece_last = min(piece_last, max(batch.last_offset, wanted_last))
            index = self._isolate(index, piece_first, piece_last)
            run = self._runs[index]
            size = run.last - run.first + 1
            if run.count >= limit:
                # Delivered as often as allowed (the limit was lowered, or the
                # count came from persisted state): archive instead.
                self._settle(run, _ARCHIVED, DELIVERY_COUNT_LIMIT)
            else:
                run.state = _ACQUIRED
                run.count += 1
                run.member = member_id
                run.lock = lock
                lock.held += size
                lock.first = min(lock.first, run.first)
                lock.last = max(lock.last, run.last)
                budget[0] -= size
                self.counters["acquired"] += size
                if run.count > 1:
                    self.counters["redelivered"] += size
                taken.append(run)
            index += 1

    def _extend_acquired(self, member_id: str, lock: _Lock, first: int, last: int) -> _Run:
        """Append ``first..last`` as newly ACQUIRED, growing this call's last run if adjacent."""
        size = last - first + 1
        lock.held += size
        lock.first = min(lock.first, first)
        lock.last = max(lock.last, last)
        self.counters["acquired"] += size
        if self._runs:
            tail = self._runs[-1]
            # Only a run this call created from new records (count 1) may grow.
            if tail.lock is lock and tail.count == 1 and tail.last + 1 == first:
                tail.last = last
                self._end = last + 1
                return tail
        run = _Run(first, last, _ACQUIRED, 1, member_id, lock)
        self._append_new(run)
        return run

    def _append_new(self, run: _Run) -> None:
        """Add a run at ``end_offset`` and move the end past it."""
        self._append(run)
        if run.state is _ARCHIVED:
            self._mark(run)

    # ------------------------------------------------------------ acknowledging

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> str | None:
        """Apply acknowledgement batches; the error name, or None when all were applied.

        Every batch is checked before anything changes: a malformed batch is
        INVALID_REQUEST, an offset not ACQUIRED by ``member_id`` is
        INVALID_RECORD_STATE. Offsets below ``start_offset`` are skipped, as
        Kafka does (the log start moved past them while they were acquired).
        """
        if self._closed:
            return "INVALID_RECORD_STATE"
        error = self._validate(member_id, batches)
        if error is not None:
            return error
        limit = self._settings().delivery_count_limit
        for batch in batches:
            if len(batch.types) == 1:
                self._ack_range(
                    max(batch.first_offset, self._start), batch.last_offset, batch.types[0], limit
                )
                continue
            # One type per offset: apply each stretch of equal types at once.
            stretch_first = batch.first_offset
            types = batch.types
            for index in range(1, len(types) + 1):
                if index < len(types) and types[index] == types[index - 1]:
                    continue
                stretch_last = batch.first_offset + index - 1
                if stretch_last >= self._start:
                    self._ack_range(
                        max(stretch_first, self._start), stretch_last, types[index - 1], limit
                    )
                stretch_first = stretch_last + 1
        self._advance_start()
        return None

    def _validate(self, member_id: str, batches: Sequence[AckBatch]) -> str | None:
        previous_last = -1
        for batch in sorted(batches, key=lambda b: b.first_offset):
            first, last = batch.first_offset, batch.last_offset
            if first < 0 or first > last:
                return "INVALID_REQUEST"
            if len(batch.types) not in (1, last - first + 1):
                return "INVALID_REQUEST"
            if any(t not in _ACK_TYPES for t in batch.types):
                return "INVALID_REQUEST"
            if first <= previous_last:
                # The same offset twice: the second would find it no longer acquired.
                return "INVALID_RECORD_STATE"
            previous_last = last
            first = max(first, self._start)
            if last < first:
                continue
            if last >= self._end:
                return "INVALID_RECORD_STATE"
            index = self._index_of(first)
            while index < len(self._runs) and self._runs[index].first <= last:
                run = self._runs[index]
                if run.state is not _ACQUIRED or run.member != member_id:
                    return "INVALID_RECORD_STATE"
                index += 1
        return None

    def _ack_range(self, first: int, last: int, ack_type: int, limit: int) -> None:
        """Settle ``first..last`` (validated: all ACQUIRED by the member) with one type."""
        index = self._index_of(first)
        while index < len(self._runs) and self._runs[index].first <= last:
            index = self._isolate(
                index, max(first, self._runs[index].first), min(last, self._runs[index].last)
            )
            run = self._runs[index]
            size = run.last - run.first + 1
            if ack_type == AcknowledgeType.ACCEPT:
                self._settle(run, _ACKNOWLEDGED, None)
                self.counters["acknowledged"] += size
            elif ack_type == AcknowledgeType.RELEASE:
                self.counters["released"] += size
                if run.count >= limit:
                    self._settle(run, _ARCHIVED, DELIVERY_COUNT_LIMIT)
                else:
                    self._settle(run, _AVAILABLE, None)
            elif ack_type == AcknowledgeType.REJECT:
                self.counters["rejected"] += size
                self._settle(run, _ARCHIVED, REJECTED)
            else:  # GAP: no record at that offset; archived, not dead-lettered
                self._settle(run, _ARCHIVED, None)
            index += 1

    # ------------------------------------------------------------ releasing

    def release_member(self, member_id: str) -> None:
        """Make the member's ACQUIRED records AVAILABLE, their delivery undone (count - 1).

        Kafka does this when the member's share session closes or it leaves the
        group: the records were not processed, so the delivery does not count.
        """
        for run in self._runs:
            if run.state is _ACQUIRED and run.member == member_id:
                self.counters["released"] += run.last - run.first + 1
                self._settle(run, _AVAILABLE, None)
                run.count -= 1
        self._advance_start()

    def _lock_expired(self, lock: _Lock) -> None:
        """The timer of one acquire call fired: what is still ACQUIRED under it is released."""
        if self._closed or lock not in self._locks:
            return
        lock.timer = None
        limit = self._settings().delivery_count_limit
        index = self._index_of(max(lock.first, self._start))
        while lock.held and index < len(self._runs) and self._runs[index].first <= lock.last:
            run = self._runs[index]
            if run.lock is lock:
                self.counters["released"] += run.last - run.first + 1
                if run.count >= limit:
                    self._settle(run, _ARCHIVED, DELIVERY_COUNT_LIMIT)
                else:
                    self._settle(run, _AVAILABLE, None)
            index += 1
        self._locks.discard(lock)
        self._advance_start()
        self._on_change()

    # ------------------------------------------------------------ the log and the group

    def archive_below(self, offset: int) -> None:
        """The log start moved to ``offset`` (retention, DeleteRecords): archive what is below."""
        if offset <= self._start:
            return
        if self._runs:
            self._archive_range(self._start, min(offset, self._end) - 1, only_available=False)
            # Everything below offset is final now: the start moves past it.
            self._advance_start()
        if offset > self._end:
            # The window was all below offset; what lies between was never handed out.
            self._end = offset
        self._start = max(self._start, offset)

    def reset(self, start_offset: int) -> None:
        """Start over at ``start_offset`` with nothing in flight (AlterShareGroupOffsets).

        The group is empty. The next :meth:`take_update` carries only the new
        start offset; a start offset moved backwards must be written as a new
        state (the share coordinator's initialize), since a fold never moves
        the start back.
        """
        for lock in self._locks:
            if lock.timer is not None:
                lock.timer.cancel()
        self._locks.clear()
        for run in self._runs:
            run.dirty = False
        self._runs.clear()
        self._firsts.clear()
        self._dirty.clear()
        self._start = self._end = start_offset
        # Force an update even when the offset is the one last persisted.
        self._persisted_start = -1

    # ------------------------------------------------------------ persisting

    def take_update(self) -> StateUpdate | None:
        """What changed since the last call, to persist; None when nothing did.

        The runs whose persisted view changed, as Kafka persists them: an
        ACQUIRED run as the AVAILABLE state (and count) it was acquired from.
        """
        changed = [run for run in self._dirty if run.dirty]
        self._dirty.clear()
        for run in changed:
            run.dirty = False
        if not changed and self._start == self._persisted_start:
            return None
        changed.sort(key=lambda run: run.first)
        self._persisted_start = self._start
        return StateUpdate(
            start_offset=self._start,
            batches=tuple(merge_adjacent(_persisted_view(run) for run in changed)),
            leader_epoch=self._leader_epoch,
        )

    def take_archived(self) -> list[ArchivedRange]:
        """Records rejected or over the delivery limit since the last call (dead letters)."""
        archived, self._archived = self._archived, []
        return archived

    def close(self) -> None:
        """Cancel every lock timer; the share-partition does nothing more on timers."""
        self._closed = True
        for lock in self._locks:
            if lock.timer is not None:
                lock.timer.cancel()
                lock.timer = None

    # ------------------------------------------------------------ runs

    def _index_of(self, offset: int) -> int:
        """The index of the run holding ``offset`` (or of the first run after it)."""
        index = bisect.bisect_right(self._firsts, offset) - 1
        if index < 0 or self._runs[index].last < offset:
            return index + 1
        return index

    def _split(self, index: int, offset: int) -> None:
        """Cut run ``index`` so that a run starts at ``offset`` (inside it, not at its first)."""
        run = self._runs[index]
        tail = _Run(offset, run.last, run.state, run.count, run.member, run.lock)
        run.last = offset - 1
        self._runs.insert(index + 1, tail)
        self._firsts.insert(index + 1, offset)
        if run.dirty:
            self._mark(tail)

    def _isolate(self, index: int, first: int, last: int) -> int:
        """Split run ``index`` so that ``first..last`` (inside it) is a run; its index."""
        if self._runs[index].first < first:
            self._split(index, first)
            index += 1
        if self._runs[index].last > last:
            self._split(index, last + 1)
        return index

    def _append(self, run: _Run) -> None:
        self._runs.append(run)
        self._firsts.append(run.first)
        self._end = run.last + 1

    def _mark(self, run: _Run) -> None:
        if not run.dirty:
            run.dirty = True
            self._dirty.append(run)

    def _settle(self, run: _Run, state: RecordState, reason: str | None) -> None:
        """Move a whole run to ``state``, freeing its lock; ``reason`` dead-letters it."""
        size = run.last - run.first + 1
        lock = run.lock
        if lock is not None:
            lock.held -= size
            if lock.held == 0:
                # Nothing left under this lock: its timer has nothing to do.
                if lock.timer is not None:
                    lock.timer.cancel()
                    lock.timer = None
                self._locks.discard(lock)
        run.state = state
        run.member = None
        run.lock = None
        self._mark(run)
        if state is _ARCHIVED:
            self.counters["archived"] += size
            if reason is not None:
                self._dead_letter(run, reason)

    def _dead_letter(self, run: _Run, reason: str) -> None:
        if self._archived:
            last = self._archived[-1]
            if (
                last.last_offset + 1 == run.first
                and last.reason == reason
                and last.delivery_count == run.count
            ):
                self._archived[-1] = ArchivedRange(last.first_offset, run.last, run.count, reason)
                return
        self._archived.append(ArchivedRange(run.first, run.last, run.count, reason))

    def _archive_range(self, first: int, last: int, *, only_available: bool) -> None:
        """Archive (without dead-lettering) the in-flight records of ``first..last``."""
        index = self._index_of(first)
        while index < len(self._runs) and self._runs[index].first <= last:
            run = self._runs[index]
            if run.state is _AVAILABLE or (run.state is _ACQUIRED and not only_available):
                index = self._isolate(index, max(first, run.first), min(last, run.last))
                self._settle(self._runs[index], _ARCHIVED, None)
            index += 1

    def _advance_start(self) -> None:
        """Move the start past the leading final runs, which leave the window."""
        count = 0
        for run in self._runs:
            if run.state not in _FINAL:
                break
            run.dirty = False
            count += 1
        if count:
            self._start = self._runs[count - 1].last + 1
            del self._runs[:count]
            del self._firsts[:count]


def _persisted_view(run: _Run) -> StateBatch:
    if run.state is _ACQUIRED:
        return StateBatch(run.first, run.last, _AVAILABLE, run.count - 1)
    return StateBatch(run.first, run.last, run.state, run.count)


def _acquired_ranges(runs: list[_Run]) -> list[AcquiredRange]:
    ranges: list[AcquiredRange] = []
    for run in runs:
        if (
            ranges
            and ranges[-1].last_offset + 1 == run.first
            and (ranges[-1].delivery_count == run.count)
        ):
            ranges[-1] = AcquiredRange(ranges[-1].first_offset, run.last, run.count)
        else:
            ranges.append(AcquiredRange(run.first, run.last, run.count))
    return ranges
