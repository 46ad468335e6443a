"""An inactive segment's index that a power cut left at its untrimmed length.

The trim of an index at roll is never fsynced, so after a power cut an
inactive segment's ``.index`` and ``.timeindex`` can come back at their
preallocated length, their entries followed by zeros. Those zeros are not
entries: relative offsets (and timestamps) strictly increase after the first
entry, so the first zero entry after it is where the file really ends. Counted
as entries, they break every binary search over the index.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.storage.log import Log
from seglog.storage.offset_index import OffsetIndex
from seglog.storage.time_index import TimeIndex
from seglog.storage.verify import verify_log
from tests.storage.conftest import BASE_TS, make_batch
from tests.storage.test_log import read_all

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def _fill(directory: Path, batches: int) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, value) of every record of a closed log of several segments."""
    log = Log.open(directory, CONFIG)
    records = []
    for i in range(batches):
        values = [b"%d.%d" % (i, j) + b"x" * 40 for j in range(3)]
        info = log.append(make_batch(values, timestamp=BASE_TS + 1000 * i))
        ts = BASE_TS + 1000 * i
        records += [(info.first_offset + j, ts + j, v) for j, v in enumerate(values)]
    assert len(log.segments) >= 3
    log.close()
    return records


def _pad(path: Path, zero_entries: int, entry_size: int) -> None:
    with open(path, "ab") as handle:
        handle.write(bytes(zero_entries * entry_size))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(padding=st.integers(1, 2000), clean=st.booleans())
def test_zero_padding_of_an_inactive_index_is_not_entries(
    tmp_path_factory: pytest.TempPathFactory, padding: int, clean: bool
) -> None:
    directory = tmp_path_factory.mktemp("padded") / "t-0"
    records = _fill(directory, 40)
    segments = sorted(p for p in os.listdir(directory) if p.endswith(".log"))
    sizes = {}
    for name in segments[:-1]:  # every inactive segment, as a power cut may leave them
        stem = directory / name[: -len(".log")]
        sizes[stem] = (
            os.path.getsize(f"{stem}.index"),
            os.path.getsize(f"{stem}.timeindex"),
        )
        _pad(Path(f"{stem}.index"), padding, 8)
        _pad(Path(f"{stem}.timeindex"), padding, 12)
    log = Log.open(directory, CONFIG, recovery_point=10**9, had_clean_shutdown=clean)
    try:
        assert [(r.offset, r.value) for r in read_all(log)] == [(o, v) for o, _, v in records]
        for offset, timestamp, _ in records:
            found = log.read(offset, 1)
            assert found.data is not None and found.data.first_entry_offset <= offset
            by_time = log.find_offset_by_timestamp(timestamp)
            assert by_time is not None
            assert by_time.offset == min(o for o, t, _ in records if t >= timestamp)
        for segment in log.segments[:-1]:
            # The tail state (and with it retention by time) comes from the real entries.
            assert segment.max_timestamp_so_far == max(
                t for o, t, _ in records if segment.base_offset <= o < segment.read_next_offset()
            )
        report = verify_log(log)
        assert report.ok, report.problems
    finally:
        log.close()
    # Loaded writable, the padding was trimmed away.
    for stem, (index_size, time_index_size) in sizes.items():
        assert os.path.getsize(f"{stem}.index") == index_size
        assert os.path.getsize(f"{stem}.timeindex") == time_index_size


@pytest.mark.parametrize("writable", [False, True])
@pytest.mark.parametrize("used", [0, 1, 2, 7, 63])
def test_an_index_ends_at_its_first_padding_entry(
    tmp_path: Path, writable: bool, used: int
) -> None:
    offsets = tmp_path / "00000000000000000100.index"
    times = tmp_path / "00000000000000000100.timeindex"
    index = OffsetIndex(offsets, 100, max_index_size=8 * 63)
    time_index = TimeIndex(times, 100, max_index_size=12 * 64)
    # The first entry may have relative offset 0; later ones never do.
    for i in range(used):
        index.append(100 + 3 * i, 50 * i + 10)
        time_index.maybe_append(BASE_TS + i, 100 + 3 * i)
    index.flush()
    time_index.flush()
    # A crash copy: the files at their preallocated length, never trimmed.
    offsets_copy = tmp_path / "copy" / offsets.name
    times_copy = tmp_path / "copy" / times.name
    offsets_copy.parent.mkdir()
    offsets_copy.write_bytes(offsets.read_bytes())
    times_copy.write_bytes(times.read_bytes())
    index.close()
    time_index.close()
    assert offsets_copy.stat().st_size == 8 * 63  # 63: a full file, no padding
    reopened = OffsetIndex(offsets_copy, 100, max_index_size=8 * 63, writable=writable)
    reopened_times = TimeIndex(times_copy, 100, max_index_size=12 * 64, writable=writable)
    assert reopened.entries == used
    assert reopened_times.entries == used
    reopened.sanity_check(full=True)
    reopened_times.sanity_check(full=True)
    if used:
        assert reopened.lookup(10**9) == (100 + 3 * (used - 1), 50 * (used - 1) + 10)
        assert reopened_times.lookup(2**62) == (BASE_TS + used - 1, 100 + 3 * (used - 1))
    reopened.close()
    reopened_times.close()
    expected = (8 * used, 12 * used) if writable else (8 * 63, 12 * 64)
    assert (offsets_copy.stat().st_size, times_copy.stat().st_size) == expected
