"""The share-partition state machine, driven by hand: a fake clock and the timers it holds.

The share-partition takes its clock and timers injected, so the clock and the
list of pending timers below are the real thing for it, not a stand-in.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from seglog.share.partition import (
    DELIVERY_COUNT_LIMIT,
    REJECTED,
    AckBatch,
    AcquiredRange,
    ArchivedRange,
    FetchedBatch,
    PartitionSummary,
    SharePartition,
    ShareSettings,
)
from seglog.share.state import (
    AcknowledgeType,
    PersistedState,
    RecordState,
    SharePartitionKey,
    StateBatch,
    StateUpdate,
    fold,
)

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)
GAP, ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


@dataclass
class Timer:
    """One pending timer of :class:`Clock`."""

    due_ms: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """The injected clock and scheduler: time moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000
        self.timers: list[Timer] = []

    def now_ms(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.now + delay_ms, callback)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[Timer]:
        return [timer for timer in self.timers if not timer.cancelled]

    def advance(self, ms: int) -> None:
        """Move the clock and fire what fell due, in due order."""
        self.now += ms
        while True:
            due = [t for t in self.pending() if t.due_ms <= self.now]
            if not due:
                return
            timer = min(due, key=lambda t: t.due_ms)
            self.timers.remove(timer)
            timer.callback()


class Harness:
    """A share-partition with its clock, settings and change notifications."""

    def __init__(
        self,
        state: PersistedState | None = None,
        *,
        lock_ms: int = 30_000,
        limit: int = 5,
        locks: int = 200,
    ) -> None:
        self.clock = Clock()
        self.settings = ShareSettings(lock_ms, limit, locks)
        self.changes = 0
        self.partition = SharePartition(
            KEY,
            "t",
            state if state is not None else PersistedState(start_offset=0),
            settings=lambda: self.settings,
            now_ms=self.clock.now_ms,
            schedule=self.clock.schedule,
            on_change=self._changed,
        )

    def _changed(self) -> None:
        self.changes += 1

    def expire(self) -> None:
        self.clock.advance(self.settings.record_lock_duration_ms)


def batches(*spans: tuple[int, int], skip: Iterable[int] = ()) -> list[FetchedBatch]:
    """Fetched batches for inclusive spans; ``skip`` names the spans' indexes to skip."""
    skipped = set(skip)
    return [FetchedBatch(a, b, i in skipped) for i, (a, b) in enumerate(spans)]


def log_of(count: int, size: int, first: int = 0) -> list[FetchedBatch]:
    """``count`` contiguous batches of ``size`` records from ``first``."""
    return [FetchedBatch(first + i * size, first + (i + 1) * size - 1, False) for i in range(count)]


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, types)


def states(partition: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in partition.in_flight()
    ]


def ok(partition: SharePartition) -> None:
    assert partition.check() == []


# ---------------------------------------------------------------- acquire


def test_a_new_partition_acquires_whole_batches_past_max_records() -> None:
    h = Harness()
    p = h.partition
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (0, 0, 0)
    got = p.acquire("m1", batches((0, 9), (10, 19)), max_records=3)
    # The first batch is finished although it holds more than asked; the second is not begun.
    assert got == [AcquiredRange(0, 9, 1)]
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (0, 10, 10)
    assert states(p) == [(0, 9, ACQUIRED, 1)]
    assert p.counters["acquired"] == 10
    ok(p)


def test_consecutive_new_batches_come_back_as_one_range() -> None:
    h = Harness()
    got = h.partition.acquire("m1", log_of(4, 5), max_records=12)
    assert got == [AcquiredRange(0, 14, 1)]
    assert len(h.clock.pending()) == 1  # one lock timer per acquire call
    ok(h.partition)


def test_nothing_is_acquired_for_no_batches_or_no_records_wanted() -> None:
    h = Harness()
    assert h.partition.acquire("m1", [], 10) == []
    assert h.partition.acquire("m1", log_of(1, 5), 0) == []
    assert h.clock.pending() == []
    assert h.partition.end_offset == 0


def test_the_window_stops_at_max_record_locks() -> None:
    h = Harness(locks=10)
    p = h.partition
    assert p.acquire("m1", log_of(4, 5), max_records=100) == [AcquiredRange(0, 9, 1)]
    assert not p.can_acquire()
    assert p.acquire("m2", log_of(2, 5, first=10), max_records=100) == []
    assert p.end_offset == 10
    # Acknowledging the first half makes room for one more batch.
    assert p.acknowledge("m1", [ack(0, 4, ACCEPT)]) is None
    assert p.can_acquire()
    assert p.acquire("m2", log_of(2, 5, first=10), max_records=100) == [AcquiredRange(10, 14, 1)]
    ok(p)


def test_a_batch_larger_than_the_lock_limit_is_still_acquired_whole() -> None:
    # As in Kafka: the limit decides whether to start a batch, never cuts one.
    h = Harness(locks=10)
    assert h.partition.acquire("m1", batches((0, 24)), 5) == [AcquiredRange(0, 24, 1)]
    assert not h.partition.can_acquire()


def test_skip_batches_are_archived_never_acquired() -> None:
    h = Harness()
    p = h.partition
    got = p.acquire("m1", batches((0, 0), (1, 5), (6, 6), (7, 9), skip=[0, 2]), 100)
    assert got == [AcquiredRange(1, 5, 1), AcquiredRange(7, 9, 1)]
    # The leading control batch is final at once: the start moves past it.
    assert p.start_offset == 1
    assert states(p) == [(1, 5, ACQUIRED, 1), (6, 6, ARCHIVED, 0), (7, 9, ACQUIRED, 1)]
    assert p.take_archived() == []  # not dead letters
    ok(p)


def test_holes_between_batches_are_archived() -> None:
    # A compacted log: offsets 5..7 are gone.
    h = Harness()
    p = h.partition
    assert p.acquire("m1", batches((0, 4), (8, 9)), 100) == [
        AcquiredRange(0, 4, 1),
        AcquiredRange(8, 9, 1),
    ]
    assert states(p) == [(0, 4, ACQUIRED, 1), (5, 7, ARCHIVED, 0), (8, 9, ACQUIRED, 1)]
    assert p.acknowledge("m1", [ack(0, 4, ACCEPT)]) is None
    assert p.start_offset == 8
    ok(p)


def test_a_batch_straddling_the_start_is_acquired_from_the_start() -> None:
    h = Harness(PersistedState(start_offset=5))
    got = h.partition.acquire("m1", batches((0, 9), (10, 12)), 100)
    assert got == [AcquiredRange(5, 12, 1)]
    assert h.partition.start_offset == 5
    ok(h.partition)


def test_a_log_starting_past_the_end_skips_the_missing_offsets() -> None:
    h = Harness()
    p = h.partition
    assert p.acquire("m1", batches((20, 29)), 100) == [AcquiredRange(20, 29, 1)]
    assert (p.start_offset, p.end_offset) == (20, 30)
    ok(p)


def test_available_records_are_acquired_again_before_new_ones() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(2, 5), 100)
    assert p.acknowledge("m1", [ack(0, 9, RELEASE)]) is None
    assert p.next_fetch_offset() == 0
    got = p.acquire("m2", log_of(3, 5), 100)
    assert got == [AcquiredRange(0, 9, 2), AcquiredRange(10, 14, 1)]
    assert p.counters["redelivered"] == 10
    assert p.counters["acquired"] == 25
    ok(p)


def test_acquiring_available_records_stops_at_the_batch_holding_the_cut() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(4, 5), 100)
    assert p.acknowledge("m1", [ack(0, 19, RELEASE)]) is None
    # 7 wanted: the cut falls in the second batch (5..9), which is finished.
    assert p.acquire("m2", log_of(4, 5), 7) == [AcquiredRange(0, 9, 2)]
    assert states(p) == [(0, 9, ACQUIRED, 2), (10, 19, AVAILABLE, 1)]
    assert p.next_fetch_offset() == 10
    ok(p)


def test_only_available_records_the_batches_cover_are_acquired() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(2, 5), 100)
    assert p.acknowledge("m1", [ack(2, 7, RELEASE)]) is None
    # The log read from 2 answers the batch 0..4 and then 5..9; 0,1 and 8,9 stay with m1.
    assert p.acquire("m2", log_of(2, 5), 100) == [AcquiredRange(2, 7, 2)]
    assert p.acknowledge("m2", [ack(2, 7, ACCEPT)]) is None
    assert p.acknowledge("m1", [ack(0, 1, ACCEPT), ack(8, 9, ACCEPT)]) is None
    assert p.start_offset == 10
    ok(p)


def test_available_records_in_a_skip_batch_or_hole_are_archived() -> None:
    # After a restart the read gap is AVAILABLE; the log now shows a control
    # batch at 3 and a hole at 6..7 there.
    state = PersistedState(start_offset=0, batches=(StateBatch(8, 9, ACKNOWLEDGED, 1),))
    h = Harness(state)
    p = h.partition
    got = p.acquire("m1", batches((0, 2), (3, 3), (4, 5), (8, 9), skip=[1]), 100)
    assert got == [AcquiredRange(0, 2, 1), AcquiredRange(4, 5, 1)]
    assert states(p) == [
        (0, 2, ACQUIRED, 1),
        (3, 3, ARCHIVED, 0),
        (4, 5, ACQUIRED, 1),
        (6, 7, ARCHIVED, 0),
        (8, 9, ACKNOWLEDGED, 1),
    ]
    ok(p)


def test_available_records_before_what_the_log_answered_are_archived() -> None:
    # Fetched from next_fetch_offset() 0, the log answered from 5: 0..4 were compacted.
    state = PersistedState(start_offset=0, batches=(StateBatch(0, 9, AVAILABLE, 1),))
    h = Harness(state)
    assert h.partition.acquire("m1", batches((5, 9)), 100) == [AcquiredRange(5, 9, 2)]
    assert h.partition.start_offset == 5
    ok(h.partition)


def test_available_records_at_the_delivery_limit_are_archived_not_acquired() -> None:
    # Persisted with count 3; the group's limit is 3 now.
    state = PersistedState(start_offset=0, batches=(StateBatch(0, 4, AVAILABLE, 3),))
    h = Harness(state, limit=3)
    p = h.partition
    assert p.acquire("m1", log_of(2, 5), 100) == [AcquiredRange(5, 9, 1)]
    assert p.start_offset == 5
    assert p.take_archived() == [ArchivedRange(0, 4, 3, DELIVERY_COUNT_LIMIT)]


# ---------------------------------------------------------------- lock expiry


def test_an_expired_lock_makes_the_records_available_and_says_so() -> None:
    h = Harness(lock_ms=1_000)
    p = h.partition
    p.acquire("m1", log_of(2, 5), 100)
    h.clock.advance(999)
    assert h.changes == 0
    assert states(p) == [(0, 9, ACQUIRED, 1)]
    h.clock.advance(1)
    assert h.changes == 1
    assert states(p) == [(0, 9, AVAILABLE, 1)]
    assert p.next_fetch_offset() == 0
    assert p.counters["released"] == 10
    assert p.acknowledge("m1", [ack(0, 9, ACCEPT)]) == "INVALID_RECORD_STATE"
    ok(p)


def test_an_expired_lock_only_touches_what_is_still_acquired_under_it() -> None:
    h = Harness(lock_ms=1_000)
    p = h.partition
    p.acquire("m1", log_of(2, 5), 5)  # lock A: 0..4
    h.clock.advance(500)
    p.acquire("m1", log_of(2, 5, first=5), 5)  # lock B: 5..9
    assert p.acknowledge("m1", [ack(0, 1, ACCEPT), ack(3, 3, REJECT)]) is None
    h.clock.advance(500)  # lock A expires
    assert states(p) == [
        (2, 2, AVAILABLE, 1),
        (3, 3, ARCHIVED, 1),
        (4, 4, AVAILABLE, 1),
        (5, 9, ACQUIRED, 1),
    ]
    assert p.start_offset == 2
    h.clock.advance(500)
    assert states(p)[-1] == (4, 9, AVAILABLE, 1)  # 4 and 5..9 now look alike
    assert h.changes == 2
    ok(p)


def test_a_lock_expiring_at_the_delivery_limit_archives_and_dead_letters() -> None:
    h = Harness(limit=2)
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    h.expire()
    assert p.acquire("m1", log_of(1, 5), 100) == [AcquiredRange(0, 4, 2)]
    h.expire()
    assert p.start_offset == 5
    assert p.next_fetch_offset() == 5
    assert p.take_archived() == [ArchivedRange(0, 4, 2, DELIVERY_COUNT_LIMIT)]
    assert p.take_archived() == []
    assert p.counters["archived"] == 5
    assert h.changes == 2


def test_acknowledging_everything_under_a_lock_cancels_its_timer() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(2, 5), 100)
    (timer,) = h.clock.pending()
    assert p.acknowledge("m1", [ack(0, 4, ACCEPT)]) is None
    assert not timer.cancelled
    assert p.acknowledge("m1", [ack(5, 9, RELEASE)]) is None
    assert timer.cancelled
    h.expire()
    assert h.changes == 0


def test_one_acknowledgement_across_two_acquisitions_frees_both_locks() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.acquire("m1", log_of(1, 5, first=5), 100)
    assert len(h.clock.pending()) == 2
    assert p.acknowledge("m1", [ack(0, 9, ACCEPT)]) is None
    assert h.clock.pending() == []
    assert p.start_offset == 10


def test_a_lowered_delivery_limit_applies_to_the_next_release() -> None:
    h = Harness(limit=5)
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    h.expire()
    p.acquire("m1", log_of(1, 5), 100)
    h.settings = ShareSettings(h.settings.record_lock_duration_ms, 2, h.settings.max_record_locks)
    assert p.acknowledge("m1", [ack(0, 4, RELEASE)]) is None
    assert p.take_archived() == [ArchivedRange(0, 4, 2, DELIVERY_COUNT_LIMIT)]


# ---------------------------------------------------------------- acknowledge


def test_each_acknowledge_type_has_its_state() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(4, 5), 100)
    error = p.acknowledge(
        "m1", [ack(0, 4, GAP), ack(5, 9, ACCEPT), ack(10, 14, RELEASE), ack(15, 19, REJECT)]
    )
    assert error is None
    assert states(p) == [(10, 14, AVAILABLE, 1), (15, 19, ARCHIVED, 1)]
    assert p.start_offset == 10
    assert p.take_archived() == [ArchivedRange(15, 19, 1, REJECTED)]
    assert p.counters == {
        "acquired": 20,
        "acknowledged": 5,
        "released": 5,
        "rejected": 5,
        "archived": 10,
        "redelivered": 0,
    }
    ok(p)


def test_one_type_per_offset_cuts_the_run_where_the_types_change() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 6), 100)
    error = p.acknowledge("m1", [ack(0, 5, ACCEPT, ACCEPT, RELEASE, REJECT, REJECT, ACCEPT)])
    assert error is None
    assert states(p) == [(2, 2, AVAILABLE, 1), (3, 4, ARCHIVED, 1), (5, 5, ACKNOWLEDGED, 1)]
    assert p.take_archived() == [ArchivedRange(3, 4, 1, REJECTED)]
    ok(p)


def test_releasing_at_the_delivery_limit_archives() -> None:
    h = Harness(limit=1)
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    assert p.acknowledge("m1", [ack(0, 4, RELEASE)]) is None
    assert p.start_offset == 5
    assert p.take_archived() == [ArchivedRange(0, 4, 1, DELIVERY_COUNT_LIMIT)]


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        (ack(5, 4, ACCEPT), "INVALID_REQUEST"),
        (ack(0, 4, ACCEPT, ACCEPT), "INVALID_REQUEST"),
        (ack(0, 4), "INVALID_REQUEST"),
        (ack(0, 4, 4), "INVALID_REQUEST"),
        (ack(0, 1, ACCEPT, -1), "INVALID_REQUEST"),
        (ack(8, 12, ACCEPT), "INVALID_RECORD_STATE"),  # past the end
        (ack(10, 12, ACCEPT), "INVALID_RECORD_STATE"),  # never handed out
        (ack(5, 9, ACCEPT), "INVALID_RECORD_STATE"),  # another member's
        (ack(3, 6, ACCEPT), "INVALID_RECORD_STATE"),  # partly another member's
        (ack(0, 0, ACCEPT), "INVALID_RECORD_STATE"),  # released: available, not acquired
    ],
)
def test_a_bad_batch_fails_the_acknowledgement_and_changes_nothing(
    batch: AckBatch, error: str
) -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.acquire("m2", log_of(1, 5, first=5), 100)
    assert p.acknowledge("m1", [ack(0, 0, RELEASE)]) is None
    before = states(p)
    counters = dict(p.counters)
    # A good batch first: it is not applied either.
    assert p.acknowledge("m1", [ack(1, 2, ACCEPT), batch]) == error
    assert states(p) == before
    assert p.counters == counters
    assert len(h.clock.pending()) == 2  # no lock was cancelled
    ok(p)


def test_acknowledging_the_same_offset_twice_in_one_request_fails() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    assert p.acknowledge("m1", [ack(0, 2, ACCEPT), ack(2, 4, REJECT)]) == "INVALID_RECORD_STATE"
    assert states(p) == [(0, 4, ACQUIRED, 1)]


def test_acknowledging_an_acknowledged_record_fails() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    assert p.acknowledge("m1", [ack(1, 1, ACCEPT)]) is None
    assert p.acknowledge("m1", [ack(1, 1, ACCEPT)]) == "INVALID_RECORD_STATE"


# ---------------------------------------------------------------- members, log start, reset


def test_releasing_a_member_undoes_its_deliveries() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.acquire("m2", log_of(1, 5, first=5), 100)
    assert p.acknowledge("m1", [ack(0, 0, ACCEPT)]) is None
    p.release_member("m1")
    assert states(p) == [(1, 4, AVAILABLE, 0), (5, 9, ACQUIRED, 1)]
    assert p.counters["released"] == 4
    # The next delivery of 1..4 is their first again.
    assert p.acquire("m2", log_of(1, 5), 100) == [AcquiredRange(1, 4, 1)]
    assert p.counters["redelivered"] == 0
    p.release_member("nobody")
    ok(p)


def test_releasing_a_member_cancels_its_lock_timers() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.release_member("m1")
    assert h.clock.pending() == []


def test_the_log_start_moving_archives_what_is_below_it() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.acquire("m2", log_of(1, 5, first=5), 100)
    assert p.acknowledge("m2", [ack(5, 9, RELEASE)]) is None
    p.archive_below(7)
    assert (p.start_offset, p.end_offset) == (7, 10)
    assert states(p) == [(7, 9, AVAILABLE, 1)]
    assert p.take_archived() == []  # the data is gone, nothing to dead-letter
    # m1 acknowledging what the log start moved past is not an error.
    assert p.acknowledge("m1", [ack(0, 4, ACCEPT)]) is None
    assert p.counters["acknowledged"] == 0
    assert h.clock.pending() == []  # m1's lock held nothing more
    p.archive_below(3)  # behind the start: nothing
    assert p.start_offset == 7
    p.archive_below(50)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (50, 50, 50)
    ok(p)


def test_an_acknowledgement_reaching_below_the_start_applies_to_the_rest() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 10), 100)
    p.archive_below(4)
    assert p.acknowledge("m1", [ack(0, 9, *([REJECT] * 4 + [ACCEPT] * 6))]) is None
    assert p.start_offset == 10
    assert p.take_archived() == []
    assert p.counters["acknowledged"] == 6


def test_reset_starts_over_with_nothing_in_flight() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(2, 5), 100)
    p.take_update()
    p.reset(3)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (3, 3, 3)
    assert h.clock.pending() == []
    assert p.take_update() == StateUpdate(start_offset=3)
    assert p.acquire("m1", log_of(2, 5), 100) == [AcquiredRange(3, 9, 1)]
    ok(p)


# ---------------------------------------------------------------- persisted state


def test_updates_carry_changed_runs_but_never_the_acquired_state() -> None:
    h = Harness()
    p = h.partition
    assert p.take_update() is None
    p.acquire("m1", log_of(4, 5), 100)
    assert p.take_update() is None  # acquisition is not persisted
    assert p.acknowledge("m1", [ack(5, 9, ACCEPT), ack(10, 14, RELEASE)]) is None
    assert p.take_update() == StateUpdate(
        start_offset=0,
        batches=(StateBatch(5, 9, ACKNOWLEDGED, 1), StateBatch(10, 14, AVAILABLE, 1)),
    )
    assert p.take_update() is None
    assert p.acknowledge("m1", [ack(0, 4, ACCEPT)]) is None
    assert p.take_update() == StateUpdate(start_offset=10)


def test_a_changed_run_acquired_again_is_persisted_as_it_was_acquired_from() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    h.expire()
    p.acquire("m2", log_of(1, 5), 100)
    assert p.take_update() == StateUpdate(0, (StateBatch(0, 4, AVAILABLE, 1),))


def test_a_rebuilt_partition_delivers_what_was_available_and_never_what_was_acknowledged() -> None:
    h = Harness()
    p = h.partition
    state = PersistedState(start_offset=0)
    p.acquire("m1", log_of(6, 5), 100)
    assert p.acknowledge("m1", [ack(5, 9, ACCEPT), ack(10, 14, RELEASE), ack(20, 24, GAP)]) is None
    update = p.take_update()
    assert update is not None
    state = fold(state, update)
    # 0..4, 15..19 and 25..29 were acquired and not settled when the broker stopped.
    again = Harness(state).partition
    assert (again.start_offset, again.end_offset) == (0, 25)
    assert states(again) == [
        (0, 4, AVAILABLE, 0),
        (5, 9, ACKNOWLEDGED, 1),
        (10, 14, AVAILABLE, 1),
        (15, 19, AVAILABLE, 0),
        (20, 24, ARCHIVED, 1),
    ]
    got = again.acquire("m9", log_of(6, 5), 100)
    assert got == [
        AcquiredRange(0, 4, 1),
        AcquiredRange(10, 14, 2),
        AcquiredRange(15, 19, 1),
        AcquiredRange(25, 29, 1),
    ]
    ok(again)


def test_a_partition_is_built_only_from_an_initialized_state() -> None:
    with pytest.raises(ValueError, match="start offset"):
        Harness(PersistedState())


def test_persisted_runs_below_the_start_and_leading_final_runs_are_dropped() -> None:
    state = PersistedState(
        start_offset=5,
        batches=(
            StateBatch(0, 6, ARCHIVED, 1),
            StateBatch(7, 8, ACKNOWLEDGED, 1),
            StateBatch(9, 9, AVAILABLE, 2),
        ),
    )
    h = Harness(state)
    assert (h.partition.start_offset, h.partition.end_offset) == (9, 10)
    assert h.partition.take_update() == StateUpdate(start_offset=9)


# ---------------------------------------------------------------- summary, close, scale


def test_summary_counts_the_window_by_state() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(4, 5), 100)
    assert (
        p.acknowledge("m1", [ack(5, 9, ACCEPT), ack(10, 12, RELEASE), ack(13, 14, REJECT)]) is None
    )
    assert p.summary() == PartitionSummary(
        start_offset=0,
        end_offset=20,
        in_flight=20,
        acquired=10,
        available=3,
        acknowledged=5,
        archived=2,
    )


def test_close_cancels_the_timers_and_stops_acquiring() -> None:
    h = Harness()
    p = h.partition
    p.acquire("m1", log_of(1, 5), 100)
    p.acquire("m1", log_of(1, 5, first=5), 100)
    p.close()
    assert h.clock.pending() == []
    assert p.acquire("m1", log_of(1, 5, first=10), 100) == []
    assert h.changes == 0


def test_many_records_in_batches_stay_a_few_runs() -> None:
    """100,000 records acquired 500 at a time and acknowledged: no per-record objects."""
    h = Harness(locks=2_000)
    p = h.partition
    log = log_of(200, 500)
    widest = 0
    while p.start_offset < 100_000:
        first = p.next_fetch_offset()
        fetched = [b for b in log if b.last_offset >= first][:4]
        got = p.acquire("m1", fetched, 500)
        assert got
        # The in-flight structure grows by runs, not by records.
        widest = max(widest, len(p._runs))  # the structure itself is under test
        assert (
            p.acknowledge("m1", [ack(r.first_offset, r.last_offset, ACCEPT) for r in got]) is None
        )
    assert widest == 1
    assert p.counters["acknowledged"] == 100_000
    assert h.clock.pending() == []
    assert p.take_update() == StateUpdate(start_offset=100_000)
    ok(p)


# ---------------------------------------------------------------- the invariants, at random


MEMBERS = ("a", "b", "c")
LOCK_MS = 100


class SharePartitionMachine(RuleBasedStateMachine):
    """Random acquire/acknowledge/release/expire/restart against a model of who holds what.

    After every step the update is folded into the persisted state, and a
    share-partition rebuilt from it must agree on the start offset and on
    every acknowledged and archived offset; a record once acknowledged is
    never delivered again, and in the end everything is delivered until it is
    acknowledged or archived.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.log: list[FetchedBatch] = []
        self.settings = ShareSettings(LOCK_MS, 3, 20)
        self.persisted = PersistedState(start_offset=0)
        self.partition = self._build(self.persisted)
        #: offset -> (member, when its lock runs out)
        self.acquired: dict[int, tuple[str, int]] = {}
        #: offset -> deliveries that count (the model of the delivery count)
        self.counts: dict[int, int] = {}
        self.accepted: set[int] = set()

    def _build(self, state: PersistedState) -> SharePartition:
        return SharePartition(
            KEY,
            "t",
            state,
            settings=lambda: self.settings,
            now_ms=self.clock.now_ms,
            schedule=self.clock.schedule,
            on_change=lambda: None,
        )

    @initialize(
        shape=st.lists(
            st.tuples(st.integers(1, 6), st.booleans(), st.integers(0, 2)), min_size=1, max_size=12
        ),
        limit=st.integers(1, 4),
        locks=st.integers(3, 40),
    )
    def make_log(self, shape: list[tuple[int, bool, int]], limit: int, locks: int) -> None:
        offset = 0
        for size, control, hole in shape:
            offset += hole
            # A control batch holds one record, as in Kafka.
            last = offset if control else offset + size - 1
            self.log.append(FetchedBatch(offset, last, control))
            offset = last + 1
        self.settings = ShareSettings(LOCK_MS, limit, locks)

    @property
    def log_end(self) -> int:
        return self.log[-1].last_offset + 1

    def _fetch(self, count: int) -> list[FetchedBatch]:
        first = self.partition.next_fetch_offset()
        return [b for b in self.log if b.last_offset >= first][:count]

    def _deliver(self, member: str, got: list[AcquiredRange]) -> None:
        data = {o for b in self.log if not b.skip for o in range(b.base_offset, b.last_offset + 1)}
        for r in got:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset in data, f"{offset} is not a record"
                assert offset not in self.accepted, f"{offset} delivered after it was accepted"
                assert offset not in self.acquired, f"{offset} delivered twice at once"
                self.counts[offset] = self.counts.get(offset, 0) + 1
                assert r.delivery_count == self.counts[offset]
                self.acquired[offset] = (member, self.clock.now + LOCK_MS)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 20), count=st.integers(1, 4))
    def acquire(self, member: str, max_records: int, count: int) -> None:
        got = self.partition.acquire(member, self._fetch(count), max_records)
        self._deliver(member, got)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        mine = sorted(o for o, (m, _) in self.acquired.items() if m == member)
        if not mine:
            return
        start = data.draw(st.integers(0, len(mine) - 1))
        stretch = [mine[start]]
        for offset in mine[start + 1 :]:
            if offset != stretch[-1] + 1 or len(stretch) >= 8:
                break
            stretch.append(offset)
        kinds = st.sampled_from((GAP, ACCEPT, RELEASE, REJECT))
        if data.draw(st.booleans()):
            types = tuple(data.draw(st.lists(kinds, min_size=len(stretch), max_size=len(stretch))))
        else:
            types = (data.draw(kinds),)
        assert (
            self.partition.acknowledge(member, [AckBatch(stretch[0], stretch[-1], types)]) is None
        )
        for index, offset in enumerate(stretch):
            del self.acquired[offset]
            if types[index if len(types) > 1 else 0] == ACCEPT:
                self.accepted.add(offset)

    @rule(member=st.sampled_from(MEMBERS), offset=st.integers(0, 80))
    def acknowledge_what_is_not_held(self, member: str, offset: int) -> None:
        if self.acquired.get(offset, ("", 0))[0] == member:
            return
        before = states(self.partition)
        error = self.partition.acknowledge(member, [AckBatch(offset, offset, (ACCEPT,))])
        if offset < self.partition.start_offset:
            assert error is None  # below the start: nothing to do, as Kafka
        else:
            assert error == "INVALID_RECORD_STATE"
        assert states(self.partition) == before

    @rule(member=st.sampled_from(MEMBERS))
    def release(self, member: str) -> None:
        self.partition.release_member(member)
        for offset in [o for o, (m, _) in self.acquired.items() if m == member]:
            del self.acquired[offset]
            self.counts[offset] -= 1

    @rule(ms=st.integers(0, 2 * LOCK_MS))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        for offset in [o for o, (_, due) in self.acquired.items() if due <= self.clock.now]:
            del self.acquired[offset]

    @rule(ahead=st.integers(0, 6))
    def log_start_moves(self, ahead: int) -> None:
        offset = self.partition.start_offset + ahead
        self.partition.archive_below(offset)
        for held in [o for o in self.acquired if o < offset]:
            del self.acquired[held]

    @rule()
    def restart(self) -> None:
        # The broker persists every change before it answers, so a stop loses
        # at most the acquisitions, which are never persisted.
        self.persist()
        self.partition.close()
        self.partition = self._build(self.persisted)
        # Acquisition is never persisted: those deliveries did not happen.
        for offset in self.acquired:
            self.counts[offset] -= 1
        self.acquired.clear()

    @rule()
    def persist(self) -> None:
        """Write the update out; a share-partition rebuilt from it agrees on what is settled."""
        p = self.partition
        update = p.take_update()
        if update is not None:
            self.persisted = fold(self.persisted, update)
        assert self.persisted.start_offset == p.start_offset
        rebuilt = self._build(self.persisted)
        assert rebuilt.start_offset == p.start_offset
        mine = per_offset(p)
        again = per_offset(rebuilt)
        for offset in range(p.start_offset, max(p.end_offset, rebuilt.end_offset)):
            state, count = mine.get(offset, (AVAILABLE, 0))
            state_again, count_again = again.get(offset, (AVAILABLE, 0))
            if state in (ACKNOWLEDGED, ARCHIVED) or state_again in (ACKNOWLEDGED, ARCHIVED):
                assert (state_again, count_again) == (state, count), offset
            else:
                assert state_again is AVAILABLE
                assert count_again == (count - 1 if state is ACQUIRED else count), offset
        rebuilt.close()

    @invariant()
    def the_model_agrees(self) -> None:
        p = self.partition
        assert p.check() == []
        mine = per_offset(p)
        held = {o for o, (state, _) in mine.items() if state is ACQUIRED}
        assert held == set(self.acquired)
        for offset in self.accepted:
            assert offset < p.start_offset or mine[offset][0] is ACKNOWLEDGED
        for offset, (state, count) in mine.items():
            if state is not ARCHIVED:
                assert count == self.counts.get(offset, 0), offset

    def teardown(self) -> None:
        """Drain: everything in the log is delivered until acknowledged or archived."""
        if not self.log:
            return
        for _ in range(10 * self.log_end + 10):
            if self.partition.start_offset >= self.log_end:
                break
            self.clock.advance(LOCK_MS)
            self.acquired.clear()
            got = self.partition.acquire("drain", self._fetch(len(self.log)), 1_000)
            self._deliver("drain", got)
            acks = [AckBatch(r.first_offset, r.last_offset, (ACCEPT,)) for r in got]
            assert self.partition.acknowledge("drain", acks) is None
        assert self.partition.start_offset >= self.log_end
        assert self.partition.next_fetch_offset() == self.partition.end_offset
        self.partition.close()


def per_offset(partition: SharePartition) -> dict[int, tuple[RecordState, int]]:
    """The in-flight window offset by offset (small windows only)."""
    return {
        offset: (b.delivery_state, b.delivery_count)
        for b in partition.in_flight()
        for offset in range(b.first_offset, b.last_offset + 1)
    }


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None
)
