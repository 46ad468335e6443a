from __future__ import annotations

import bisect
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from seglog.storage.offset_index import OffsetIndex


def test_golden_bytes_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=1000)
    assert path.stat().st_size == 1000  # preallocated, a multiple of 8
    index.append(5, 100)
    index.close()
    assert path.read_bytes() == bytes.fromhex("00000005 00000064")


def test_lookup_rules(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 1000, max_index_size=80)
    assert index.lookup(1500) == (1000, 0)  # empty
    for offset, position in ((1005, 100), (1010, 300), (1020, 700)):
        index.append(offset, position)
    assert index.lookup(999) == (1000, 0)
    assert index.lookup(1005) == (1005, 100)
    assert index.lookup(1015) == (1010, 300)
    assert index.lookup(10**9) == (1020, 700)
    assert index.last_offset == 1020
    with pytest.raises(InvalidOffsetError):
        index.append(1020, 800)
    with pytest.raises(InvalidOffsetError):
        index.append(1000 + 2**31, 900)
    index.truncate_to(1010)
    assert index.entries == 1 and index.lookup(1015) == (1005, 100)
    index.close()


def test_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=16)
    index.append(1, 1)
    index.append(2, 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 3)
    index.close()


@settings(max_examples=40)
@given(
    gaps=st.lists(st.integers(1, 1000), min_size=0, max_size=300),
    targets=st.lists(st.integers(0, 400_000), max_size=30),
    cut=st.integers(0, 400_000),
)
def test_against_a_naive_model(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[int], targets: list[int], cut: int
) -> None:
    path = tmp_path_factory.mktemp("idx") / "00000000000000000007.index"
    index = OffsetIndex(path, 7, max_index_size=8 * 400)
    offsets = []
    offset = 7
    for gap in gaps:
        offset += gap
        offsets.append(offset)
        index.append(offset, offset * 3)

    def model(target: int, keys: list[int]) -> tuple[int, int]:
        i = bisect.bisect_right(keys, target)
        return (keys[i - 1], keys[i - 1] * 3) if i else (7, 0)

    for target in targets:
        assert index.lookup(target) == model(target, offsets)
    index.truncate_to(cut)
    kept = [o for o in offsets if o < cut]
    for target in targets:
        assert index.lookup(target) == model(target, kept)
    index.close()
    reopened = OffsetIndex(path, 7, max_index_size=8 * 400, writable=False)
    assert reopened.entries == len(kept)
    for target in targets:
        assert reopened.lookup(target) == model(target, kept)
    reopened.close()


def test_reopen_makes_active_index_writable_again(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(3, 30)
    index.close()
    assert path.stat().st_size == 8
    again = OffsetIndex(path, 0, max_index_size=800)
    assert again.entries == 1 and path.stat().st_size == 800
    again.append(4, 40)
    again.close()
    assert path.stat().st_size == 16


def test_readonly_open_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(bytes.fromhex("00000001 00000010") + b"\x00" * 16)
    before = path.read_bytes()
    index = OffsetIndex(path, 0, writable=False)
    assert index.entries == 3
    index.close()
    assert path.read_bytes() == before


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, writable=False).sanity_check()
    path.write_bytes(bytes.fromhex("fffffff0 00000000"))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 100, writable=False).sanity_check()
