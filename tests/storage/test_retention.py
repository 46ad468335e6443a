from __future__ import annotations

import pytest

from seglog.config import LogConfig
from seglog.storage import retention
from tests.storage.conftest import BASE_TS, LogFactory, make_batch


def _fill(log, count: int, step_ms: int = 1000) -> None:  # type: ignore[no-untyped-def]
    for i in range(count):
        log.append(make_batch([bytes([i]) * 200], timestamp=BASE_TS + i * step_ms), now_ms=BASE_TS)


def test_retention_ms_deletes_only_an_expired_prefix(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=600, retention_ms=5000))
    _fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    now = BASE_TS + 9000
    removed = retention.delete_old_segments(log, now)
    assert removed >= 1
    for segment in log.segments[:-1]:
        assert now - segment.largest_timestamp <= 5000 or segment is log.segments[-1]
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.log_end_offset == 12


def test_everything_expired_rolls_first_and_keeps_offsets(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=600, retention_ms=1000))
    _fill(log, 7)
    removed = retention.delete_old_segments(log, BASE_TS + 10**9)
    assert removed >= 1
    assert len(log.segments) == 1
    assert log.active_segment.is_empty
    assert log.active_segment.base_offset == 7
    assert log.log_start_offset == 7 and log.log_end_offset == 7
    assert log.append(make_batch([b"x"])).first_offset == 7


def test_retention_bytes(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=600, retention_bytes=1000, retention_ms=-1))
    _fill(log, 12)
    retention.delete_old_segments(log, BASE_TS)
    assert log.size - log.active_segment.size <= 1000 or len(log.segments) <= 2
    # Deleting one more segment would go below retention.bytes.
    assert log.size - log.segments[0].size < 1000
    assert log.log_end_offset == 12


def test_negative_retention_disables(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=600, retention_ms=-1, retention_bytes=-1))
    _fill(log, 8)
    before = len(log.segments)
    assert retention.delete_old_segments(log, BASE_TS + 10**12) == 0
    assert len(log.segments) == before


def test_log_start_offset_breach_applies_to_compacted_topics(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=600, cleanup_policy="compact"))
    for i in range(12):
        log.append(make_batch([bytes([i]) * 200], keys=[b"k%d" % i]))
    second_base = log.segments[1].base_offset
    log.increment_log_start_offset(second_base + 1)
    assert retention.delete_old_segments(log, BASE_TS + 10**12) == 1
    assert log.segments[0].base_offset == second_base
    assert log.log_start_offset == second_base + 1


def test_deleted_segments_are_renamed_then_unlinked_after_delay(open_log: LogFactory) -> None:
    pending: list = []
    log = open_log(
        LogConfig(segment_bytes=600, retention_ms=1000, file_delete_delay_ms=60_000),
        delete_scheduler=lambda segments, delay: pending.append((segments, delay)),
    )
    _fill(log, 6)
    retention.delete_old_segments(log, BASE_TS + 10**9)
    assert pending and pending[0][1] == 60_000
    for segments, _ in pending:
        for segment in segments:
            assert segment.log_path.name.endswith(".log.deleted")
            assert segment.log_path.exists()
            segment.delete()
            assert not segment.log_path.exists()


@pytest.mark.parametrize(
    ("config", "now_offset"),
    [
        (LogConfig(segment_bytes=600, retention_ms=5000), 9000),
        (LogConfig(segment_bytes=600, retention_ms=1000), 10**9),
        (LogConfig(segment_bytes=600, retention_bytes=1000, retention_ms=-1), 0),
        (LogConfig(segment_bytes=600, retention_bytes=1500, retention_ms=6000), 9000),
        (LogConfig(segment_bytes=600, retention_ms=-1, retention_bytes=-1), 10**12),
        (LogConfig(segment_bytes=600, cleanup_policy="compact", retention_ms=1), 10**12),
    ],
)
def test_due_segments_foretells_the_pass(
    open_log: LogFactory, config: LogConfig, now_offset: int
) -> None:
    log = open_log(config)
    for i in range(12):
        keys = [b"k%d" % i] if config.compact else None
        log.append(
            make_batch([bytes([i]) * 200], timestamp=BASE_TS + i * 1000, keys=keys), now_ms=BASE_TS
        )
    log.increment_log_start_offset(log.segments[1].base_offset)
    foretold = retention.due_segments(log, BASE_TS + now_offset)
    first_kept = (
        log.segments[foretold].base_offset if foretold < len(log.segments) else log.log_end_offset
    )
    assert retention.delete_old_segments(log, BASE_TS + now_offset) == foretold
    assert log.segments[0].base_offset == first_kept
    assert retention.due_segments(log, BASE_TS + now_offset) == 0
