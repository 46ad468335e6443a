"""The time index (``.timeindex``) on real files: bytes, lookups against a model, lifecycle."""

from __future__ import annotations

import bisect
import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError, StorageError
from seglog.storage.time_index import TimeIndex

TS = 1_700_000_000_000


def model_lookup(entries: list[tuple[int, int]], base: int, target: int) -> tuple[int, int]:
    """The greatest (timestamp, offset) whose timestamp is at most ``target``, else (-1, base)."""
    i = bisect.bisect_right([t for t, _ in entries], target)
    return entries[i - 1] if i else (-1, base)


def test_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    index = TimeIndex(path, 1000, max_index_size=100)
    assert not path.exists()  # opened at first use
    assert index.max_entries == 8
    assert path.stat().st_size == 96  # rounded down to whole 12-byte entries
    index.maybe_append(TS, 1005)
    index.close()
    assert path.read_bytes() == bytes.fromhex("0000018bcfe56800 00000005")


def test_only_growing_timestamps_are_kept(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=120)
    assert index.last_entry == (-1, 0) and index.lookup(5) == (-1, 0)
    index.maybe_append(100, 3)
    index.maybe_append(100, 5)  # same timestamp: ignored
    index.maybe_append(90, 6)  # smaller: ignored
    index.maybe_append(200, 9)
    assert index.entries == 2
    assert index.lookup(99) == (-1, 0)
    assert index.lookup(150) == (100, 3)
    assert index.lookup(10**12) == (200, 9)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(300, 8)  # offset below the last entry's
    assert index.entries == 2
    index.truncate_to(9)
    assert index.last_entry == (100, 3)
    index.close()


def test_last_slot_is_reserved(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=36)  # 3 slots
    assert index.max_entries == 3
    index.maybe_append(1, 1)
    assert not index.is_full
    index.maybe_append(2, 2)
    assert index.entries == index.max_entries - 1 and index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(3, 3)
    assert index.entries == 2
    # The reserved slot is for the entry written when the segment is sealed.
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3 and index.last_entry == (3, 3)
    with pytest.raises(IndexFullError):
        index.maybe_append(4, 4, skip_full_check=True)  # no slot left at all
    index.close()
    assert len((tmp_path / "t.timeindex").read_bytes()) == 36


@settings(max_examples=40)
@given(
    steps=st.lists(st.tuples(st.integers(-5, 1000), st.integers(0, 50)), max_size=150),
    targets=st.lists(st.integers(TS - 10, TS + 200_000), max_size=30),
    cut=st.integers(0, 10_000),
)
def test_against_a_naive_model(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, int]],
    targets: list[int],
    cut: int,
) -> None:
    """Appends with timestamps that sometimes do not grow; only growth is indexed."""
    base = 100
    path = tmp_path_factory.mktemp("tidx") / "00000000000000000100.timeindex"
    index = TimeIndex(path, base, max_index_size=12 * 200)
    model: list[tuple[int, int]] = []
    timestamp, offset = TS, base
    for ts_step, offset_step in steps:
        timestamp += ts_step
        offset += offset_step
        index.maybe_append(timestamp, offset)
        if not model or timestamp > model[-1][0]:
            model.append((timestamp, offset))
    assert index.entries == len(model)
    assert index.last_entry == (model[-1] if model else (-1, base))
    probes = [*targets, *(t for t, _ in model[:5]), -1]
    for target in probes:
        assert index.lookup(target) == model_lookup(model, base, target)
    index.truncate_to(cut + base)
    model = [e for e in model if e[1] < cut + base]
    assert index.entries == len(model)
    for target in probes:
        assert index.lookup(target) == model_lookup(model, base, target)
    index.close()
    assert path.stat().st_size == 12 * len(model)
    reopened = TimeIndex(path, base, max_index_size=12 * 200, writable=False)
    assert reopened.entries == len(model)
    assert [reopened.entry(i) for i in range(reopened.entries)] == model
    for target in probes:
        assert reopened.lookup(target) == model_lookup(model, base, target)
    reopened.close()


def test_reopen_keeps_entries_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    index = TimeIndex(path, 0, max_index_size=120)
    index.maybe_append(TS, 4)
    index.close()
    assert path.stat().st_size == 12
    again = TimeIndex(path, 0, max_index_size=120)
    assert again.last_entry == (TS, 4) and again.is_full
    assert path.stat().st_size == 12  # an existing file keeps its length until resized
    again.resize(120)
    assert path.stat().st_size == 120
    again.maybe_append(TS - 1, 5)  # not above the last timestamp: ignored
    again.maybe_append(TS + 1, 6)
    again.close()
    assert path.read_bytes() == struct.pack(">qiqi", TS, 4, TS + 1, 6)


def test_read_only_open_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    content = struct.pack(">qiqi", TS, 1, TS + 5, 3)
    path.write_bytes(content)
    index = TimeIndex(path, 0, max_index_size=120, writable=False)
    assert index.entries == 2 and index.lookup(TS + 4) == (TS, 1)
    with pytest.raises((StorageError, IndexFullError)):  # refused, either way
        index.maybe_append(TS + 9, 9)
    index.truncate_to(3)
    assert index.entries == 1
    index.close()
    assert path.read_bytes() == content


@pytest.mark.parametrize("writable", [False, True])
@pytest.mark.parametrize("length", [8, 13, 25])
def test_sanity_check_detects_a_partial_entry(tmp_path: Path, writable: bool, length: int) -> None:
    path = tmp_path / "t.timeindex"
    path.write_bytes(struct.pack(">qi", TS, 0) * (length // 12) + b"\x01" * (length % 12))
    index = TimeIndex(path, 0, max_index_size=120, writable=writable)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()


def test_sanity_check_detects_decreasing_timestamps_and_low_offsets(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    path.write_bytes(struct.pack(">qiqi", 100, 1, 16, 2))  # last timestamp below the first
    index = TimeIndex(path, 0, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    path.write_bytes(struct.pack(">qi", 100, -5))  # offset below the base
    index = TimeIndex(path, 10, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()


def test_sanity_check_accepts_a_valid_index(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    index = TimeIndex(path, 0, max_index_size=120)
    index.sanity_check()
    index.maybe_append(TS, 2)
    index.maybe_append(TS + 1, 9)
    index.sanity_check()
    index.close()
    again = TimeIndex(path, 0, writable=False)
    again.sanity_check()
    again.close()


def test_records_without_timestamps_add_nothing(tmp_path: Path) -> None:
    """As in Kafka, an empty index compares with (-1, base): v0 records (timestamp -1)
    and pre-1970 timestamps never make the first entry."""
    index = TimeIndex(tmp_path / "t.timeindex", 50, max_index_size=120)
    index.maybe_append(-1, 55)
    index.maybe_append(-7, 56)
    assert index.entries == 0 and index.last_entry == (-1, 50)
    index.maybe_append(0, 57)
    assert index.last_entry == (0, 57)
    index.close()


def test_full_is_checked_before_anything_else(tmp_path: Path) -> None:
    """Kafka's order: a full index refuses even an entry that would be ignored."""
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=24)  # 2 slots, 1 usable
    index.maybe_append(TS, 1)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(TS - 1, 2)
    index.maybe_append(TS, 1, skip_full_check=True)  # the repeated final entry: ignored
    assert index.entries == 1
    index.close()


def test_limits(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 10, max_index_size=120)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(TS, 9)  # below the base
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(TS, 10 + 2**31)
    with pytest.raises(ValueError, match="int64"):
        index.maybe_append(2**63, 11)
    index.maybe_append(2**63 - 1, 10 + 2**31 - 1)
    assert index.entry(0) == (2**63 - 1, 10 + 2**31 - 1)
    with pytest.raises(IndexError):
        index.entry(1)
    index.close()
    assert (tmp_path / "t.timeindex").read_bytes() == bytes.fromhex("7fffffffffffffff 7fffffff")
    with pytest.raises(ValueError, match="smaller than one entry"):
        TimeIndex(tmp_path / "tiny.timeindex", 0, max_index_size=11)


@settings(max_examples=30)
@given(
    offsets=st.lists(st.integers(0, 6), min_size=1, max_size=40),
    cut=st.integers(0, 250),
)
def test_truncate_to_with_repeated_offsets(
    tmp_path_factory: pytest.TempPathFactory, offsets: list[int], cut: int
) -> None:
    """Offsets may repeat (the timestamp grew within one batch's offset); truncation
    drops every entry at or above the cut, whatever the search lands on."""
    index = TimeIndex(tmp_path_factory.mktemp("t") / "x.timeindex", 0, max_index_size=12 * 50)
    model: list[tuple[int, int]] = []
    offset = 0
    for i, step in enumerate(offsets):
        offset += step
        index.maybe_append(TS + i, offset)
        model.append((TS + i, offset))
    index.truncate_to(cut)
    model = [e for e in model if e[1] < cut]
    assert [index.entry(i) for i in range(index.entries)] == model
    assert index.last_entry == (model[-1] if model else (-1, 0))
    index.close()


@settings(max_examples=30)
@given(slots=st.integers(3, 40), data=st.data())
def test_a_crash_left_zero_tail_is_not_entries(
    tmp_path_factory: pytest.TempPathFactory, slots: int, data: st.DataObject
) -> None:
    """The zeros after the entries of an untrimmed index are padding, not entries."""
    used = data.draw(st.integers(0, slots - 1), label="used")
    directory = tmp_path_factory.mktemp("crash")
    index = TimeIndex(directory / "live.timeindex", 100, max_index_size=12 * slots)
    for i in range(used):
        index.maybe_append(TS + 10 * i, 100 + 3 * i)
    index.flush()
    crashed = directory / "crashed.timeindex"
    crashed.write_bytes(index.path.read_bytes())
    index.close()
    reopened = TimeIndex(crashed, 100, max_index_size=12 * slots, writable=False)
    assert reopened.entries == used
    reopened.sanity_check(full=True)
    if used:
        assert reopened.last_entry == (TS + 10 * (used - 1), 100 + 3 * (used - 1))
    reopened.close()


def test_full_sanity_check_finds_disorder_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    rows = [(TS, 1), (TS + 9, 2), (TS + 5, 3), (TS + 10, 4), (TS + 11, 5)]
    path.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in rows))
    index = TimeIndex(path, 0, writable=False)
    index.sanity_check()
    with pytest.raises(CorruptIndexError, match="entry 2"):
        index.sanity_check(full=True)
    index.close()


def test_lookups_beyond_the_warm_section(tmp_path: Path) -> None:
    """More entries than the warm 8 KiB (682 entries) so both search paths run."""
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=12 * 3000)
    model = [(TS + 7 * i, 2 * i) for i in range(2999)]
    for timestamp, offset in model:
        index.maybe_append(timestamp, offset)
    assert index.is_full
    rng = random.Random(3)
    for target in [
        TS - 1,
        TS,
        TS + 7 * 2998 + 5,
        *(rng.randrange(TS, TS + 21_000) for _ in range(500)),
    ]:
        assert index.lookup(target) == model_lookup(model, 0, target)
    index.close()


def test_rename_delete_and_use_after_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=120)
    index.maybe_append(TS, 1)
    index.rename_to(tmp_path / "00000000000000000000.timeindex.cleaned")
    index.maybe_append(TS + 1, 2)
    index.close()
    assert not path.exists() and index.path.stat().st_size == 24
    with pytest.raises(StorageError, match="closed"):
        index.lookup(TS)
    with pytest.raises(StorageError, match="closed"):
        index.maybe_append(TS + 2, 3)
    index.delete()
    assert not index.path.exists()


@settings(max_examples=20)
@given(
    jumps=st.lists(st.integers(0, 3000), min_size=1, max_size=6),
    targets=st.lists(st.integers(TS - 10, TS + 10**13), max_size=40),
)
def test_lookups_in_a_large_unevenly_spread_index(
    tmp_path_factory: pytest.TempPathFactory, jumps: list[int], targets: list[int]
) -> None:
    """Timestamps that grow by one, then leap: the search must not trust an even spread."""
    path = tmp_path_factory.mktemp("skew") / "x.timeindex"
    index = TimeIndex(path, 0, max_index_size=12 * 4000)
    model: list[tuple[int, int]] = []
    timestamp = TS
    for i in range(3500):
        timestamp += 10**12 if i in jumps else 1
        index.maybe_append(timestamp, i)
        model.append((timestamp, i))
    probes = [*targets, *(t for t, _ in model[::97]), *(t - 1 for t, _ in model[::89])]
    for target in probes:
        assert index.lookup(target) == model_lookup(model, 0, target)
    index.close()
