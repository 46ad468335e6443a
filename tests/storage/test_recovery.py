"""Crash and corruption: files cut at any byte, garbage appended, indexes lost.

Whatever happens to the tail, reopening keeps every complete batch before the
damage and nothing after it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.records import batch
from seglog.storage import filenames
from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.storage.conftest import LogFactory, make_batch
from tests.storage.test_log import read_all

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=64)


def _fill(log: Log, count: int) -> list[int]:
    """Append ``count`` batches; return the file end position after each."""
    ends = []
    for i in range(count):
        log.append(make_batch([bytes([i % 256]) * (20 + i % 7), b"x"]))
        ends.append(log.active_segment.size)
    return ends


def _batches_in(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [(pos, h.size) for pos, h in batch.iter_headers(data)]


def test_unclean_reopen_rebuilds_indexes(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 30)
    end = log.log_end_offset
    directory = log.directory
    log.close()
    # Lose the indexes of every segment.
    for path in directory.glob("*.index"):
        path.unlink()
    for path in directory.glob("*.timeindex"):
        path.write_bytes(b"\x00" * 5)  # not a multiple of 12: corrupt
    again = open_log(CONFIG, had_clean_shutdown=True, recovery_point=end)
    assert again.log_end_offset == end
    assert len(read_all(again)) == end


@settings(max_examples=40)
@given(cut=st.floats(min_value=0.0, max_value=1.0), garbage=st.binary(max_size=80))
def test_cut_at_any_byte_keeps_every_complete_batch(
    tmp_path_factory: object, cut: float, garbage: bytes
) -> None:
    root = tmp_path_factory.mktemp("cut")  # type: ignore[attr-defined]
    log = Log.open(root / "t-0", LogConfig(index_interval_bytes=64))
    _fill(log, 25)
    segment_path = log.active_segment.log_path
    log.close()
    batches = _batches_in(segment_path)
    original = segment_path.read_bytes()
    cut_at = int(len(original) * cut)
    with open(segment_path, "r+b") as handle:
        handle.truncate(cut_at)
        handle.seek(cut_at)
        handle.write(garbage)
    damaged = segment_path.read_bytes()
    # Garbage that happens to repeat the bytes it replaced completes a batch again.
    complete = []
    for position, length in batches:
        if damaged[position : position + length] != original[position : position + length]:
            break
        complete.append((position, length))
    reopened = Log.open(root / "t-0", LogConfig(index_interval_bytes=64), had_clean_shutdown=False)
    try:
        # Each batch holds 2 records; garbage may not add records.
        assert reopened.log_end_offset == 2 * len(complete)
        assert len(read_all(reopened)) == 2 * len(complete)
        report = verify_log(reopened)
        assert report.ok, report.problems
        # The log accepts appends right after the recovered end.
        info = reopened.append(make_batch([b"after"]))
        assert info.first_offset == 2 * len(complete)
    finally:
        reopened.close()


def test_corruption_in_an_early_segment_removes_later_segments(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 60)
    assert len(log.segments) >= 3
    second = log.segments[1]
    directory = log.directory
    second_base = second.base_offset
    third_base = log.segments[2].base_offset
    log.close()
    path = filenames.log_path(directory, second_base)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    again = open_log(CONFIG, had_clean_shutdown=False, recovery_point=0)
    assert again.log_end_offset < third_base
    assert all(s.base_offset <= second_base for s in again.segments)
    assert not filenames.log_path(directory, third_base).exists()


@pytest.mark.leaves_damaged_log_dir(
    "a byte below the recovery point is flipped to show recovery trusts it, so it stays"
)
def test_segments_below_recovery_point_are_not_rescanned(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 60)
    first = log.segments[0]
    directory = log.directory
    end = log.log_end_offset
    base = first.base_offset
    second_base = log.segments[1].base_offset
    log.close()
    path = filenames.log_path(directory, base)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # corrupt, but below the recovery point: trusted as flushed
    path.write_bytes(bytes(data))
    again = open_log(CONFIG, had_clean_shutdown=False, recovery_point=second_base)
    assert again.log_end_offset == end
    again.close()


def test_leftover_files_are_removed_and_swaps_completed(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 10)
    directory = log.directory
    end = log.log_end_offset
    log.close()
    (directory / "00000000000000000099.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000099.index.cleaned").write_bytes(b"")
    again = open_log(CONFIG, had_clean_shutdown=True, recovery_point=end)
    assert again.log_end_offset == end
    names = os.listdir(directory)
    assert not any(n.endswith((".deleted", ".cleaned")) for n in names)


def test_interrupted_swap_replaces_original(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 5)
    directory = log.directory
    log.roll()
    log.append(make_batch([b"tail"]))
    end = log.log_end_offset
    log.close()
    original = filenames.log_path(directory, 0)
    # A "cleaned" copy holding only the first two batches, left as .swap by a crash.
    keep = sum(size for _, size in _batches_in(original)[:2])
    (directory / "00000000000000000000.log.swap").write_bytes(original.read_bytes()[:keep])
    again = open_log(CONFIG, had_clean_shutdown=True, recovery_point=end)
    offsets = [r.offset for r in read_all(again)]
    assert offsets == [0, 1, 2, 3, 10]
    assert not any(p.name.endswith(".swap") for p in directory.iterdir())


def test_log_end_below_log_start_checkpoint_starts_fresh(open_log: LogFactory) -> None:
    log = open_log(CONFIG)
    _fill(log, 3)
    log.close()
    again = open_log(CONFIG, had_clean_shutdown=True, recovery_point=6, log_start_offset=100)
    assert again.log_start_offset == 100
    assert again.log_end_offset == 100
    assert again.append(make_batch([b"a"])).first_offset == 100


@settings(max_examples=40, deadline=None)
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_a_clean_start_checks_the_tail_of_the_active_segment(
    tmp_path_factory: pytest.TempPathFactory, cut: float
) -> None:
    """The last segment cut short while the clean-shutdown marker exists (a copy, a
    repair by fsck): the log ends after the last complete batch, never above it."""
    root = tmp_path_factory.mktemp("cut-clean")
    config = LogConfig(segment_bytes=1500, index_interval_bytes=64)
    log = Log.open(root / "t-0", config)
    _fill(log, 40)
    assert len(log.segments) >= 2
    active = log.active_segment
    segment_path, active_base = active.log_path, active.base_offset
    end = log.log_end_offset
    log.close()
    batches = _batches_in(segment_path)
    cut_at = int(segment_path.stat().st_size * cut)
    os.truncate(segment_path, cut_at)
    complete = [(p, size) for p, size in batches if p + size <= cut_at]
    expected_end = active_base + 2 * len(complete)
    again = Log.open(root / "t-0", config, recovery_point=end, had_clean_shutdown=True)
    try:
        assert again.log_end_offset == expected_end
        assert again.high_watermark <= again.log_end_offset
        records = read_all(again)
        assert [r.offset for r in records] == list(range(expected_end))
        report = verify_log(again)
        assert report.ok, report.problems
        info = again.append(make_batch([b"after"]))
        assert info.first_offset == expected_end
        assert (
            again.active_segment.size
            == (complete[-1][0] + complete[-1][1] if complete else 0) + info.size
        )
    finally:
        again.close()
