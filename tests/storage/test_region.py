"""A file region keeps its segment's file open, whatever happens to the segment."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from seglog.errors import StorageError
from seglog.records import log_entries
from seglog.storage.region import FileRegion, region_batches
from seglog.storage.segment import LogSegment
from tests.storage.conftest import make_batch


def _segment(directory: Path) -> tuple[LogSegment, bytes]:
    segment = LogSegment.create(directory, 0)
    data = make_batch([b"a" * 100, b"b" * 100])
    segment.append([data], log_entries.scan(data).entries)
    return segment, data


def _read(segment: LogSegment) -> FileRegion:
    found = segment.read(0, 1 << 20)
    assert found is not None
    return found.region


@pytest.mark.parametrize("end", ["close", "delete"])
def test_a_region_outlives_its_segment_and_reads_the_same_inode(tmp_path: Path, end: str) -> None:
    segment, data = _segment(tmp_path)
    region = _read(segment)
    inode = os.fstat(region.fd).st_ino
    getattr(segment, end)()
    # Files opened now must not take the region's descriptor number.
    others = [os.open(tmp_path / f"other{i}", os.O_RDWR | os.O_CREAT) for i in range(4)]
    try:
        assert region.fd not in others
        assert os.fstat(region.fd).st_ino == inode
        assert os.pread(region.fd, region.length, region.position) == data
        region.release()
        assert region.file.closed
        region.release()  # idempotent
    finally:
        for fd in others:
            os.close(fd)


def test_the_last_holder_closes_the_descriptor(tmp_path: Path) -> None:
    segment, _ = _segment(tmp_path)
    first, second = _read(segment), _read(segment)
    assert first.file is second.file and first.file.references == 3
    first.release()
    segment.close()
    assert not second.file.closed
    second.release()
    assert second.file.closed


def test_a_forgotten_region_is_released_when_collected(tmp_path: Path) -> None:
    segment, _ = _segment(tmp_path)
    region = _read(segment)
    shared = region.file
    segment.delete()
    assert not shared.closed
    del region
    gc.collect()
    assert shared.closed


def test_no_region_of_a_closed_segment(tmp_path: Path) -> None:
    segment, _ = _segment(tmp_path)
    shared = _read(segment).file  # collected at once: only the segment's reference is left
    segment.close()
    assert shared.closed
    with pytest.raises(StorageError, match="closed"):
        FileRegion(shared, 0, 1, tmp_path / "x")


def test_region_batches_stop_after_the_first_batch_at_the_stop_offset(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0)
    # Five batches of two records: base offsets 0, 2, 4, 6, 8 (the base offset is the
    # first 8 bytes of a batch, outside its CRC).
    for base in range(0, 10, 2):
        data = base.to_bytes(8, "big") + make_batch([b"a" * 100, b"b" * 100])[8:]
        segment.append([data], log_entries.scan(data).entries)
    region = _read(segment)
    try:
        every = [header.base_offset for _, header in region_batches(region)]
        assert every == [0, 2, 4, 6, 8]
        # The batch at or past the stop offset is the last one read.
        assert [h.base_offset for _, h in region_batches(region, 4)] == [0, 2, 4]
        assert [h.base_offset for _, h in region_batches(region, 5)] == [0, 2, 4, 6]
        assert [h.base_offset for _, h in region_batches(region, 0)] == [0]
        assert [h.base_offset for _, h in region_batches(region, 100)] == every
        positions = [position for position, _ in region_batches(region)]
        assert [p for p, _ in region_batches(region, 6)] == positions[:4]
    finally:
        region.release()
        segment.close()
