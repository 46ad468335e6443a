"""A stateful property test of one partition against a naive model.

Hypothesis interleaves appends, reads, rolls, truncations, retention,
compaction, flushes and crash-reopens (the active segment cut at a random
byte), and after every step checks Kafka's invariants:

* offsets are dense within what was appended and only ever increase;
* every batch below the recovery point survives a crash-reopen;
* reads by offset and lookups by time agree with the model;
* the files pass the consistency checker.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog.config import LogConfig
from seglog.storage import retention
from seglog.storage.cleaner import Cleaner, cleanable_range
from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.log_dirs import check_log_dirs
from tests.storage.conftest import BASE_TS, make_batch
from tests.storage.test_log import read_all

CONFIG = LogConfig(
    segment_bytes=900,
    index_interval_bytes=100,
    segment_index_bytes=120,
    cleanup_policy="compact,delete",
    min_cleanable_dirty_ratio=0.0,
    retention_ms=-1,
    delete_retention_ms=0,
)


class PartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="seglog-stateful-"))
        self.log = Log.open(self.root / "t-0", CONFIG)
        # Model: offset -> (key, value, timestamp); offsets present in the log.
        self.model: dict[int, tuple[bytes, bytes | None, int]] = {}
        self.next_offset = 0
        self.clock = 0
        self.compacted = False

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        try:
            check_log_dirs(self.root)  # what the next open would read, as seglog verify sees it
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @rule(
        keys=st.lists(st.sampled_from([b"a", b"b", b"c", b"d"]), min_size=1, max_size=5),
        size=st.integers(0, 120),
        tombstone=st.booleans(),
    )
    def append(self, keys: list[bytes], size: int, tombstone: bool) -> None:
        values: list[bytes | None] = [bytes([65 + i]) * size for i in range(len(keys))]
        if tombstone:
            values[-1] = None
        self.clock += 10
        info = self.log.append(
            make_batch(values, keys=keys, timestamp=BASE_TS + self.clock), now_ms=BASE_TS
        )
        assert info.first_offset == self.next_offset
        for i, key in enumerate(keys):
            self.model[info.first_offset + i] = (key, values[i], BASE_TS + self.clock + i)
        self.next_offset = info.last_offset + 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.log.log_end_offset

    @rule(back=st.integers(1, 8))
    def truncate(self, back: int) -> None:
        target = max(self.log.log_start_offset, self.next_offset - back)
        self.log.truncate_to(target)
        self.next_offset = self.log.log_end_offset
        assert self.next_offset <= target
        self.model = {o: v for o, v in self.model.items() if o < self.next_offset}

    @rule(ahead=st.integers(0, 10))
    def delete_records(self, ahead: int) -> None:
        target = min(self.log.high_watermark, self.log.log_start_offset + ahead)
        self.log.increment_log_start_offset(target)
        retention.delete_old_segments(self.log, BASE_TS)
        self.model = {o: v for o, v in self.model.items() if o >= self.log.log_start_offset}

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule()
    def compact(self) -> None:
        target = cleanable_range(self.log, 0, BASE_TS + 10**9)
        if target.dirty_bytes == 0:
            return
        Cleaner(1 << 20, clock=lambda: (BASE_TS + 10**9) / 1000).clean(target)
        self.compacted = True
        # The model keeps, below the cleaned range, only each key's newest value.
        survivors = {(r.offset) for r in read_all(self.log, self.log.log_start_offset)}
        newest: dict[bytes, int] = {}
        for offset, (key, _, _) in sorted(self.model.items()):
            newest[key] = offset
        for offset in list(self.model):
            if offset not in survivors:
                key = self.model[offset][0]
                # Only superseded records or expired tombstones may vanish.
                assert newest[key] != offset or self.model[offset][1] is None
                del self.model[offset]

    @rule(cut=st.floats(0.0, 1.0), garbage=st.binary(max_size=30))
    def crash_and_reopen(self, cut: float, garbage: bytes) -> None:
        recovery_point = self.log.recovery_point
        start = self.log.log_start_offset
        active = self.log.active_segment
        path = active.log_path
        size = active.size
        lower = max(0, _position_of(self.log, recovery_point, active.base_offset))
        # Simulate a crash: no close, no trimming; the unflushed tail may be lost.
        for segment in self.log.segments:
            segment.offset_index.flush()
            segment.time_index.flush()
        self.log._closed = True
        for segment in self.log.segments:
            segment.close()
        cut_at = lower + int((size - lower) * cut)
        with open(path, "r+b") as handle:
            handle.truncate(cut_at)
            handle.seek(cut_at)
            handle.write(garbage)
        self.log = Log.open(
            self.root / "t-0",
            CONFIG,
            recovery_point=recovery_point,
            log_start_offset=start,
            had_clean_shutdown=False,
        )
        assert self.log.log_end_offset >= recovery_point
        self.next_offset = self.log.log_end_offset
        self.model = {o: v for o, v in self.model.items() if o < self.next_offset}

    @invariant()
    def matches_model(self) -> None:
        records = read_all(self.log, self.log.log_start_offset)
        got = {r.offset: (r.key, r.value, r.timestamp) for r in records}
        assert got == self.model
        offsets = [r.offset for r in records]
        assert offsets == sorted(offsets)
        if not self.compacted:
            assert offsets == list(range(self.log.log_start_offset, self.log.log_end_offset))

    @invariant()
    def lookups_by_time_agree(self) -> None:
        if not self.model:
            return
        for offset in list(self.model)[:: max(1, len(self.model) // 3)]:
            timestamp = self.model[offset][2]
            found = self.log.find_offset_by_timestamp(timestamp)
            expected = min(o for o, v in self.model.items() if v[2] >= timestamp)
            assert found is not None and found.offset == expected

    @invariant()
    def files_are_consistent(self) -> None:
        report = verify_log(self.log)
        assert report.ok, report.problems


def _position_of(log: Log, offset: int, base: int) -> int:
    if offset <= base:
        return 0
    found = log.active_segment.translate_offset(offset)
    return log.active_segment.size if found is None else found.position


PartitionMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None
)
TestPartition = PartitionMachine.TestCase
