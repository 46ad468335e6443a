"""The read-only reader against files written by storage: listings, index lookups, the tail,
lookups by time and entry walks agree with the live log; a file cut anywhere ends at its last
whole batch."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.records import log_entries
from seglog.records import record as record_codec
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.storage import _index_views, checkpoints, filenames
from seglog.storage.log import Log
from seglog.storage.reader import (
    OffsetIndexView,
    PartitionReader,
    SegmentReader,
    TimeIndexView,
    log_start_offsets,
    partition_dirs,
    segment_bases,
)
from tests.storage.conftest import BASE_TS, make_batch

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def _fill(log: Log, batches: int = 40) -> None:
    """Batches of 1-5 records of varied sizes and codecs; timestamps mostly rising."""
    codecs = [Codec.NONE, Codec.GZIP, Codec.NONE, Codec.ZSTD]
    for b in range(batches):
        count = 1 + b % 5
        values = [bytes([65 + b % 26]) * (20 + 37 * ((b + i) % 7)) for i in range(count)]
        # Batch 7 goes back in time: the time index must not.
        timestamp = BASE_TS + (b * 1000 if b != 7 else 500)
        log.append(make_batch(values, timestamp=timestamp, step=10, codec=codecs[b % 4]))


@pytest.fixture
def live_log(tmp_path: Path) -> Iterator[Log]:
    log = Log.open(tmp_path / "t-0", CONFIG)
    _fill(log)
    yield log
    log.close()


def test_listing_ignores_transient_files_and_dirs(tmp_path: Path) -> None:
    part = tmp_path / "orders-3"
    part.mkdir()
    for name in [
        "00000000000000000000.log",
        "00000000000000000100.log",
        "00000000000000000050.log.deleted",
        "00000000000000000060.log.cleaned",
        "00000000000000000070.log.swap",
        "00000000000000000100.index",
        "leader-epoch-checkpoint",
    ]:
        (part / name).write_bytes(b"")
    (tmp_path / "orders-4.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "x-1").write_text("a file, not a directory")
    assert segment_bases(part) == [0, 100]
    assert partition_dirs(tmp_path) == {("orders", 3): part}
    with pytest.raises(FileNotFoundError):
        segment_bases(tmp_path / "gone-0")


def test_log_start_offsets_tolerate_a_damaged_checkpoint(tmp_path: Path) -> None:
    assert log_start_offsets(tmp_path) == {}
    path = tmp_path / checkpoints.LOG_START_OFFSET_CHECKPOINT
    checkpoints.write_offset_checkpoint(path, {("t", 0): 42})
    assert log_start_offsets(tmp_path) == {("t", 0): 42}
    path.write_text("0\n5\ngarbage")
    assert log_start_offsets(tmp_path) == {}


def test_indexes_match_the_live_log_while_it_is_open(live_log: Log) -> None:
    """The active segment's indexes are preallocated: the zero room is not entries."""
    assert len(live_log.segments) > 3
    assert segment_bases(live_log.directory) == [s.base_offset for s in live_log.segments]
    active = live_log.active_segment
    assert active.offset_index.path.stat().st_size > 1000  # preallocated
    for segment in live_log.segments:
        index = OffsetIndexView.load(segment.offset_index.path, segment.base_offset)
        assert list(index) == [
            segment.offset_index.entry(n) for n in range(segment.offset_index.entries)
        ]
        tindex = TimeIndexView.load(segment.time_index.path, segment.base_offset)
        assert list(tindex) == [
            segment.time_index.entry(n) for n in range(segment.time_index.entries)
        ]
        for target in range(segment.base_offset - 1, live_log.log_end_offset + 1):
            assert index.lookup(target) == segment.offset_index.lookup(target)
        for ts in (BASE_TS - 1, BASE_TS, BASE_TS + 5_555, BASE_TS + 10**9):
            assert tindex.lookup(ts) == segment.time_index.lookup(ts)


def test_segments_agree_with_the_live_log(live_log: Log) -> None:
    part = PartitionReader(live_log.directory)
    assert part.next_offset() == live_log.log_end_offset
    for i, segment in enumerate(live_log.segments):
        with part.open_segment(segment.base_offset) as reader:
            assert reader.size == segment.size
            tail = reader.tail()
            assert tail.position == segment.size
            assert tail.next_offset == segment.read_next_offset()
            assert reader.largest_timestamp(is_last=i == len(live_log.segments) - 1) == (
                segment.max_timestamp_so_far
            )
            for offset in range(segment.base_offset, tail.next_offset):
                found = reader.locate(offset)
                expected = segment.translate_offset(offset)
                assert found is not None and expected is not None
                assert (found.base_offset, found.position, found.size) == (
                    expected.offset,
                    expected.position,
                    expected.size,
                )
            assert reader.locate(tail.next_offset) is None
            # Whole entries with their bytes: every record of the segment, in order.
            records = [
                rec.offset
                for entry in reader.read_entries()
                for rec in record_codec.decode_entry(entry.data)
            ]
            assert records == list(range(segment.base_offset, tail.next_offset))
            scanned = reader.scan(check_crc=True)
            assert scanned.error is None and scanned.valid_end == segment.size
            assert scanned.entries == list(reader.entries())


def test_lookups_by_time_agree_with_the_live_log(live_log: Log) -> None:
    part = PartitionReader(live_log.directory)
    for ts in range(BASE_TS - 100, BASE_TS + 41_000, 333):
        found = live_log.find_offset_by_timestamp(ts)
        expected = None if found is None else found.offset
        assert part.offset_for_time(ts) == expected, ts
    # A floor inside the log: the first matching record at or above it.
    assert part.offset_for_time(BASE_TS, floor=30) == 30


def test_a_file_of_a_segment_being_deleted_finds_its_indexes(live_log: Log) -> None:
    first = live_log.segments[0]
    directory = live_log.directory
    stem = filenames.offset_name(first.base_offset)
    expected = OffsetIndexView.load(first.offset_index.path, first.base_offset)
    for suffix in (filenames.LOG_SUFFIX, filenames.INDEX_SUFFIX, filenames.TIME_INDEX_SUFFIX):
        shutil.copy(directory / f"{stem}{suffix}", directory / f"{stem}{suffix}.deleted")
    with SegmentReader(directory / f"{stem}.log.deleted", first.base_offset) as reader:
        assert list(reader.offset_index) == list(expected)
        assert len(reader.time_index) > 0
    assert segment_bases(directory) == [s.base_offset for s in live_log.segments]


# ------------------------------------------------------------- cut files


@pytest.fixture(scope="module")
def written_segment(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, bytes]:
    """(.log, .index, .timeindex) of one sealed segment written by storage."""
    directory = tmp_path_factory.mktemp("cut") / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=1 << 20, index_interval_bytes=200))
    _fill(log, batches=30)
    log.roll()
    first = log.segments[0]
    paths = (first.log_path, first.offset_index.path, first.time_index.path)
    log.close()
    log_bytes, index_bytes, time_bytes = (p.read_bytes() for p in paths)
    assert len(OffsetIndexView(0, index_bytes)) > 5
    return log_bytes, index_bytes, time_bytes


@settings(max_examples=150)
@given(data=st.data())
def test_the_tail_of_a_cut_file_is_the_end_of_its_last_whole_batch(
    written_segment: tuple[bytes, bytes, bytes], data: st.DataObject
) -> None:
    log_bytes, index_bytes, time_bytes = written_segment
    cut = data.draw(st.integers(0, len(log_bytes)), label="cut")
    # The index may have been written for batches the cut removed (a crash
    # between the index store and the end of the log write), or be missing.
    keep_index = data.draw(st.booleans(), label="keep index")
    entries = log_entries.scan(log_bytes, check_crc=True).entries
    whole = [e for e in entries if e.position + e.size <= cut]
    expected_end = whole[-1].position + whole[-1].size if whole else 0
    expected_next = whole[-1].next_offset if whole else 0
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "00000000000000000000.log").write_bytes(log_bytes[:cut])
        if keep_index:
            (directory / "00000000000000000000.index").write_bytes(index_bytes)
            (directory / "00000000000000000000.timeindex").write_bytes(time_bytes)
        with SegmentReader.open(directory, 0) as reader:
            assert reader.tail() == (expected_end, expected_next)
            assert [e.position for e in reader.entries()] == [e.position for e in whole]
            read = [e.size for e in reader.read_entries()]
            assert read == [e.size for e in whole]
            scanned = reader.scan(check_crc=True)
            assert scanned.valid_end == expected_end
            assert (scanned.error is None) == (cut == expected_end)
        assert PartitionReader(directory).next_offset() == expected_next


@pytest.mark.leaves_damaged_log_dir(
    "a hand-made segment with preallocated zeros after its last batch, which verify reports"
)
def test_garbage_after_the_last_batch_ends_the_tail(tmp_path: Path) -> None:
    """Kafka may preallocate a .log (file.preallocate): zeros follow the last batch."""
    body = make_batch([b"a", b"b"]) + build_batch([SimpleRecord(b"c")], base_offset=2)
    (tmp_path / "00000000000000000000.log").write_bytes(body + b"\0" * 500)
    with SegmentReader.open(tmp_path, 0) as reader:
        assert reader.tail() == (len(body), 3)
        assert reader.scan().valid_end == len(body)


def test_a_lookup_by_time_opens_only_the_segment_holding_the_answer(
    live_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    live_log.roll()
    opened: list[int] = []
    original = SegmentReader.__init__

    def spy(self: SegmentReader, log_path: Path, base: int) -> None:
        opened.append(base)
        original(self, log_path, base)

    monkeypatch.setattr(SegmentReader, "__init__", spy)
    part = PartitionReader(live_log.directory)
    target = BASE_TS + 30_000
    found = live_log.find_offset_by_timestamp(target)
    assert found is not None
    assert part.offset_for_time(target) == found.offset
    holder = max(b for b in part.bases if b <= found.offset)
    assert opened == [holder]


@pytest.mark.parametrize(
    "layout",
    [
        [(0, b"\1" * 100)],  # entries at the start of a preallocated, sparse index
        [(0, b"\2" * 5000), (3 << 20, b"\3" * 10)],  # data after a hole
        [(0, b"")],  # nothing written
        [(0, b"\4" * 8192 + b"\0" * 8192 + b"\5")],  # written zeros are not a hole
    ],
)
def test_a_sparse_file_is_read_without_its_trailing_hole(
    tmp_path: Path, layout: list[tuple[int, bytes]]
) -> None:
    path = tmp_path / "00000000000000000000.index"
    size = 10 << 20
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in layout:
            f.seek(offset)
            f.write(data)
    whole = path.read_bytes()
    read = _index_views.read_whole(path)
    assert whole.startswith(read)
    assert not whole[len(read) :].strip(b"\0")  # only zeros were left unread
    assert read.rstrip(b"\0") == whole.rstrip(b"\0")
    assert len(read) < size or layout[-1][0] + len(layout[-1][1]) == size
