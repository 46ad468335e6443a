"""LogDir.on_partitions_closed: told which partitions stopped being served, once closed; and
LogDir.on_topics_deleted: told the ids of topics gone."""

from __future__ import annotations

import uuid
from pathlib import Path

from seglog.storage.dir_checkpoints import MergedCheckpoints
from seglog.storage.log_dir import LogDir, TopicInfo
from seglog.storage.verify import verify_log


def _leader(node: int):  # type: ignore[no-untyped-def]
    def serves(info: TopicInfo, partition: int) -> bool:
        replicas = info.replicas_of(partition)
        return bool(replicas) and replicas is not None and replicas[0] == node

    return serves


def _alternate(first: int, count: int) -> list[list[int]]:
    return [[1 + (first + i) % 2] for i in range(count)]


def _two_processes(path: Path) -> tuple[LogDir, LogDir]:
    """Two nodes' views of one directory: node 1 writes the topic list, node 2 reads it."""
    writer = LogDir.open(
        path,
        owns=_leader(1),
        lock_file=".lock-node-1",
        checkpoint_policy=MergedCheckpoints(False),
    )
    reader = LogDir.open(
        path,
        owns=_leader(2),
        lock_file=".lock-node-2",
        checkpoint_policy=MergedCheckpoints(False),
        writes_topics=False,
    )
    return writer, reader


def _close_verified(*log_dirs: LogDir) -> None:
    """Check every partition still open, then close."""
    for log_dir in log_dirs:
        for log in log_dir.logs().values():
            assert verify_log(log).problems == []
        log_dir.close()


def test_a_deleted_topic_reports_its_partitions_after_closing_them(tmp_path: Path) -> None:
    log_dir = LogDir.open(tmp_path)
    try:
        log_dir.create_topic("kept", 1)
        log_dir.create_topic("gone", 3)
        logs = [log_dir.log("gone", p) for p in range(3)]
        told: list[list[tuple[str, int]]] = []

        def closed(keys: list[tuple[str, int]]) -> None:
            # Called once every log is closed: a reader woken now finds it so.
            assert all(log.closed for log in logs)
            told.append(sorted(keys))

        log_dir.on_partitions_closed = closed
        log_dir.delete_topic("gone")
        assert told == [[("gone", 0), ("gone", 1), ("gone", 2)]]
        assert not log_dir.log("kept", 0).closed
        assert sorted(log_dir.logs()) == [("kept", 0)]
    finally:
        _close_verified(log_dir)


def test_a_released_topic_and_a_refresh_that_drops_one_report_their_partitions(
    tmp_path: Path,
) -> None:
    writer, reader = _two_processes(tmp_path)
    try:
        writer.create_topic("released", 4, replicas=_alternate)
        writer.create_topic("dropped", 2, replicas=_alternate)
        reader.refresh()
        told: list[list[tuple[str, int]]] = []
        reader.on_partitions_closed = lambda keys: told.append(sorted(keys))

        reader.release_topic("released")
        assert told == [[("released", 1), ("released", 3)]]
        writer.delete_topic("released")
        reader.refresh()  # nothing of it was open any more: nothing to tell
        assert len(told) == 1

        writer.delete_topic("dropped")  # without a release first: the refresh closes it
        reader.refresh()
        assert told[1:] == [[("dropped", 1)]]
        assert reader.logs() == {}
    finally:
        _close_verified(writer, reader)


def test_deleted_topics_are_told_by_id_where_deleted_and_where_refreshed(
    tmp_path: Path,
) -> None:
    writer, reader = _two_processes(tmp_path)
    try:
        writer.create_topic("gone", 2, replicas=_alternate)
        writer.create_topic("again", 1, replicas=_alternate)
        writer.create_topic("kept", 1, replicas=_alternate)
        reader.refresh()
        ids = {name: info.topic_id for name, info in writer.topics().items()}
        here: list[list[uuid.UUID]] = []
        there: list[list[uuid.UUID]] = []
        writer.on_topics_deleted = here.append
        reader.on_topics_deleted = there.append

        writer.delete_topic("gone")
        writer.delete_topic("again")
        writer.create_topic("again", 1, replicas=_alternate)  # the same name, a new id
        assert here == [[ids["gone"]], [ids["again"]]]
        reader.refresh()  # one refresh sees both go, the one made again under a new id too
        assert [sorted(told, key=str) for told in there] == [
            sorted([ids["gone"], ids["again"]], key=str)
        ]
        reader.refresh()  # nothing more gone: nothing told
        assert len(there) == 1
        assert ids["kept"] not in there[0]
    finally:
        _close_verified(writer, reader)
