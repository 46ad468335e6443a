"""Opening a log costs what Kafka's costs: no disk reserved for indexes, no index opened
before it is used, one descriptor per segment.

Kafka keeps only the active segment's indexes at full length, as sparse files,
and opens an inactive segment's indexes at first use (LazyIndex). A restart of a
nearly full disk, or of a partition with thousands of segments, depends on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.storage import filenames, io, producer_state
from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.small_disk import mounted_tmpfs
from tests.storage.conftest import make_batch
from tests.storage.test_log import read_all

MIB = 1 << 20


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open_paths() -> set[str]:
    """What this process's descriptors point at (other tests' threads may open sockets)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile
    return found


def _mapped_paths() -> set[str]:
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[-1].strip() for line in maps if "/" in line}


def _fill(log: Log, total: int, value_size: int = 64 * 1024) -> int:
    """Append batches of one ``value_size`` record until ``total`` bytes; returns the count."""
    count = 0
    while log.size < total:
        log.append(make_batch([bytes([count % 251]) * value_size]))
        count += 1
    return count


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs, where the test may mount one (root, and mounts permitted)."""
    with mounted_tmpfs(tmp_path / "disk", 64 << 20) as mount_point:
        yield mount_point


@pytest.mark.parametrize("clean", [True, False])
def test_a_small_disk_restarts(small_disk: Path, clean: bool) -> None:
    """6 MiB of data in 1 MiB segments reopens on a 64 MiB disk with 10 MiB indexes.

    Reserving both indexes of every segment at full length needed 20 MiB per
    segment: "cannot reserve 10485760 bytes ... the disk is full".
    """
    config = LogConfig(segment_bytes=MIB)
    log = Log.open(small_disk / "t-0", config)
    count = _fill(log, 6 * MIB)
    end = log.log_end_offset
    assert len(log.segments) >= 6
    log.flush()
    if clean:
        log.close()
    else:
        for segment in log.segments:  # a crash: nothing trimmed, nothing closed in order
            os.close(segment.fd)
    again = Log.open(small_disk / "t-0", config, recovery_point=0, had_clean_shutdown=clean)
    assert again.log_end_offset == end == count
    again.append(make_batch([b"after the restart"]))
    assert len(read_all(again)) == count + 1
    report = verify_log(again)
    assert report.ok, report.problems
    again.close()


def test_reopening_reserves_no_index_blocks(tmp_path: Path) -> None:
    """The same promise through the io seam, where no small disk can be mounted:
    a restart reserves nothing for indexes, and appends reserve a page at a time."""
    config = LogConfig(segment_bytes=MIB)
    log = Log.open(tmp_path / "t-0", config)
    _fill(log, 6 * MIB)
    log.close()
    reserved: list[int] = []

    class Counting(io.Env):
        def allocate(self, fd: int, offset: int, length: int, *, name: object = None) -> None:
            reserved.append(length)
            super().allocate(fd, offset, length, name=name)

    for clean in (True, False):
        again = Log.open(tmp_path / "t-0", config, had_clean_shutdown=clean, env=Counting())
        assert sum(reserved) <= 2 * 64 * 1024, reserved  # at most the rebuilt active indexes
        reserved.clear()
        for _ in range(20):
            again.append(make_batch([b"x" * 5000]))
        assert 0 < sum(reserved) <= 2 * os.sysconf("SC_PAGESIZE"), reserved
        reserved.clear()
        again.close()


def _write_segments(directory: Path, count: int) -> None:
    """``count`` one-batch segments with trimmed empty indexes, as a clean shutdown leaves."""
    directory.mkdir(parents=True)
    template = bytearray(make_batch([b"v"]))
    for base in range(count):
        template[0:8] = base.to_bytes(8, "big")  # the CRC does not cover the base offset
        filenames.log_path(directory, base).write_bytes(template)
        filenames.index_path(directory, base).write_bytes(b"")
        filenames.time_index_path(directory, base).write_bytes(b"")
    # The producer snapshot a clean shutdown takes at the log end.
    filenames.snapshot_path(directory, count).write_bytes(producer_state.encode_snapshot([]))


def test_thousands_of_segments_open_no_index(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    segments = 2000
    _write_segments(directory, segments)
    fds_before = _open_fds()
    # How fast that is, bench/storage_bench.py measures; here, that no index is opened.
    log = Log.open(directory, LogConfig(), recovery_point=segments, had_clean_shutdown=True)
    try:
        assert log.log_end_offset == segments and len(log.segments) == segments
        # One descriptor per segment (its .log), nothing for indexes.
        assert _open_fds() - fds_before <= segments + 5
        inactive = log.segments[:-1]
        assert not any(s.offset_index.loaded or s.time_index.loaded for s in inactive)
        mapped = _mapped_paths()
        assert not any(str(s.offset_index.path) in mapped for s in inactive)
        # First use opens an index; its descriptor is closed once it is mapped.
        assert log.read(7, 1000).data is not None
        assert log.segments[7].offset_index.loaded
        assert str(log.segments[7].offset_index.path) not in _open_paths()
    finally:
        log.close()
    # Closing leaves the unused indexes as they were.
    assert filenames.index_path(directory, 3).stat().st_size == 0


def test_a_log_holds_one_descriptor_per_segment(tmp_path: Path) -> None:
    """Kafka keeps the .log open per segment; index files are mapped, not held open."""
    fds_before = _open_fds()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=20_000, index_interval_bytes=512))
    _fill(log, 2_000_000, value_size=1000)
    segments = len(log.segments)
    assert segments >= 90
    # Every index used: a read from every segment, and a lookup by time in each.
    assert len(read_all(log)) == log.log_end_offset
    for segment in log.segments:
        segment.find_offset_by_timestamp(0, segment.base_offset)
    assert all(s.offset_index.loaded and s.time_index.loaded for s in log.segments)
    held = _open_fds() - fds_before
    assert segments <= held <= segments + 5, (segments, held)
    log.close()
    assert _open_fds() - fds_before <= 2


def test_close_releases_every_descriptor_even_if_a_segment_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fds_before = _open_fds()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=2000))
    _fill(log, 10_000, value_size=500)
    first = log.segments[0]
    assert len(log.segments) >= 3
    real_close = first.close

    def failing_close() -> None:
        real_close()
        raise StorageError("cannot write the final time index entry: the disk is full")

    monkeypatch.setattr(first, "close", failing_close)
    with pytest.raises(StorageError, match="disk is full"):
        log.close()
    assert _open_fds() - fds_before <= 2
