"""Segment scans that read the ``.log`` piecewise: recovery in chunks, lookups by headers.

Each is checked against the simplest reading of the same bytes: recovery with
one chunk holding the whole file, lookups against every record decoded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import IndexFullError
from seglog.records import log_entries
from seglog.records import record as record_codec
from seglog.records.log_entries import read_entry
from seglog.storage import _batch_walk, _recovery_scan
from seglog.storage.segment import LogSegment
from tests.storage.conftest import BASE_TS, make_batch

# (record count, value size) per batch: small batches share a scan chunk, large
# ones (over 8 KiB) are read header by header.
BATCHES = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from([1, 30, 200, 3000, 9000])),
    min_size=1,
    max_size=12,
)


def _write_segment(directory: Path, shapes: list[tuple[int, int]]) -> LogSegment:
    """A segment at base 100 with one batch per shape.

    Timestamps never decrease: a batch starting at offset o starts at BASE_TS + o
    and its records step 0 or 1 ms.
    """
    directory.mkdir(parents=True, exist_ok=True)
    segment = LogSegment.create(directory, 100, index_interval_bytes=150)
    offset = 100
    for i, (count, size) in enumerate(shapes):
        data = bytearray(
            make_batch([bytes([i % 256]) * size] * count, timestamp=BASE_TS + offset, step=i % 2)
        )
        data[0:8] = offset.to_bytes(8, "big")
        entry = read_entry(data)
        segment.append([bytes(data)], [entry])
        offset = entry.next_offset
    return segment


def _recover_state(segment: LogSegment) -> tuple[object, ...]:
    cut = segment.recover()
    offsets = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    times = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    return (
        cut,
        segment.size,
        segment.read_next_offset(),
        segment.max_timestamp_so_far,
        segment.offset_of_max_timestamp_so_far,
        offsets,
        times,
    )


@settings(max_examples=60, deadline=None)
@given(
    shapes=BATCHES,
    chunk=st.integers(64, 4000),
    cut=st.floats(0.0, 1.0),
    garbage=st.binary(max_size=100),
    flip=st.none() | st.floats(0.0, 1.0),
)
def test_recovery_in_chunks_matches_one_whole_read(
    tmp_path_factory: pytest.TempPathFactory,
    shapes: list[tuple[int, int]],
    chunk: int,
    cut: float,
    garbage: bytes,
    flip: float | None,
) -> None:
    directory = tmp_path_factory.mktemp("seg")
    segment = _write_segment(directory, shapes)
    path = segment.log_path
    segment.close()
    data = bytearray(path.read_bytes())
    if flip is not None and data:
        data[int(flip * (len(data) - 1))] ^= 0x55
    data = data[: int(len(data) * cut)] + garbage
    results = []
    for chunk_size in (1 << 30, chunk):
        path.write_bytes(data)
        reopened = LogSegment.open(directory, 100, index_interval_bytes=150, writable=True)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_batch_walk, "_VALID_CHUNK", chunk_size)
            results.append(_recover_state(reopened))
        reopened.close()
    assert results[0] == results[1]


@settings(max_examples=60, deadline=None)
@given(shapes=BATCHES, data=st.data())
def test_lookups_match_every_record_decoded(
    tmp_path_factory: pytest.TempPathFactory, shapes: list[tuple[int, int]], data: st.DataObject
) -> None:
    segment = _write_segment(tmp_path_factory.mktemp("seg"), shapes)
    try:
        records = list(record_codec.decode_entries(segment.read_bytes(0, segment.size)))
        end = records[-1].offset + 1
        entries = log_entries.scan(segment.read_bytes(0, segment.size)).entries
        batches = [(e.base_offset, e.position, e.size, e.last_offset) for e in entries]
        for _ in range(10):
            offset = data.draw(st.integers(90, end + 2))
            expected = next(((b, p, s) for b, p, s, last in batches if last >= offset), None)
            found = segment.translate_offset(offset)
            assert (None if found is None else (found.offset, found.position, found.size)) == (
                expected
            )
            read = segment.read(offset, 1)
            assert (None if read is None else read.first_entry_offset) == (
                None if expected is None else expected[0]
            )
            timestamp = data.draw(st.integers(BASE_TS + 90, BASE_TS + end + 2))
            start = data.draw(st.integers(100, end))
            hit = next(
                (
                    (r.timestamp, r.offset)
                    for r in records
                    if r.timestamp >= timestamp and r.offset >= start
                ),
                None,
            )
            by_time = segment.find_offset_by_timestamp(timestamp, start)
            assert (None if by_time is None else (by_time.timestamp, by_time.offset)) == hit
    finally:
        segment.close()


@pytest.mark.leaves_damaged_log_dir(
    "the only batch is cut short and the segment opened without recovery"
)
def test_the_roll_check_of_a_segment_whose_first_batch_is_cut(tmp_path: Path) -> None:
    """A segment opened with its only batch cut short (before recovery looks at it) has
    no first timestamp: the roll check goes by its creation time instead of failing."""
    segment = LogSegment.create(tmp_path, 0)
    segment.append([make_batch([b"x" * 200])], [read_entry(make_batch([b"x" * 200]), 0)])
    segment.close()
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:100])
    reopened = LogSegment.open(tmp_path, 0, writable=True)
    reopened.resize_indexes(1 << 20)
    try:
        rolls = reopened.should_roll(
            incoming_size=10,
            incoming_max_timestamp=BASE_TS,
            incoming_last_offset=1,
            now_ms=BASE_TS,
            segment_bytes=1 << 20,
            segment_ms=2**62,
        )
        assert rolls is False
    finally:
        reopened.close()


@pytest.mark.parametrize("max_index_size", [96, 4096])
def test_recovery_stores_index_entries_as_one_by_one_would(
    tmp_path: Path, max_index_size: int
) -> None:
    """Whole chunks of index entries at once, or one by one: the same indexes, the
    same state, and for indexes too small, the same error at the same entry."""
    results = []
    for at_once in (True, False):
        directory = tmp_path / str(at_once)
        _write_segment(directory, [(2, 30), (1, 200), (3, 1)] * 15).close()
        segment = LogSegment.open(
            directory, 100, index_interval_bytes=150, max_index_size=max_index_size, writable=True
        )
        with pytest.MonkeyPatch.context() as patch:
            if not at_once:
                patch.setattr(_recovery_scan, "_store_index_entries", lambda *_: False)
            try:
                outcome: object = segment.recover()
            except IndexFullError as exc:
                outcome = str(exc).replace(str(directory), "DIR")
        results.append(
            (
                outcome,
                [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)],
                [segment.time_index.entry(n) for n in range(segment.time_index.entries)],
                segment._max_timestamp,
                segment._offset_of_max_timestamp,
                segment._bytes_since_last_index_entry,
            )
        )
        segment.close()
    assert results[0] == results[1]
    assert (max_index_size == 96) == isinstance(results[0][0], str)
