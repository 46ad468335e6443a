"""The key index in the live engine: its files follow every state a segment goes
through, and every lookup equals a scan of the log."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import KeyIndexDisabledError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import decode_records
from seglog.storage import filenames, retention
from seglog.storage.cleaner import Cleaner, cleanable_range
from seglog.storage.log import Isolation, Log
from seglog.storage.log_dir import LogDir
from tests.storage.conftest import LogFactory

NOW = int(time.time() * 1000)
PID = 7000
#: Small segments: a few batches each.
CONFIG = LogConfig(key_index_enable=True, segment_bytes=700)


def append(log: Log, key: bytes | None, value: bytes = b"v", *, ts: int = NOW) -> int:
    """Append one record; returns its offset."""
    return log.append(build_batch([SimpleRecord(value, key, ts)])).first_offset


def txn_append(log: Log, key: bytes, value: bytes, seq: int, pid: int = PID) -> int:
    """Append one transactional record; returns its offset."""
    data = build_batch(
        [SimpleRecord(value, key, NOW)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )
    return log.append(data).first_offset


def scan(log: Log, key: bytes, isolation: Isolation = "read_uncommitted") -> list[int]:
    """The offsets of ``key``'s records, newest first, as a reader of every batch finds them."""
    upper = log.high_watermark if isolation == "read_uncommitted" else log.last_stable_offset
    aborted = (
        log.aborted_transactions(0, log.log_end_offset) if isolation == "read_committed" else []
    )
    found = []
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for position, header in batch.iter_headers(data):
            if header.is_control:
                continue
            if header.is_transactional and any(
                a.producer_id == header.producer_id
                and a.first_offset <= header.base_offset <= a.last_offset
                for a in aborted
            ):
                continue
            for record in decode_records(data, position):
                if record.key == key and log.log_start_offset <= record.offset < upper:
                    found.append(record.offset)
    return sorted(found, reverse=True)


def found(log: Log, key: bytes, **kwargs: object) -> list[int]:
    """The offsets :meth:`Log.find` returns for ``key``."""
    return [r.offset for r in log.find(key, **kwargs)]  # type: ignore[arg-type]


def key_files(directory: Path) -> set[str]:
    """Names of the key index files in ``directory`` (any suffix)."""
    return {n for n in os.listdir(directory) if filenames.KEY_INDEX_SUFFIX in n}


def log_names(log: Log) -> set[str]:
    """The ``.keyindex`` names the log's segments would have."""
    return {s.key_index_path.name for s in log.segments}


def fill(
    log: Log, count: int, keys: tuple[bytes, ...] = (b"a", b"b", b"c"), *, nulls: bool = True
) -> None:
    """``count`` records over ``keys`` (and a null key every fifth, with ``nulls``)."""
    for i in range(count):
        key = None if nulls and i % 5 == 4 else keys[i % len(keys)]
        append(log, key, b"value-%d" % i + b"." * 40)


def test_off_by_default_the_lookup_is_refused_and_no_file_is_written(
    open_log: LogFactory,
) -> None:
    log = open_log(LogConfig(segment_bytes=700))
    fill(log, 30)
    log.flush()
    with pytest.raises(KeyIndexDisabledError, match=r"key\.index\.enable"):
        log.find(b"a")
    log.close()
    assert key_files(log.directory) == set()


def test_files_follow_flush_roll_close_and_reopen(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    fill(log, 40)
    assert len(log.segments) > 3
    # Nothing is written by the appends nor the rolls themselves.
    assert key_files(log.directory) == set()
    assert found(log, b"a") == scan(log, b"a") != []
    log.flush()
    # Nor by a flush: a write of the key index never delays an acknowledgement.
    assert key_files(log.directory) == set()
    # The background indexer's pass seals every rolled segment; the active
    # one's index stays in memory.
    log.index_keys()
    sealed = {s.key_index_path.name for s in log.segments[:-1]}
    assert key_files(log.directory) == sealed
    log.close()
    assert key_files(log.directory) == log_names(log)
    active = log.segments[-1].key_index_path.name
    inodes = {n: os.stat(log.directory / n).st_ino for n in key_files(log.directory) - {active}}

    log = open_log(CONFIG, had_clean_shutdown=True)
    for key in (b"a", b"b", b"c", b"never"):
        assert found(log, key) == scan(log, key)
    assert found(log, b"never") == []
    # A clean close left whole files: they are used, not rebuilt (the active
    # segment's index lives in memory again, rebuilt from its log).
    assert {
        n: os.stat(log.directory / n).st_ino for n in key_files(log.directory) - {active}
    } == inodes
    # The active segment keeps indexing appends after the reopen.
    new = append(log, b"a")
    assert found(log, b"a", limit=1) == [new]


def test_limits_offsets_and_times(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    offsets = [append(log, b"k", b"x" * 50, ts=NOW + i) for i in range(20)]
    assert found(log, b"k") == offsets[::-1]
    assert found(log, b"k", limit=3) == offsets[:-4:-1]
    assert found(log, b"k", start_offset=5, end_offset=9) == [8, 7, 6, 5]
    assert found(log, b"k", from_ms=NOW + 10, to_ms=NOW + 12) == [12, 11, 10]
    records = log.find(b"k", limit=1)
    assert records[0].topic == "t" and records[0].partition == 0
    assert records[0].value == b"x" * 50 and records[0].timestamp == NOW + 19


def test_truncation_resets_the_active_index_and_drops_later_files(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    fill(log, 40)
    log.index_keys()
    cut = log.segments[1].base_offset + 1
    log.truncate_to(cut)
    assert key_files(log.directory) <= log_names(log)
    assert log.segments[-1].key_index_path.name not in key_files(log.directory)
    for key in (b"a", b"b", b"c"):
        assert found(log, key) == scan(log, key)
        assert all(offset < cut for offset in found(log, key))
    append(log, b"a")
    assert found(log, b"a") == scan(log, b"a")
    log.close()
    assert key_files(log.directory) == log_names(log)


def test_retention_and_delete_records_take_the_files_along(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    fill(log, 40)
    log.index_keys()
    before = key_files(log.directory)
    start = log.segments[2].base_offset + 1
    log.increment_log_start_offset(start)
    # Below the log start offset nothing is found, even before the segments go.
    assert all(offset >= start for offset in found(log, b"a"))
    assert found(log, b"a") == scan(log, b"a")
    removed = retention.delete_old_segments(log, NOW)
    assert removed == 2
    assert (
        key_files(log.directory) == before - {n for n in before if n not in log_names(log)}
        and len(key_files(log.directory)) == len(before) - 2
    )
    for key in (b"a", b"b", b"c"):
        assert found(log, key) == scan(log, key)
    # Retention by size: only the newest segments stay.
    log.update_config(LogConfig(key_index_enable=True, segment_bytes=700, retention_bytes=700))
    retention.delete_old_segments(log, NOW)
    assert key_files(log.directory) <= log_names(log)
    assert found(log, b"a") == scan(log, b"a")


def test_compaction_builds_the_cleaned_segments_index_before_the_swap(
    open_log: LogFactory,
) -> None:
    config = LogConfig(
        key_index_enable=True,
        cleanup_policy="compact",
        segment_bytes=700,
        min_cleanable_dirty_ratio=0.01,
    )
    log = open_log(config)
    fill(log, 60, nulls=False)
    log.roll()
    log.flush()
    Cleaner(1 << 20, clock=lambda: NOW / 1000).clean(cleanable_range(log, 0, NOW))
    # Every segment, cleaned ones included, has its file under its final name.
    assert key_files(log.directory) == {s.key_index_path.name for s in log.segments[:-1]}
    for key in (b"a", b"b", b"c"):
        assert found(log, key) == scan(log, key)
        assert len(found(log, key)) == 1
    log.close()
    log = open_log(config)
    assert found(log, b"b") == scan(log, b"b")


def test_a_torn_or_stale_key_index_is_rebuilt(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    fill(log, 40)
    log.close()
    first, second = (log.directory / n for n in sorted(log_names(log))[:2])
    first.write_bytes(first.read_bytes()[:50])  # torn
    stale = second.read_bytes()
    second.write_bytes(stale[:64] + b"\x00" * (len(stale) - 64))  # damaged past the header
    log = open_log(CONFIG)
    for key in (b"a", b"b", b"c"):
        assert found(log, key) == scan(log, key)
    assert first.stat().st_size > 50
    # A file of a longer log (a crash after the index but before the log's tail
    # reached the disk) covers more than the log holds: refused, rebuilt.
    log.close()
    segment = log.segments[0]
    whole = segment.key_index_path.read_bytes()
    log_path = segment.log_path
    data = log_path.read_bytes()
    log_path.write_bytes(data[: len(data) // 2])
    os.utime(log_path)
    log = open_log(CONFIG, had_clean_shutdown=False)
    assert found(log, b"a") == scan(log, b"a")
    kept = log.segments[0].key_index_path
    assert not kept.exists() or kept.read_bytes() != whole


def test_recovery_after_a_crash_rebuilds_from_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, CONFIG)
    fill(log, 30)
    log.flush()
    log.index_keys()
    fill(log, 17, keys=(b"a", b"z"))
    log.roll()  # rolled, not sealed: its index only in memory
    # A crash: no close, no flush. The next start recovers from the recovery point.
    crashed_scan = {k: scan(log, k) for k in (b"a", b"b", b"z")}
    log2 = Log.open(directory, CONFIG, recovery_point=0, had_clean_shutdown=False)
    try:
        for key, expected in crashed_scan.items():
            assert found(log2, key) == scan(log2, key) == expected
    finally:
        log2.close()
        log.take_offline("the process crashed")


def test_collisions_in_a_one_slot_table_stay_exact(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    log.key_index_slot_count = 1
    fill(log, 50, keys=tuple(b"key-%d" % i for i in range(7)))
    log.index_keys()
    for i in range(8):
        key = b"key-%d" % i
        assert found(log, key) == scan(log, key)
    assert found(log, b"key-7") == []


def test_read_committed_skips_aborted_and_open_transactions(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    committed = txn_append(log, b"k", b"committed", 0)
    log.append_marker(PID, 0, commit=True)
    aborted = txn_append(log, b"k", b"aborted", 0, PID + 1)
    log.append_marker(PID + 1, 0, commit=False)
    plain = append(log, b"k")
    open_txn = txn_append(log, b"k", b"open", 1)
    assert found(log, b"k") == [open_txn, plain, aborted, committed]
    assert found(log, b"k", isolation="read_committed") == [plain, committed]
    assert found(log, b"k", isolation="read_committed") == scan(log, b"k", "read_committed")
    assert found(log, b"k", isolation="read_committed", limit=1) == [plain]


def test_log_dir_turns_it_on_in_the_background_and_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("orders", 3, {"internal.segment.bytes": "700"})
        for i in range(90):
            logs.log("orders", i % 3).append(
                build_batch([SimpleRecord(b"v%d" % i + b"." * 40, b"k%d" % (i % 4), NOW + i)])
            )
        with pytest.raises(KeyIndexDisabledError):
            logs.find("orders", b"k1")
        logs.alter_topic_config("orders", {"key.index.enable": "true"})
        assert logs.key_index_remaining_bytes() > 0
        with caplog.at_level(logging.INFO, logger="seglog.storage._maintenance"):
            logs.run_key_indexer()
        assert logs.key_index_remaining_bytes() == 0
        # Progress, per partition, after each segment built: the last line says all.
        lines = [m for r in caplog.records if "key index of orders-1" in (m := r.getMessage())]
        segments = len(logs.log("orders", 1).segments)
        size = logs.log("orders", 1).size
        assert lines[-1].endswith(
            f"{segments} of {segments} segments, {size} of {size} bytes indexed"
        ), lines
        progress = logs.key_index_progress()
        assert set(progress) == {("orders", 0), ("orders", 1), ("orders", 2)}
        for p in progress.values():
            assert p.segments_done == p.segments and p.bytes_done == p.bytes > 0
        for number in range(3):
            log = logs.log("orders", number)
            assert key_files(log.directory) == {s.key_index_path.name for s in log.segments[:-1]}
        everywhere = logs.find("orders", b"k1")
        assert [(r.timestamp - NOW) % 4 for r in everywhere] == [1] * len(everywhere)
        assert [r.timestamp for r in everywhere] == sorted(
            (r.timestamp for r in everywhere), reverse=True
        )
        assert {r.partition for r in everywhere} == {0, 1, 2}
        assert len(logs.find("orders", b"k1", limit=5)) == 5
        one = logs.find("orders", b"k1", partition=2)
        assert one == [r for r in everywhere if r.partition == 2]
        logs.alter_topic_config("orders", {}, ["key.index.enable"])
        for number in range(3):
            assert key_files(logs.log("orders", number).directory) == set()
        logs.alter_topic_config("orders", {"key.index.enable": "true"})
        directory = logs.log("orders", 0).directory
        # Lookups while nothing is built yet build what they need, exactly.
        assert [r.offset for r in logs.find("orders", b"k1", partition=0)] == scan(
            logs.log("orders", 0), b"k1"
        )
        logs.delete_topic("orders")
        assert not directory.exists() or key_files(directory) == set()


def test_the_background_indexer_thread_builds_indexes(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1, {"internal.segment.bytes": "700"})
        log = logs.log("t", 0)
        fill(log, 40)
        logs.start_background(tick_seconds=0.05)
        logs.alter_topic_config("t", {"key.index.enable": "true"})
        deadline = time.monotonic() + 60
        while logs.key_index_remaining_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert logs.key_index_remaining_bytes() == 0
        while len(key_files(log.directory)) < len(log.segments) - 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert found(log, b"a") == scan(log, b"a")
