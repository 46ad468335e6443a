"""The offset map: translation through runs, and its file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import SeglogError
from seglog.mirror import OffsetMap, PartitionMap


@given(
    held=st.sets(st.integers(0, 200), max_size=60),
    extra=st.integers(0, 5),
    target_base=st.integers(0, 1000),
)
def test_a_committed_offset_maps_to_the_same_or_next_record(
    held: set[int], extra: int, target_base: int
) -> None:
    # Source records at the offsets in ``held`` (the rest compacted away), copied
    # densely from ``target_base`` on; the copy reached ``end``.
    end = max(held, default=-1) + 1 + extra
    pm = PartitionMap(target_next=target_base)
    ordered = sorted(held)
    for i, offset in enumerate(ordered):
        pm.add(offset, target_base + i)
    pm.position = end
    for committed in range(end + 1):
        found = pm.translate(committed)
        assert found is not None
        following = [i for i, offset in enumerate(ordered) if offset >= committed]
        expected = target_base + (following[0] if following else len(ordered))
        assert found.target == expected
        caught_up = committed == end or committed == (ordered[-1] + 1 if ordered else -1)
        assert found.exact == (committed in held or caught_up)
    assert pm.translate(end + 1) is None  # the copy has not got there
    assert len(pm.runs) <= len(held)


def test_runs_stay_few_without_gaps() -> None:
    pm = PartitionMap()
    for offset in range(1000):
        pm.add(offset + 50, offset)
    assert pm.runs == [[50, 0, 1000]]
    assert pm.copied == 1000 and pm.position == 1050 and pm.target_next == 1000


def test_the_file_round_trips_and_belongs_to_one_target(tmp_path: Path) -> None:
    path = tmp_path / "state" / "map.json"
    offsets = OffsetMap.load(path, "src", "host:1")
    offsets.partition("a-b", 2).add(5, 0)
    offsets.partition("a-b", 2).add(7, 1)
    offsets.save()
    again = OffsetMap.load(path, "src", "host:1")
    assert again.partitions == offsets.partitions
    with pytest.raises(SeglogError, match="not host:2"):
        OffsetMap.load(path, "src", "host:2")
    path.write_text("{not json")
    with pytest.raises(SeglogError, match="not a mirror offset map"):
        OffsetMap.load(path, "src", "host:1")
