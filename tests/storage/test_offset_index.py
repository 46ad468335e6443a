"""The offset index (``.index``) on real files: bytes, lookups against a model, lifecycle."""

from __future__ import annotations

import array
import bisect
import errno
import mmap
import os
import random
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError, StorageError
from seglog.storage.offset_index import OffsetIndex


def model_lookup(entries: list[tuple[int, int]], base: int, target: int) -> tuple[int, int]:
    """The greatest (offset, position) whose offset is at most ``target``, else (base, 0)."""
    i = bisect.bisect_right([o for o, _ in entries], target)
    return entries[i - 1] if i else (base, 0)


def test_golden_bytes_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=1000)
    assert not path.exists()  # nothing is opened before the first use
    assert index.entries == 0
    assert path.stat().st_size == 1000  # created at full length, a multiple of 8
    index.append(5, 100)
    index.close()
    assert path.read_bytes() == bytes.fromhex("00000005 00000064")


def test_golden_bytes_are_relative_to_the_base(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, 1000, max_index_size=64)
    index.append(1005, 4170)
    index.append(1000 + 2**31 - 1, 2**31 - 1)  # the largest relative offset and position
    index.close()
    assert path.read_bytes() == bytes.fromhex("00000005 0000104a 7fffffff 7fffffff")


@pytest.mark.parametrize(("max_size", "expected"), [(1000, 1000), (1001, 1000), (15, 8), (8, 8)])
def test_preallocation_rounds_down_to_whole_entries(
    tmp_path: Path, max_size: int, expected: int
) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=max_size)
    index.load()
    assert path.stat().st_size == expected == index.file_length
    assert index.max_entries == expected // 8 and index.entries == 0
    assert path.read_bytes() == b"\x00" * expected
    index.close()
    assert path.stat().st_size == 0  # trimmed to its (no) entries


def test_lookup_rules(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 1000, max_index_size=80)
    assert index.lookup(1500) == (1000, 0)  # empty
    assert index.last_offset == 1000
    for offset, position in ((1005, 100), (1010, 300), (1020, 700)):
        index.append(offset, position)
    assert index.lookup(999) == (1000, 0)
    assert index.lookup(1005) == (1005, 100)
    assert index.lookup(1015) == (1010, 300)
    assert index.lookup(10**9) == (1020, 700)
    assert index.last_offset == 1020
    assert index.entry(1) == (1010, 300)
    with pytest.raises(IndexError):
        index.entry(3)
    index.truncate_to(1010)
    assert index.entries == 1 and index.lookup(1015) == (1005, 100)
    index.close()


def test_non_increasing_or_unrepresentable_offsets(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 1000, max_index_size=80)
    with pytest.raises(InvalidOffsetError):
        index.append(999, 0)  # below the base
    with pytest.raises(InvalidOffsetError):
        index.append(1000 + 2**31, 0)  # relative offset beyond int32
    index.append(1010, 300)
    for offset in (1010, 1009, 1000):
        with pytest.raises(InvalidOffsetError):
            index.append(offset, 400)
    assert index.entries == 1 and index.lookup(10**6) == (1010, 300)
    index.append(1011, 400)
    assert index.entries == 2
    index.close()


def test_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=16)
    assert not index.is_full
    index.append(1, 1)
    assert not index.is_full
    index.append(2, 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 3)
    assert index.entries == 2
    # Truncation makes room again.
    index.truncate_to(2)
    assert not index.is_full
    index.append(3, 3)
    assert [index.entry(i) for i in range(index.entries)] == [(1, 1), (3, 3)]
    index.close()


def test_trimmed_index_is_full_until_resized(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=80)
    index.append(1, 10)
    index.trim_to_valid_size()
    assert path.stat().st_size == 8 and index.is_full
    with pytest.raises(IndexFullError):
        index.append(2, 20)
    index.resize(80)
    assert path.stat().st_size == 80 and not index.is_full
    index.append(2, 20)
    assert index.lookup(5) == (2, 20)
    index.close()
    assert path.read_bytes() == bytes.fromhex("00000001 0000000a 00000002 00000014")


@settings(max_examples=40)
@given(
    gaps=st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 5000)), max_size=300),
    targets=st.lists(st.integers(0, 400_000), max_size=30),
    cut=st.integers(0, 400_000),
)
def test_against_a_naive_model(
    tmp_path_factory: pytest.TempPathFactory,
    gaps: list[tuple[int, int]],
    targets: list[int],
    cut: int,
) -> None:
    base = 7
    path = tmp_path_factory.mktemp("idx") / "00000000000000000007.index"
    index = OffsetIndex(path, base, max_index_size=8 * 400)
    entries: list[tuple[int, int]] = []
    offset, position = base, 0
    for offset_gap, position_gap in gaps:
        offset += offset_gap
        position += position_gap
        entries.append((offset, position))
        index.append(offset, position)
    assert index.entries == len(entries)
    probes = targets + [o for o, _ in entries[:5]] + [base - 1, base]
    for target in probes:
        assert index.lookup(target) == model_lookup(entries, base, target)
    index.truncate_to(cut)
    kept = [e for e in entries if e[0] < cut]
    assert index.entries == len(kept)
    for target in probes:
        assert index.lookup(target) == model_lookup(kept, base, target)
    index.close()
    assert path.stat().st_size == 8 * len(kept)  # trimmed on close
    reopened = OffsetIndex(path, base, max_index_size=8 * 400, writable=False)
    assert reopened.entries == len(kept)
    for target in probes:
        assert reopened.lookup(target) == model_lookup(kept, base, target)
    reopened.close()


@settings(max_examples=15)
@given(targets=st.lists(st.integers(-10, 3 * 5000 + 10), min_size=1, max_size=50))
def test_lookups_in_a_large_index(
    tmp_path_factory: pytest.TempPathFactory, targets: list[int]
) -> None:
    """More entries than the warm section (8 KiB) holds, so both search paths run."""
    path = tmp_path_factory.mktemp("big") / "x.index"
    index = OffsetIndex(path, 0, max_index_size=8 * 5000)
    entries = [(3 * i + 1, 10 * i) for i in range(5000)]
    for offset, position in entries:
        index.append(offset, position)
    assert index.is_full
    for target in [*targets, 1, 2, 3 * 4000, 3 * 4999 + 1]:
        assert index.lookup(target) == model_lookup(entries, 0, target)
    index.close()


@settings(max_examples=25)
@given(
    offsets=st.lists(st.integers(1, 10_000), min_size=1, max_size=60, unique=True).map(sorted),
    cuts=st.lists(st.integers(0, 10_001), min_size=1, max_size=4),
)
def test_truncate_to_then_append(
    tmp_path_factory: pytest.TempPathFactory, offsets: list[int], cuts: list[int]
) -> None:
    index = OffsetIndex(tmp_path_factory.mktemp("t") / "x.index", 0, max_index_size=8 * 64)
    model: list[tuple[int, int]] = []
    for offset in offsets:
        index.append(offset, offset * 2)
        model.append((offset, offset * 2))
    for cut in cuts:
        index.truncate_to(cut)
        model = [e for e in model if e[0] < cut]
        assert index.entries == len(model)
        assert index.last_offset == (model[-1][0] if model else 0)
        assert [index.entry(i) for i in range(index.entries)] == model
        # Appends continue after the cut.
        nxt = (model[-1][0] if model else 0) + 1
        index.append(nxt, nxt * 2)
        model.append((nxt, nxt * 2))
        assert index.lookup(nxt) == (nxt, nxt * 2)
    index.close()


def test_reopen_keeps_entries_and_makes_an_active_index_writable_again(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(3, 30)
    index.close()
    assert path.stat().st_size == 8
    again = OffsetIndex(path, 0, max_index_size=800)
    assert again.entries == 1 and again.lookup(3) == (3, 30)
    # An existing file keeps its length (an inactive segment's index) until
    # the owner of the active segment grows it.
    assert path.stat().st_size == 8 and again.is_full
    again.resize(800)
    assert path.stat().st_size == 800
    again.append(4, 40)
    again.close()
    assert path.stat().st_size == 16
    assert path.read_bytes() == bytes.fromhex("00000003 0000001e 00000004 00000028")


def test_read_only_open_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    content = b"".join(struct.pack(">ii", i, 16 * i) for i in (1, 2, 5, 9))
    path.write_bytes(content)
    index = OffsetIndex(path, 0, max_index_size=800, writable=False)
    assert index.entries == 4
    assert index.lookup(6) == (5, 80)
    with pytest.raises(StorageError):
        index.append(9, 90)
    index.truncate_to(2)  # in memory only
    assert index.entries == 1
    index.flush()
    index.close()
    assert path.read_bytes() == content
    missing = tmp_path / "missing.index"
    empty = OffsetIndex(missing, 0, writable=False)
    assert empty.entries == 0 and empty.lookup(5) == (0, 0)
    empty.close()
    assert not missing.exists()


@pytest.mark.parametrize("writable", [False, True])
@pytest.mark.parametrize("length", [4, 12, 801])
def test_sanity_check_detects_a_partial_entry(tmp_path: Path, writable: bool, length: int) -> None:
    """A file that is not whole entries is corrupt, however the index is opened."""
    path = tmp_path / "x.index"
    path.write_bytes(bytes.fromhex("00000001 00000010") * (length // 8) + b"\x01" * (length % 8))
    index = OffsetIndex(path, 0, max_index_size=800, writable=writable)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()


def test_sanity_check_detects_an_offset_below_the_base(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">ii", -16, 0))
    index = OffsetIndex(path, 100, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()


def test_sanity_check_accepts_a_valid_index(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 50, max_index_size=80)
    index.sanity_check()  # empty and preallocated
    index.append(51, 0)
    index.append(60, 4096)
    index.sanity_check()
    index.close()
    for writable in (False, True):
        again = OffsetIndex(path, 50, max_index_size=80, writable=writable)
        again.sanity_check()
        assert again.lookup(59) == (51, 0)
        again.close()


# ----------------------------------------------- crash-left files, corruption


def _crash_copy(index: OffsetIndex, to: Path) -> Path:
    """The file as a crash would leave it: mapped pages written back, never trimmed."""
    index.flush()
    to.write_bytes(index.path.read_bytes())
    return to


@settings(max_examples=30)
@given(slots=st.integers(2, 60), data=st.data())
def test_a_crash_left_zero_tail_is_not_entries(
    tmp_path_factory: pytest.TempPathFactory, slots: int, data: st.DataObject
) -> None:
    """An untrimmed index reopens with only its entries: the zero tail is padding
    (relative offsets strictly increase after the first entry), found at load and
    trimmed away when the index is writable. A completely full file has no tail."""
    used = data.draw(st.integers(0, slots), label="used")
    directory = tmp_path_factory.mktemp("crash")
    index = OffsetIndex(directory / "live.index", 100, max_index_size=8 * slots)
    for i in range(used):
        index.append(101 + 2 * i, 64 * i)
    crashed = _crash_copy(index, directory / "00000000000000000100.index")
    index.close()
    assert crashed.stat().st_size == 8 * slots
    for writable in (False, True):
        reopened = OffsetIndex(crashed, 100, max_index_size=8 * slots, writable=writable)
        assert reopened.entries == used  # the zeros after the entries are not entries
        reopened.sanity_check(full=True)
        if used:
            assert reopened.lookup(10**9) == (101 + 2 * (used - 1), 64 * (used - 1))
        reopened.close()
        # Writable, the tail was trimmed away; read-only, it was left as found.
        assert crashed.stat().st_size == 8 * (used if writable else slots)


def test_truncation_zeroes_what_it_drops(tmp_path: Path) -> None:
    """Stale entries past a truncation would survive a crash and look valid."""
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=80)
    for i in range(1, 9):
        index.append(10 * i, 100 * i)
    index.truncate_to(45)
    index.append(46, 460)
    crashed = _crash_copy(index, tmp_path / "crashed.index")
    assert crashed.read_bytes()[5 * 8 :] == bytes(80 - 5 * 8)
    again = OffsetIndex(crashed, 0, writable=False)
    assert again.entries == 5  # the zeros are padding, not stale entries
    again.sanity_check(full=True)
    again.close()
    index.truncate()
    assert index.entries == 0 and index.last_offset == 0
    assert _crash_copy(index, crashed).read_bytes() == bytes(80)
    index.close()


def test_full_sanity_check_finds_disorder_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"".join(struct.pack(">ii", o, 8 * o) for o in (1, 5, 3, 7, 9)))
    index = OffsetIndex(path, 0, writable=False)
    index.sanity_check()  # the cheap check looks at the ends only, as Kafka's does
    with pytest.raises(CorruptIndexError, match="entry 2"):
        index.sanity_check(full=True)
    index.close()
    path.write_bytes(b"".join(struct.pack(">ii", o, 8 * o) for o in (1, 5, 7, 9)))
    OffsetIndex(path, 0, writable=False).sanity_check(full=True)


@settings(max_examples=30)
@given(content=st.binary(max_size=100), writable=st.booleans())
def test_any_length_that_is_not_whole_entries_is_corrupt(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, writable: bool
) -> None:
    path = tmp_path_factory.mktemp("len") / "x.index"
    path.write_bytes(content)
    index = OffsetIndex(path, 0, max_index_size=800, writable=writable)
    assert index.entries == len(content) // 8
    if len(content) % 8:
        assert path.stat().st_size == len(content)  # left as found, for the check to see
        with pytest.raises(CorruptIndexError, match="not a multiple of 8"):
            index.sanity_check()
    index.close()


# ------------------------------------------------------------ open, lifecycle


def test_opening_empty_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="smaller than one entry"):
        OffsetIndex(tmp_path / "tiny.index", 0, max_index_size=7)
    assert not (tmp_path / "tiny.index").exists()
    empty = tmp_path / "empty.index"
    empty.write_bytes(b"")
    reader = OffsetIndex(empty, 0, writable=False)  # mmap cannot map 0 bytes
    assert reader.entries == 0 and reader.lookup(3) == (0, 0) and reader.is_full
    reader.sanity_check()
    reader.close()
    assert empty.stat().st_size == 0
    writer = OffsetIndex(empty, 0, max_index_size=64)  # an existing empty file is not new
    assert writer.max_entries == 0 and writer.is_full and empty.stat().st_size == 0
    writer.resize(64)
    assert empty.stat().st_size == 64 and writer.max_entries == 8
    writer.close()
    # A file longer than today's maximum keeps every entry.
    big = tmp_path / "big.index"
    big.write_bytes(b"".join(struct.pack(">ii", i, i) for i in range(1, 11)))
    index = OffsetIndex(big, 0, max_index_size=40)
    assert index.entries == 10 and index.is_full and big.stat().st_size == 80
    index.resize(40)  # never below the entries
    assert big.stat().st_size == 80
    index.close()


def test_resize_rounds_down_and_keeps_entries(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=80)
    for i in range(1, 4):
        index.append(i, i)
    index.resize(43)
    assert path.stat().st_size == 40 and index.max_entries == 5
    index.resize(1)  # never below the entries
    assert path.stat().st_size == 24 and index.entries == 3 and index.is_full
    index.resize(800)
    assert path.read_bytes() == struct.pack(">6i", 1, 1, 2, 2, 3, 3) + bytes(800 - 24)
    index.close()
    reader = OffsetIndex(path, 0, writable=False)
    reader.trim_to_valid_size()  # nothing to do for a reader
    with pytest.raises(StorageError, match="read-only"):
        reader.resize(80)
    reader.close()


def test_rename_delete_and_use_after_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=80)
    index.append(1, 10)
    moved = tmp_path / "00000000000000000000.index.deleted"
    index.rename_to(moved)
    assert index.path == moved and not path.exists() and moved.exists()
    index.append(2, 20)  # the mapping follows the file
    index.close()
    index.close()  # idempotent
    assert index.closed and moved.read_bytes() == bytes.fromhex(
        "00000001 0000000a 00000002 00000014"
    )
    for use in (
        lambda: index.lookup(1),
        lambda: index.append(3, 30),
        lambda: index.entry(0),
        lambda: index.truncate_to(0),
        index.flush,
    ):
        with pytest.raises(StorageError, match="closed"):
            use()
    again = OffsetIndex(moved, 0, max_index_size=80)
    again.delete()
    assert again.closed and not moved.exists()
    again.delete()  # already gone: fine
    # Renaming an index whose file was never created only moves the name.
    ghost = OffsetIndex(tmp_path / "ghost.index", 0, writable=False)
    ghost.rename_to(tmp_path / "ghost.index.swap")
    assert ghost.path.name == "ghost.index.swap" and not ghost.path.exists()


def test_flush_makes_entries_visible_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=16)
    index.append(7, 70)
    index.flush()
    assert path.read_bytes()[:8] == bytes.fromhex("00000007 00000046")
    index.close()


def test_append_limits(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 10, max_index_size=80)
    assert not index.can_append_offset(9)
    assert index.can_append_offset(10) and index.can_append_offset(10 + 2**31 - 1)
    assert not index.can_append_offset(10 + 2**31)
    with pytest.raises(ValueError, match="position"):
        index.append(11, -1)
    with pytest.raises(ValueError, match="position"):
        index.append(11, 2**31)
    assert index.entries == 0 and index.size_in_bytes == 0
    index.append(11, 0)
    assert index.size_in_bytes == 8 and index.writable
    index.close()


def test_fetch_upper_bound_offset(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=80)
    assert index.fetch_upper_bound_offset(0, 100) is None
    for offset, position in ((10, 1000), (20, 2000), (30, 3000)):
        index.append(offset, position)
    assert index.fetch_upper_bound_offset(0, 500) == (10, 1000)
    assert index.fetch_upper_bound_offset(0, 1000) == (10, 1000)  # position >= start + size
    assert index.fetch_upper_bound_offset(1000, 1) == (20, 2000)
    assert index.fetch_upper_bound_offset(1500, 1500) == (30, 3000)
    assert index.fetch_upper_bound_offset(2000, 1001) is None
    index.close()


# ---------------------------------------------------------------------- speed


def _full_index_bytes(entries: int) -> bytes:
    """``entries`` entries (2i+1 → 100i), built without a Python loop per entry."""
    fields = array.array("i", bytes(8 * entries))
    fields[0::2] = array.array("i", range(1, 2 * entries, 2))
    fields[1::2] = array.array("i", range(0, 100 * entries, 100))
    if sys.byteorder == "little":
        fields.byteswap()
    return fields.tobytes()


def test_lookups_on_a_full_10_mib_index(tmp_path: Path) -> None:
    """Every lookup lands right on a full index (its speed: bench/storage_bench.py)."""
    entries = 10_485_760 // 8
    path = tmp_path / "x.index"
    path.write_bytes(_full_index_bytes(entries))
    index = OffsetIndex(path, 0, writable=False)
    assert index.entries == entries
    rng = random.Random(7)
    targets = [rng.randrange(-5, 2 * entries + 5) for _ in range(20_000)]
    for target in targets:
        expected = (0, 0) if target < 1 else (min((target - 1) // 2, entries - 1) * 2 + 1, 0)
        found = index.lookup(target)
        assert found[0] == expected[0] and found[1] == (found[0] // 2) * 100
    index.close()


def _blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_an_active_index_is_sparse_and_reserves_blocks_as_entries_come(tmp_path: Path) -> None:
    """Full length costs no disk: blocks are reserved a page at a time, before the store."""
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0)  # 10 MiB
    index.load()
    assert path.stat().st_size == 10_485_760 and _blocks(path) < 64 * 1024
    for i in range(1, 2000):
        index.append(i, i * 100)
    assert 16_000 <= _blocks(path) < 16_000 + 64 * 1024
    index.close()
    assert path.stat().st_size == 1999 * 8


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="no posix_fallocate")
def test_disk_full_fails_the_append_that_needs_a_new_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append into a page without reserved blocks reserves them first; if the disk
    is full that is a StorageError and the index keeps its entries (a store into the
    unbacked page would SIGBUS instead)."""
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=3 * mmap.PAGESIZE)
    per_page = mmap.PAGESIZE // 8
    for i in range(1, per_page + 1):
        index.append(i, 10 * i)

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(StorageError, match="disk is full"):
        index.append(per_page + 1, 10 * (per_page + 1))
    assert index.entries == per_page and index.lookup(10**6) == (per_page, 10 * per_page)
    index.truncate_to(per_page)  # within reserved pages: no reservation needed
    index.resize(3 * mmap.PAGESIZE)  # sparse growth needs no blocks
    monkeypatch.undo()
    index.append(per_page, 1)
    index.append(per_page + 1, 2)
    index.close()
    assert path.stat().st_size == (per_page + 1) * 8


def test_truncating_a_crash_left_sparse_tail_stores_nothing_into_it(tmp_path: Path) -> None:
    """The zero tail of a crashed active index may be holes; truncation must not touch
    them (a store could SIGBUS on a full disk), and there is nothing to zero there."""
    path = tmp_path / "x.index"
    with open(path, "wb") as handle:
        handle.write(struct.pack(">4i", 1, 10, 2, 20))
        handle.truncate(1 << 20)  # the rest is a hole
    before = _blocks(path)
    index = OffsetIndex(path, 0, max_index_size=1 << 20)
    assert index.entries == 2  # the hole is padding: trimmed away at load
    index.truncate()  # what recovery does before rebuilding it
    assert index.entries == 0 and index.lookup(5) == (0, 0)
    index.flush()
    assert _blocks(path) <= before
    index.append(7, 70)
    index.close()
    assert path.read_bytes() == struct.pack(">2i", 7, 70)
