"""An append is all or nothing: a write or index failure leaves no trace.

Faults come through the io seam (the way a full disk or an I/O error reaches
storage): the write of a batch fails after some of its bytes, or the disk has
no block for the next page of an index. Afterwards the log's end, the file's
size and both indexes are as before, the log takes the next append at the same
offset, and a restart (clean or not) shows nothing of the failed append.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.records import log_entries
from seglog.storage import io
from seglog.storage.log import Log
from seglog.storage.segment import MAX_SEGMENT_BYTES, LogSegment
from seglog.storage.verify import verify_log
from tests.storage.conftest import make_batch
from tests.storage.test_log import read_all

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=100)


def _disk_full() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FailingDisk(io.Env):
    """The real file system, until a test sets :attr:`pwritev_fault` or :attr:`allocate_fault`."""

    def __init__(self) -> None:
        self.pwritev_fault: Callable[..., int] | None = None
        self.allocate_fault: Callable[..., None] | None = None

    def pwritev(self, fd: int, buffers: io.Buffers, offset: int, *, name: object = None) -> int:
        if self.pwritev_fault is not None:
            return self.pwritev_fault(fd, buffers, offset, name=name)
        return super().pwritev(fd, buffers, offset, name=name)

    def allocate(self, fd: int, offset: int, length: int, *, name: object = None) -> None:
        if self.allocate_fault is not None:
            self.allocate_fault(fd, offset, length, name=name)
            return
        super().allocate(fd, offset, length, name=name)


def _state(log: Log) -> tuple[int, int, int, int, list[tuple[int, int]], list[tuple[int, int]]]:
    """What a failed append must not change: offsets, file size, index entries."""
    segment = log.active_segment
    offset_index, time_index = segment.offset_index, segment.time_index
    return (
        log.log_end_offset,
        log.high_watermark,
        segment.size,
        os.stat(segment.log_path).st_size,
        [offset_index.entry(i) for i in range(offset_index.entries)],
        [time_index.entry(i) for i in range(time_index.entries)],
    )


def _check_reopened(directory: Path, expected: list[bytes | None], clean: bool) -> None:
    again = Log.open(directory, CONFIG, recovery_point=0, had_clean_shutdown=clean)
    try:
        assert [r.value for r in read_all(again)] == expected
        assert again.log_end_offset == len(expected)
        report = verify_log(again)
        assert report.ok, report.problems
    finally:
        again.close()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    before=st.integers(min_value=0, max_value=30),
    values=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=8),
    fraction=st.floats(min_value=0.0, max_value=0.999),
    short_first=st.booleans(),
    clean=st.booleans(),
)
def test_a_write_that_fails_midway_leaves_no_trace(
    tmp_path_factory: pytest.TempPathFactory,
    before: int,
    values: list[bytes],
    fraction: float,
    short_first: bool,
    clean: bool,
) -> None:
    directory = tmp_path_factory.mktemp("fault") / "t-0"
    disk = FailingDisk()
    log = Log.open(directory, CONFIG, env=disk)
    written: list[bytes | None] = []
    for i in range(before):
        value = bytes([i]) * (10 + 7 * i)
        log.append(make_batch([value]))
        written.append(value)
    records = make_batch(list(values))
    cut = int(len(records) * fraction)
    if log.active_segment.size + len(records) > CONFIG.segment_bytes:
        # The append would roll first, which is not part of what it undoes.
        log.roll()
    state = _state(log)
    calls = 0

    def failing(
        fd: int,
        buffers: Sequence[bytes | bytearray | memoryview],
        position: int,
        *,
        name: object = None,
    ) -> int:
        # ENOSPC after ``cut`` bytes: in the same call, or after a short write.
        nonlocal calls
        calls += 1
        data = b"".join(bytes(b) for b in buffers)
        if short_first and calls == 1 and cut > 0:
            return os.pwrite(fd, data[:cut], position)
        if not short_first and cut > 0:
            os.pwrite(fd, data[:cut], position)
        raise io.storage_error("write", name, _disk_full())

    disk.pwritev_fault = failing
    with pytest.raises(StorageError, match="disk is full"):
        log.append(records)
    disk.pwritev_fault = None
    assert _state(log) == state
    # The next append goes where the failed one would have.
    info = log.append(make_batch([b"next"]))
    assert info.first_offset == len(written)
    written.append(b"next")
    if clean:
        log.close()
    else:
        log.flush()
        for segment in log.segments:
            os.close(segment.fd)
    _check_reopened(directory, written, clean)


def test_no_block_for_an_index_page_undoes_the_write(tmp_path: Path) -> None:
    """The batch is written first; when its index entry then needs a block the disk
    does not have, the batch's bytes are cut away again."""
    config = LogConfig(index_interval_bytes=0)  # an entry for every batch after the first
    disk = FailingDisk()
    log = Log.open(tmp_path / "t-0", config, env=disk)
    log.append(make_batch([b"first"]))
    # A new segment reserves its indexes' first page: fill it, so that the next
    # entry needs the second.
    index = log.segments[-1].offset_index
    while index.entries < mmap.PAGESIZE // 8:
        log.append(make_batch([b"filler"]))
    state = _state(log)

    def full(fd: int, offset: int, length: int, *, name: object = None) -> None:
        raise io.storage_error(f"reserve {length} bytes for", name, _disk_full())

    disk.allocate_fault = full
    with pytest.raises(StorageError, match="disk is full"):
        log.append(make_batch([b"second", b"third"]))
    disk.allocate_fault = None
    assert _state(log) == state
    fillers = state[0] - 1
    assert log.append(make_batch([b"second"])).first_offset == 1 + fillers
    assert log.active_segment.offset_index.entries == 1 + fillers
    log.close()
    again = Log.open(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert [r.value for r in read_all(again)] == [b"first", *[b"filler"] * fillers, b"second"]
    again.close()


@pytest.mark.leaves_damaged_log_dir(
    "the segment is extended with zeros to near 2 GiB (sparse) to reach the int32 limit"
)
def test_a_segment_never_grows_past_an_int32_of_bytes(tmp_path: Path) -> None:
    """Whatever segment.bytes says, a segment rolls before a position would not fit the
    index's int32, and an append that would not fit is refused before writing."""
    segment = LogSegment.create(tmp_path, 0)
    first = make_batch([b"first"])
    segment.append([first], log_entries.scan(first).entries)
    segment.close()
    near_full = MAX_SEGMENT_BYTES - 100
    os.truncate(segment.log_path, near_full)  # sparse: takes no disk
    big = LogSegment.open(tmp_path, 0, writable=True)
    try:
        assert big.size == near_full
        big.resize_indexes(1 << 20)  # made active, as the loader does
        decision = {
            "incoming_max_timestamp": 0,
            "incoming_last_offset": 0,
            "now_ms": 0,
            "segment_bytes": 2**40,
            "segment_ms": 2**62,
        }
        assert big.should_roll(incoming_size=101, **decision)
        assert not big.should_roll(incoming_size=100, **decision)
        records = make_batch([b"x" * 200])
        entries = log_entries.scan(records).entries
        with pytest.raises(StorageError, match="at most 2147483647 bytes"):
            big.append([records], entries)
        assert big.size == near_full == os.stat(big.log_path).st_size
        assert big.offset_index.entries == 0
    finally:
        big.close()


def test_a_new_segment_reserves_its_first_index_page_up_front(tmp_path: Path) -> None:
    """Creating the active segment reserves and maps the first page of both indexes,
    so its first index entries need no reservation (nor a first page fault)."""
    config = LogConfig(index_interval_bytes=0)
    disk = FailingDisk()
    log = Log.open(tmp_path / "t-0", config, env=disk)

    def full(fd: int, offset: int, length: int, *, name: object = None) -> None:
        raise io.storage_error(f"reserve {length} bytes for", name, _disk_full())

    disk.allocate_fault = full
    for n in range(5):
        log.append(make_batch([b"v%d" % n], timestamp=1_700_000_000_000 + n))
    segment = log.active_segment
    assert segment.offset_index.entries == 4
    assert segment.time_index.entries == 4
    log.close()
