from __future__ import annotations

from pathlib import Path

import pytest

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from seglog.storage.time_index import TimeIndex


def test_golden_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    index = TimeIndex(path, 1000, max_index_size=100)
    assert path.stat().st_size == 96  # rounded down to whole 12-byte entries
    index.maybe_append(1_700_000_000_000, 1005)
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
        index.maybe_append(300, 8)
    index.truncate_to(9)
    assert index.last_entry == (100, 3)
    index.close()


def test_last_slot_is_reserved(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=36)  # 3 slots
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "t.timeindex"
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0, writable=False).sanity_check()
    path.write_bytes(bytes.fromhex("0000000000000064 00000001 0000000000000010 00000002"))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0, writable=False).sanity_check()
