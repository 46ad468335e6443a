"""Several processes' share of one log directory: each serves some partitions."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from seglog.broker.nodes.cluster import lock_held
from seglog.errors import LogDirLockedError, NotLeaderOrFollowerError, StorageError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import checkpoints
from seglog.storage import log_dir as log_dir_module
from seglog.storage.dir_checkpoints import MergedCheckpoints
from seglog.storage.log_dir import LogDir, TopicInfo, read_topic_list, write_topic_list


def _leader(node: int):  # type: ignore[no-untyped-def]
    def serves(info: TopicInfo, partition: int) -> bool:
        replicas = info.replicas_of(partition)
        return bool(replicas) and replicas is not None and replicas[0] == node

    return serves


def _alternate(first: int, count: int) -> list[list[int]]:
    return [[1 + (first + i) % 2] for i in range(count)]


def _open(path: Path, node: int, *, writes: bool) -> LogDir:
    return LogDir.open(
        path,
        owns=_leader(node),
        lock_file=f".lock-node-{node}",
        checkpoint_policy=MergedCheckpoints(False),
        writes_topics=writes,
    )


def test_each_process_opens_only_its_partitions_and_keeps_the_others_checkpoint_lines(
    tmp_path: Path,
) -> None:
    one = _open(tmp_path, 1, writes=True)
    two = _open(tmp_path, 2, writes=False)
    try:
        one.create_topic("t", 4, replicas=_alternate)
        assert sorted(one.logs()) == [("t", 0), ("t", 2)]
        assert two.refresh() == [("t", 1), ("t", 3)]
        with pytest.raises(NotLeaderOrFollowerError):
            one.log("t", 1)
        with pytest.raises(NotLeaderOrFollowerError):
            two.log("t", 0)
        for log_dir, partition in ((one, 0), (two, 1)):
            log = log_dir.log("t", partition)
            info = log.append(build_batch([SimpleRecord(b"v")]))
            log.flush(info.last_offset + 1)
        one.checkpoint()
        two.checkpoint()
        one.checkpoint()
        points = checkpoints.read_offset_checkpoint(
            tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT
        )
        assert points[("t", 0)] == 1 and points[("t", 1)] == 1
        assert len(points) == 4
        one.create_partitions("t", 5, replicas=_alternate)
        assert one.topic("t").replicas == [[1], [2], [1], [2], [1]]  # type: ignore[union-attr]
        assert two.refresh() == []
        two.release_topic("t")  # before the writer removes the files
        one.delete_topic("t")
        two.refresh()
        assert two.logs() == {}
        two.checkpoint()
        one.checkpoint()
        assert (
            checkpoints.read_offset_checkpoint(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT)
            == {}
        )
    finally:
        one.close()
        two.close()
    # The processes leave the clean-shutdown marker to their supervisor.
    assert not (tmp_path / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_a_node_lock_does_not_exclude_another_node_but_the_same_one(tmp_path: Path) -> None:
    one = _open(tmp_path, 1, writes=True)
    try:
        with pytest.raises(LogDirLockedError):
            _open(tmp_path, 1, writes=False)
        _open(tmp_path, 2, writes=False).close()
    finally:
        one.close()


def test_a_node_starting_while_another_probes_its_lock_still_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another node's check of whether this one runs (``lock_held``) holds its lock for an
    instant; a node opening the directory meanwhile waits for it rather than failing."""
    monkeypatch.setattr(log_dir_module, "LOCK_PROBE_WAIT", 120.0)
    lock_path = tmp_path / ".lock-node-1"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the probe, caught mid-check
    release = threading.Timer(0.2, lambda: os.close(fd))
    release.start()
    try:
        node = _open(tmp_path, 1, writes=True)
    finally:
        release.join()
    try:
        assert lock_held(lock_path)
    finally:
        node.close()
    assert not lock_held(lock_path)


def test_topic_list_adopts_directories_and_round_trips_replicas(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log_dir:
        log_dir.create_topic("a", 2)
    (tmp_path / "copied-0").mkdir()
    topics = read_topic_list(tmp_path)
    assert sorted(topics) == ["a", "copied"]
    assert topics["a"].replicas is None
    topics["a"].replicas = [[1], [2]]
    write_topic_list(tmp_path, topics)
    assert read_topic_list(tmp_path)["a"].replicas == [[1], [2]]
    # A single process ignores the assignment and serves everything.
    with LogDir.open(tmp_path) as log_dir:
        assert sorted(log_dir.logs()) == [("a", 0), ("a", 1), ("copied", 0)]


def test_a_process_that_does_not_write_the_topic_list_refuses_topic_administration(
    tmp_path: Path,
) -> None:
    one = _open(tmp_path, 1, writes=True)
    two = _open(tmp_path, 2, writes=False)
    try:
        one.create_topic("t", 2, replicas=_alternate)
        two.refresh()
        refusals = [
            lambda: two.create_topic("u", 1),
            lambda: two.create_partitions("t", 3),
            lambda: two.alter_topic_config("t", {"retention.ms": "1000"}),
            lambda: two.delete_topic("t"),
        ]
        for refused in refusals:
            with pytest.raises(StorageError, match="written by another process"):
                refused()
        # Nothing changed: the list and the partitions are the writer's.
        assert read_topic_list(tmp_path).keys() == {"t"}
        assert one.topic("t").partitions == 2  # type: ignore[union-attr]
        assert one.topic("t").overrides == {}  # type: ignore[union-attr]
        assert sorted(two.logs()) == [("t", 1)]
    finally:
        one.close()
        two.close()
