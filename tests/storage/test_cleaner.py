from __future__ import annotations

from seglog.config import LogConfig
from seglog.storage.cleaner import Cleaner, cleanable_range
from tests.storage.conftest import BASE_TS, LogFactory, make_batch
from tests.storage.test_log import read_all

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=700, min_cleanable_dirty_ratio=0.01)


def _latest(log) -> dict:  # type: ignore[no-untyped-def]
    return {r.key: (r.offset, r.value) for r in read_all(log)}


def _clean(log, now_ms: int = BASE_TS):  # type: ignore[no-untyped-def]
    target = cleanable_range(log, 0, now_ms)
    return Cleaner(1 << 20, clock=lambda: now_ms / 1000).clean(target)


def test_keeps_newest_value_per_key_and_offsets(open_log: LogFactory) -> None:
    log = open_log(COMPACT)
    for i in range(60):
        key = b"k%d" % (i % 5)
        log.append(make_batch([b"v%d" % i + b"." * 40], keys=[key]))
    before = _latest(log)
    segments_before = len(log.segments)
    stats = _clean(log)
    assert stats.records_kept < stats.records_read
    after = read_all(log)
    # Everything outside the active segment holds at most one record per key.
    active_base = log.active_segment.base_offset
    cleaned = [r for r in after if r.offset < active_base]
    assert len({r.key for r in cleaned}) == len(cleaned)
    assert _latest(log) == before
    offsets = [r.offset for r in after]
    assert offsets == sorted(offsets)
    # Segments are grouped by their size before cleaning: a second pass merges
    # the small segments the first one left.
    log.append(make_batch([b"last"], keys=[b"k0"]))
    _clean(log)
    assert len(log.segments) < segments_before
    assert _latest(log)[b"k0"][1] == b"last"
    assert log.log_end_offset == 61


def test_never_touches_the_active_segment(open_log: LogFactory) -> None:
    log = open_log(LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    for i in range(10):
        log.append(make_batch([b"v%d" % i], keys=[b"same"]))
    assert len(log.segments) == 1
    target = cleanable_range(log, 0, BASE_TS)
    assert target.dirty_bytes == 0


def test_min_compaction_lag_protects_young_records(open_log: LogFactory) -> None:
    config = LogConfig(
        cleanup_policy="compact",
        segment_bytes=700,
        min_cleanable_dirty_ratio=0.01,
        min_compaction_lag_ms=10_000,
    )
    log = open_log(config)
    for i in range(30):
        log.append(
            make_batch([b"v" * 40], keys=[b"k"], timestamp=BASE_TS + i * 1000), now_ms=BASE_TS
        )
    young = cleanable_range(log, 0, BASE_TS + 5_000)
    assert young.dirty_bytes == 0
    old = cleanable_range(log, 0, BASE_TS + 10**9)
    assert old.dirty_bytes > 0


def test_tombstones_survive_one_cleaning_then_go_after_delete_retention(
    open_log: LogFactory,
) -> None:
    config = LogConfig(
        cleanup_policy="compact",
        segment_bytes=700,
        min_cleanable_dirty_ratio=0.01,
        delete_retention_ms=1000,
    )
    log = open_log(config)
    for i in range(20):
        log.append(make_batch([b"v" * 40], keys=[b"k%d" % (i % 3)]))
    log.append(make_batch([None], keys=[b"k0"]))
    for i in range(20):
        log.append(make_batch([b"w" * 40], keys=[b"other%d" % (i % 2)]))
    _clean(log, BASE_TS)
    records = read_all(log)
    assert any(r.key == b"k0" and r.value is None for r in records)
    assert not any(r.key == b"k0" and r.value is not None for r in records)
    # Before the horizon the tombstone stays; after it, it goes.
    _clean(log, BASE_TS + 500)
    assert any(r.key == b"k0" for r in read_all(log))
    _clean(log, BASE_TS + 2000)
    assert not any(r.key == b"k0" for r in read_all(log))
    assert {r.key for r in read_all(log)} >= {b"k1", b"k2"}


def test_cleaner_checkpoint_and_dirtiest_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from seglog.storage import checkpoints
    from seglog.storage.log_dir import LogDir, LogDirSettings

    with LogDir.open(tmp_path, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic(
            "c",
            1,
            {
                "cleanup.policy": "compact",
                "internal.segment.bytes": "700",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        for i in range(40):
            logs.append("c", 0, make_batch([b"v" * 40], keys=[b"k%d" % (i % 4)]))
        from seglog.storage.cleaner import LogCleaner

        cleaner = LogCleaner(logs)
        stats = cleaner.clean_once()
        assert stats is not None
        offsets = checkpoints.read_offset_checkpoint(tmp_path / "cleaner-offset-checkpoint")
        assert offsets[("c", 0)] == stats.end_offset
        # Nothing dirty is left until more is written.
        assert cleaner.clean_once() is None
