"""A stateful property test of lookups by key: after any sequence of appends
(keys from a small alphabet, null keys, several batches, transactions committed
and aborted), rolls, retention, DeleteRecords, compaction, the key index turned
off and on, and crashes (the in-memory index lost, the log cut at a random byte)
followed by recovery, every lookup equals a scan of the log for that key, newest
first, under both isolation levels; a key never written finds nothing."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from seglog.config import LogConfig
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import retention
from seglog.storage.cleaner import Cleaner, cleanable_range
from seglog.storage.log import Log
from tests.storage.conftest import BASE_TS
from tests.storage.test_key_index_log import scan

CONFIG = LogConfig(
    key_index_enable=True,
    segment_bytes=900,
    index_interval_bytes=100,
    segment_index_bytes=120,
    cleanup_policy="compact,delete",
    min_cleanable_dirty_ratio=0.0,
    retention_ms=-1,
    delete_retention_ms=0,
)
KEYS = [b"a", b"b", b"c", b"d"]
NEVER = b"never-written"

keys_strategy = st.lists(st.one_of(st.none(), st.sampled_from(KEYS)), min_size=1, max_size=5)


class KeyIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="seglog-keyindex-"))
        self.config = CONFIG
        self.log = Log.open(self.root / "t-0", self.config)
        self.clock = 0
        self.next_pid = 1000
        self.slots: int | None = None

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(slots=st.sampled_from([None, 1, 4]))
    def choose_slots(self, slots: int | None) -> None:
        # A tiny table forces every key of the alphabet into one chain.
        self.slots = slots
        self.log.key_index_slot_count = slots

    def _records(self, keys: list[bytes | None], size: int) -> list[SimpleRecord]:
        self.clock += 10
        return [
            SimpleRecord(bytes([65 + i]) * size, key, BASE_TS + self.clock + i)
            for i, key in enumerate(keys)
        ]

    @rule(keys=keys_strategy, size=st.integers(0, 120), batches=st.integers(1, 3))
    def append(self, keys: list[bytes | None], size: int, batches: int) -> None:
        # Compacted topics refuse null keys; they stay in the transactions' records.
        keys = [k if k is not None else b"d" for k in keys]
        for _ in range(batches):
            self.log.append(build_batch(self._records(keys, size)), now_ms=BASE_TS)

    @rule(keys=keys_strategy, size=st.integers(0, 60), commit=st.booleans())
    def transaction(self, keys: list[bytes | None], size: int, commit: bool) -> None:
        pid = self.next_pid
        self.next_pid += 1
        keys = [k if k is not None else b"c" for k in keys]
        data = build_batch(
            self._records(keys, size),
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        self.log.append(data, now_ms=BASE_TS)
        self.log.append_marker(pid, 0, commit=commit)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()

    @rule(back=st.integers(1, 8))
    def truncate(self, back: int) -> None:
        target = max(self.log.log_start_offset, self.log.log_end_offset - back)
        self.log.truncate_to(target)

    @rule(ahead=st.integers(0, 10))
    def delete_records(self, ahead: int) -> None:
        target = min(self.log.high_watermark, self.log.log_start_offset + ahead)
        self.log.increment_log_start_offset(target)
        retention.delete_old_segments(self.log, BASE_TS)

    @precondition(lambda self: len(self.log.segments) > 1)
    @rule()
    def compact(self) -> None:
        target = cleanable_range(self.log, 0, BASE_TS + 10**9)
        if target.dirty_bytes == 0:
            return
        Cleaner(1 << 20, clock=lambda: (BASE_TS + 10**9) / 1000).clean(target)

    @rule()
    def turn_off_and_on(self) -> None:
        self.log.update_config(LogConfig(**{**_fields(self.config), "key_index_enable": False}))
        self.log.update_config(self.config)

    @rule(cut=st.floats(0.0, 1.0), garbage=st.binary(max_size=30))
    def crash_and_reopen(self, cut: float, garbage: bytes) -> None:
        recovery_point = self.log.recovery_point
        start = self.log.log_start_offset
        active = self.log.active_segment
        path = active.log_path
        size = active.size
        lower = 0
        if recovery_point > active.base_offset:
            found = active.translate_offset(recovery_point)
            lower = size if found is None else found.position
        # A crash: what only memory held (the active key index, unsealed ones) is lost.
        for segment in self.log.segments:
            segment.offset_index.flush()
            segment.time_index.flush()
            segment._drop_key_index(unlink=False)
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
            self.config,
            recovery_point=recovery_point,
            log_start_offset=start,
            had_clean_shutdown=False,
        )
        self.log.key_index_slot_count = self.slots

    @invariant()
    def lookups_equal_a_scan(self) -> None:
        for key in [*KEYS, NEVER]:
            assert [r.offset for r in self.log.find(key)] == scan(self.log, key)
            committed = self.log.find(key, isolation="read_committed")
            assert [r.offset for r in committed] == scan(self.log, key, "read_committed")
            assert all(r.key == key for r in committed)
        assert self.log.find(NEVER) == []
        newest = self.log.find(b"a", limit=1)
        assert [r.offset for r in newest] == scan(self.log, b"a")[:1]


def _fields(config: LogConfig) -> dict[str, object]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


KeyIndexMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
TestKeyIndex = KeyIndexMachine.TestCase
