"""The teardown check of :mod:`tests.log_dirs` passes a valid directory and fails a damaged one."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.records import log_entries
from seglog.storage.log_dir import LogDir, LogDirSettings
from seglog.storage.segment import LogSegment
from tests.log_dirs import check_log_dirs, damaged_reason
from tests.storage.conftest import make_batch

SEGMENT = f"{0:020d}.log"


def _written(root: Path) -> Path:
    """A closed log directory under ``root`` with one topic of two batches."""
    log_dir = LogDir.open(root / "data", settings=LogDirSettings(log_cleaner_enable=False))
    log_dir.create_topic("t", 1)
    log = log_dir.log("t", 0)
    log.append(make_batch([b"a", b"b"]))
    log.append(make_batch([b"c"]))
    log_dir.close()
    return root / "data"


def test_a_closed_log_directory_passes(tmp_path: Path) -> None:
    _written(tmp_path)
    check_log_dirs(tmp_path)


def test_a_cut_segment_fails_naming_its_partition(tmp_path: Path) -> None:
    segment = _written(tmp_path) / "t-0" / SEGMENT
    segment.write_bytes(segment.read_bytes()[:-5])
    with pytest.raises(pytest.fail.Exception, match=r"data: t-0: .*1 problem") as failure:
        check_log_dirs(tmp_path)
    assert "truncated record batch" in str(failure.value)


def test_segments_in_a_directory_not_named_as_a_partition_are_checked(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    segment = LogSegment.create(tmp_path / "bare", 0)
    batch = make_batch([b"a"])
    segment.append([batch], log_entries.scan(batch).entries)
    segment.close()
    check_log_dirs(tmp_path)
    path = tmp_path / "bare" / SEGMENT
    path.write_bytes(path.read_bytes() + b"\0" * 8)
    with pytest.raises(pytest.fail.Exception, match=r"/bare: 0{20}\.log: at position"):
        check_log_dirs(tmp_path)


def test_a_directory_without_segments_has_nothing_to_check(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "notes.txt").write_text("no segments here")
    check_log_dirs(tmp_path)
    check_log_dirs(tmp_path / "missing")


@pytest.mark.leaves_damaged_log_dir("checked: the marker's reason is read back")
def test_the_marker_states_why(request: pytest.FixtureRequest) -> None:
    assert damaged_reason(request.node) == "checked: the marker's reason is read back"


def test_an_unmarked_test_has_no_reason(request: pytest.FixtureRequest) -> None:
    assert damaged_reason(request.node) is None
