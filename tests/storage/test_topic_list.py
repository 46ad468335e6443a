"""Topic creations and deletions are on record before their files: a crash is undone or finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.records.builder import build_batch
from seglog.storage.dir_checkpoints import MergedCheckpoints
from seglog.storage.log_dir import LogDir, read_topic_list
from seglog.storage.topic_list import TOPICS_FILE, committed, decode, encode


def _record(path: Path, name: str, **changes: object) -> None:
    """Edit the topic list as a creation or deletion under way leaves it."""
    data = json.loads((path / TOPICS_FILE).read_text())
    data["topics"][name].update(changes)
    (path / TOPICS_FILE).write_text(json.dumps(data))


def _cut_short(tmp_path: Path) -> Path:
    """A directory where a crash cut short a topic creation, a CreatePartitions and a deletion."""
    path = tmp_path / "data"
    with LogDir.open(path) as log_dir:
        log_dir.create_topic("grown", 2, {"cleanup.policy": "compact"})
        log_dir.create_topic("new", 4, {"cleanup.policy": "compact"})
        log_dir.create_topic("gone", 2)
        log_dir.create_topic("kept", 1)
        for name, partition in (("grown", 0), ("gone", 1), ("kept", 0)):
            log_dir.append(name, partition, build_batch([(b"k", b"v")]))
        log_dir.create_partitions("grown", 3)
    _record(path, "new", creating_from=0)  # the crash came after partitions 0-3 were made
    _record(path, "grown", creating_from=2)  # ... after partition 2 was made
    _record(path, "gone", deleting=True)  # ... before any directory was removed
    return path


def test_a_creation_cut_short_is_taken_back_and_a_deletion_finished(tmp_path: Path) -> None:
    path = _cut_short(tmp_path)
    with LogDir.open(path) as log_dir:
        topics = log_dir.topics()
        assert sorted(topics) == ["grown", "kept"]
        assert topics["grown"].partitions == 2
        assert topics["grown"].overrides == {"cleanup.policy": "compact"}
        assert log_dir.log("grown", 0).log_end_offset == 1
        assert log_dir.log("kept", 0).log_end_offset == 1
        assert not any((path / f"new-{p}").exists() for p in range(4))
        assert not (path / "grown-2").exists()
        assert not any((path / f"gone-{p}").exists() for p in range(2))
        # The client never heard that the creation succeeded: retrying it succeeds.
        log_dir.create_topic("new", 4, {"cleanup.policy": "compact"})
        log_dir.create_partitions("grown", 3)
    recorded = decode((path / TOPICS_FILE).read_bytes(), path)
    assert not any(info.unfinished for info in recorded.values())
    assert recorded["new"].partitions == 4 and recorded["grown"].partitions == 3


def test_the_preparer_of_a_shared_directory_finishes_them_too(tmp_path: Path) -> None:
    path = _cut_short(tmp_path)
    topics = read_topic_list(path)
    assert sorted(topics) == ["grown", "kept"]
    assert topics["grown"].partitions == 2
    assert not (path / "new-0").exists() and not (path / "gone-0").exists()


def test_readers_that_do_not_write_the_list_see_only_what_is_committed(tmp_path: Path) -> None:
    path = _cut_short(tmp_path)
    reader = LogDir.open(
        path,
        lock_file=".lock-reader",
        writes_topics=False,
        checkpoint_policy=MergedCheckpoints(True),
    )
    try:
        topics = reader.topics()
        assert sorted(topics) == ["grown", "kept"]
        assert topics["grown"].partitions == 2
        # Their directories are the writer's to remove, not a reader's to adopt.
        assert (path / "new-0").exists()
    finally:
        reader.close()


def test_a_failed_creation_leaves_no_record(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with LogDir.open(path, defaults=LogConfig()) as log_dir:
        log_dir.create_topic("clash", 1)
        (path / "other-1").write_text("a file where a partition directory must go")
        with pytest.raises(StorageError):
            log_dir.create_topic("other", 3)
        assert "other" not in log_dir.topics()
    recorded = decode((path / TOPICS_FILE).read_bytes(), path)
    assert sorted(recorded) == ["clash"]


def test_committed_view_and_round_trip(tmp_path: Path) -> None:
    path = _cut_short(tmp_path)
    recorded = decode((path / TOPICS_FILE).read_bytes(), path)
    assert decode(encode(recorded).encode(), "again") == recorded
    view = committed(recorded)
    assert sorted(view) == ["grown", "kept"]
    assert view["grown"].partitions == 2 and view["grown"].creating_from is None
    assert recorded["grown"].partitions == 3  # the view is a copy
