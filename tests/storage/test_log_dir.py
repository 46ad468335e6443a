from __future__ import annotations

import errno
import json
import logging
import os
import resource
import threading
import time
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirLockedError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import checkpoints, descriptors, filenames, io
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.conftest import BASE_TS, make_batch


def test_create_append_read_reopen(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("orders", 2, {"retention.ms": "1000"})
        logs.append("orders", 1, make_batch([b"a", b"b"], keys=[b"1", b"2"]))
        assert logs.topic_config("orders").retention_ms == 1000
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "orders-0").is_dir() and (tmp_path / "orders-1").is_dir()
    points = checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert points[("orders", 1)] == 2
    with LogDir.open(tmp_path) as logs:
        assert logs.had_clean_shutdown
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        assert [r.value for r in logs.read_records("orders", 1)] == [b"a", b"b"]
        assert logs.topics()["orders"].partitions == 2
        assert logs.topic_config("orders").retention_ms == 1000
        found = logs.offset_for_time("orders", 1, BASE_TS + 1)
        assert found is not None and found.offset == 1


def test_second_open_is_refused_while_locked(tmp_path: Path) -> None:
    with LogDir.open(tmp_path), pytest.raises(LogDirLockedError):
        LogDir.open(tmp_path)


def test_topic_errors(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1)
        with pytest.raises(TopicExistsError):
            logs.create_topic("t", 1)
        with pytest.raises(InvalidTopicError):
            logs.create_topic("bad/name", 1)
        with pytest.raises(InvalidPartitionsError):
            logs.create_topic("u", 0)
        with pytest.raises(InvalidConfigError):
            logs.create_topic("v", 1, {"segment.bytes": "lots"})
        with pytest.raises(InvalidConfigError):
            logs.create_topic("w", 1, {"no.such.config": "1"})
        assert set(logs.topics()) == {"t"}
        with pytest.raises(UnknownTopicOrPartitionError):
            logs.append("missing", 0, make_batch([b"a"]))


def test_create_partitions_alter_and_delete(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1)
        logs.create_partitions("t", 3)
        with pytest.raises(InvalidPartitionsError):
            logs.create_partitions("t", 2)
        logs.append("t", 2, make_batch([b"x"]))
        config = logs.alter_topic_config("t", {"cleanup.policy": "compact"})
        assert config.compact and logs.log("t", 0).config.compact
        config = logs.alter_topic_config("t", {}, ["cleanup.policy"])
        assert not config.compact
        logs.delete_topic("t")
        assert not any(p.name.startswith("t-") for p in tmp_path.iterdir())
    with LogDir.open(tmp_path) as logs:
        assert logs.topics() == {}


def test_unclean_shutdown_recovers(tmp_path: Path) -> None:
    logs = LogDir.open(tmp_path)
    logs.create_topic("t", 1)
    for i in range(10):
        logs.append("t", 0, make_batch([bytes([i])]))
    logs.log("t", 0).flush()
    # Simulate a crash: drop the lock without a clean close.
    logs._release_lock()
    with LogDir.open(tmp_path) as again:
        assert not again.had_clean_shutdown
        assert again.log("t", 0).log_end_offset == 10


def test_broker_defaults_apply_to_topics(tmp_path: Path) -> None:
    defaults = LogConfig.from_broker_properties(
        {"log.retention.hours": "1", "internal.log.segment.bytes": "5000"}
    )
    with LogDir.open(
        tmp_path, defaults=defaults, settings=LogDirSettings(num_partitions=3)
    ) as logs:
        logs.create_topic("t")
        assert logs.topics()["t"].partitions == 3
        assert logs.topic_config("t").retention_ms == 3_600_000
        assert logs.topic_config("t").segment_bytes == 5000


def test_maintenance_runs_retention_and_deletions(tmp_path: Path) -> None:
    now = [BASE_TS / 1000]
    settings = LogDirSettings(log_retention_check_interval_ms=1000)
    with LogDir.open(tmp_path, settings=settings, clock=lambda: now[0]) as logs:
        logs.create_topic(
            "t",
            1,
            {
                "internal.segment.bytes": "500",
                "retention.ms": "1000",
                "file.delete.delay.ms": "5000",
            },
        )
        for i in range(10):
            logs.append("t", 0, make_batch([bytes([i]) * 150], timestamp=BASE_TS))
        logs.run_maintenance()
        now[0] += 100
        logs.run_maintenance()
        assert any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
        now[0] += 10
        logs.run_maintenance()
        assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
        assert logs.log("t", 0).log_start_offset == 10


def test_has_topic_follows_creation_and_deletion(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        assert not logs.has_topic("t")
        logs.create_topic("t", 1)
        assert logs.has_topic("t")
        logs.delete_topic("t")
        assert not logs.has_topic("t")


# ------------------------------------------------- creation is all or nothing


def _assert_no_trace(path: Path, topic: str) -> None:
    """Nothing of ``topic`` is left: no directory, no entry in the topics file."""
    assert not any(p.name.startswith(f"{topic}-") for p in path.iterdir())
    assert topic not in json.loads((path / "seglog-topics.json").read_text())["topics"]


def _full_disk_at(monkeypatch: pytest.MonkeyPatch, logs: LogDir, failing_call: int) -> None:
    """The ``failing_call``-th partition.metadata ``logs`` writes fails as on a full disk."""
    real = logs.env.atomic_write_text
    calls = [0]

    def write(path: Path, text: str) -> None:
        if path.name == "partition.metadata":
            calls[0] += 1
            if calls[0] == failing_call:
                exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                raise io.storage_error("write", path, exc)
        real(path, text)

    monkeypatch.setattr(logs.env, "atomic_write_text", write)


def test_a_failed_creation_leaves_no_phantom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("kept", 1)
        _full_disk_at(monkeypatch, logs, 3)
        with pytest.raises(StorageError, match="the disk is full"):
            logs.create_topic("t", 5)
        monkeypatch.undo()
        assert set(logs.topics()) == {"kept"}
        assert not logs.has_topic("t")
        with pytest.raises(UnknownTopicOrPartitionError):
            logs.log("t", 0)
        _assert_no_trace(tmp_path, "t")
        # The name is free again.
        logs.create_topic("t", 2)
        logs.append("t", 1, make_batch([b"x"]))
    with LogDir.open(tmp_path) as logs:
        assert logs.topics()["t"].partitions == 2
        assert not logs.offline()


def test_a_failed_partition_growth_leaves_no_phantom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 2)
        _full_disk_at(monkeypatch, logs, 2)
        with pytest.raises(StorageError):
            logs.create_partitions("t", 5)
        monkeypatch.undo()
        assert logs.topics()["t"].partitions == 2
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t-")) == [
            "t-0",
            "t-1",
        ]
    with LogDir.open(tmp_path) as logs:
        assert logs.topics()["t"].partitions == 2
        logs.create_partitions("t", 3)


def test_running_out_of_file_descriptors_leaves_no_phantom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the check that keeps a reserve of descriptors (tests/storage/
    # test_descriptors.py), to the creation that runs out of them half-way.
    monkeypatch.setattr(descriptors, "DESCRIPTORS_PER_PARTITION", 0)
    monkeypatch.setattr(descriptors, "reserve", lambda: 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with LogDir.open(tmp_path) as logs:
        in_use = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 40, hard))
        try:
            with pytest.raises(StorageError):
                logs.create_topic("many", 200)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert not logs.has_topic("many")
        _assert_no_trace(tmp_path, "many")
    with LogDir.open(tmp_path) as logs:
        assert logs.topics() == {}


# ------------------------------------------- one bad topic does not stop a start


def _corrupt(partition_dir: Path) -> None:
    """Make the partition impossible to open: its first segment's log is a directory."""
    log_file = partition_dir / "00000000000000000000.log"
    log_file.unlink()
    log_file.mkdir()


def test_a_partition_that_cannot_be_opened_is_offline_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("good", 1)
        logs.create_topic("bad", 2)
        logs.append("good", 0, make_batch([b"g"]))
        for partition in (0, 1):
            logs.append("bad", partition, make_batch([b"b"]))
        logs.log("bad", 1).increment_log_start_offset(1)
    _corrupt(tmp_path / "bad-0")
    with caplog.at_level(logging.ERROR, logger="seglog.storage.log_dir"):
        logs = LogDir.open(tmp_path)
    try:
        assert "partition 0 of topic bad cannot be opened" in caplog.text
        assert "Traceback" in caplog.text or caplog.records[0].exc_info
        assert set(logs.offline()) == {("bad", 0)}
        with pytest.raises(StorageError, match="offline") as caught:
            logs.log("bad", 0)
        assert caught.value.kafka_error == "KAFKA_STORAGE_ERROR"
        assert [r.value for r in logs.read_records("good", 0)] == [b"g"]
        assert logs.log("bad", 1).log_end_offset == 1
        assert set(logs.topics()) == {"good", "bad"}
        logs.alter_topic_config("bad", {"retention.ms": "5000"})
        logs.checkpoint()
    finally:
        logs.close()
    # The offline partition keeps its checkpoint entries for the start that opens it.
    points = checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert points[("bad", 0)] == 1
    # Repaired, it opens again with its data.
    (tmp_path / "bad-0" / "00000000000000000000.log").rmdir()
    with LogDir.open(tmp_path) as logs:
        assert not logs.offline()
        assert logs.log("bad", 0).config.retention_ms == 5000
        assert logs.log("bad", 1).log_start_offset == 1


def test_an_offline_topic_can_be_deleted(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("bad", 1)
    _corrupt(tmp_path / "bad-0")
    with LogDir.open(tmp_path) as logs:
        logs.delete_topic("bad")
        assert logs.topics() == {} and not logs.offline()
    with LogDir.open(tmp_path) as logs:
        assert logs.topics() == {} and not logs.offline()
        _assert_no_trace(tmp_path, "bad")


def test_a_topic_whose_stored_config_is_invalid_is_offline(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("old", 1)
        logs.create_topic("fine", 1)
    topics_file = tmp_path / "seglog-topics.json"
    stored = json.loads(topics_file.read_text())
    # As an earlier version could have accepted and stored it.
    stored["topics"]["old"]["configs"] = {"segment.bytes": str(2**40)}
    topics_file.write_text(json.dumps(stored))
    with LogDir.open(tmp_path) as logs:
        assert set(logs.offline()) == {("old", 0)}
        assert "segment.bytes" in logs.offline()[("old", 0)]
        logs.log("fine", 0).append(make_batch([b"x"]))


# ------------------------------------------------------------------ topic names


def test_names_that_collide_once_dot_and_underscore_are_alike(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("metrics_cpu", 1)
        with pytest.raises(InvalidTopicError) as caught:
            logs.create_topic("metrics.cpu", 1)
        assert str(caught.value) == "Topic 'metrics.cpu' collides with existing topic: metrics_cpu"
        assert caught.value.kafka_error == "INVALID_TOPIC_EXCEPTION"
        logs.create_topic("metrics-cpu", 1)  # '-' is not a collision character
        assert set(logs.topics()) == {"metrics_cpu", "metrics-cpu"}
        _assert_no_trace(tmp_path, "metrics.cpu")


@pytest.mark.parametrize("length", [200, 214, 230, 249])
def test_a_topic_with_a_long_name_can_be_deleted(tmp_path: Path, length: int) -> None:
    name = "x" * length
    with LogDir.open(tmp_path) as logs:
        logs.create_topic(name, 12)
        logs.append(name, 11, make_batch([b"v"]))
        logs.delete_topic(name)
        assert logs.topics() == {}
        assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    with LogDir.open(tmp_path) as logs:
        assert logs.topics() == {}


def test_an_interrupted_deletion_of_a_long_name_is_finished_at_start(tmp_path: Path) -> None:
    name = "y" * 249
    with LogDir.open(tmp_path) as logs:
        logs.create_topic(name, 1)
        logs.append(name, 0, make_batch([b"v"]))
        logs.delete_topic(name)
    # As a crash after the rename and before the removal leaves it.
    leftover = tmp_path / filenames.delete_dir_name(name, 0)
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x" * 100)
    with LogDir.open(tmp_path) as logs:
        assert not leftover.exists()
        assert logs.topics() == {}


def test_a_failed_deletion_is_logged_and_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 2)
        real = logs.env.rename

        def failing_rename(src: Path | str, dst: Path | str) -> None:
            if Path(src).name == "t-1":
                raise io.storage_error("rename", src, OSError(errno.EIO, os.strerror(errno.EIO)))
            real(src, dst)

        monkeypatch.setattr(logs.env, "rename", failing_rename)
        with caplog.at_level(logging.ERROR), pytest.raises(StorageError, match="t-1"):
            logs.delete_topic("t")
        assert "cannot delete partition 1 of topic t" in caplog.text
        assert any(r.exc_info for r in caplog.records)
        with pytest.raises(StorageError, match="offline"):
            logs.log("t", 1)
        monkeypatch.undo()
        logs.delete_topic("t")  # the retry finishes it
        assert logs.topics() == {}
        _assert_no_trace(tmp_path, "t")


class _HoldingEnv(io.Env):
    """Holds the creation of one partition directory until released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.held = threading.Event()
        self.release = threading.Event()

    def mkdir(self, path: Path | str) -> None:
        if Path(path).name == self.name and not self.held.is_set():
            self.held.set()
            self.release.wait(300)
        super().mkdir(path)


def _read_everything(logs: LogDir) -> None:
    for name, info in logs.topics().items():
        for partition in range(info.partitions):
            try:
                logs.log(name, partition)
            except UnknownTopicOrPartitionError:
                # Only a topic being deleted may lose partitions under a reader.
                assert int(name[1:]) % 2 == 1


def test_readers_never_wait_for_nor_see_half_a_creation(tmp_path: Path) -> None:
    """Administration on a worker thread; readers see whole topics and are not held up.

    One creation is held part-way (its third partition's directory): a reader that
    waited for creations would then never finish, so a reader that does finish
    proves it did not wait, however slow the machine.
    """
    env = _HoldingEnv("t4-2")
    with LogDir.open(tmp_path, env=env) as logs:
        done = threading.Event()
        errors: list[BaseException] = []

        def administer() -> None:
            try:
                for i in range(12):
                    logs.create_topic(f"t{i}", 4)
                    logs.create_partitions(f"t{i}", 6)
                    if i % 2:
                        logs.delete_topic(f"t{i}")
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=administer)
        worker.start()
        try:
            assert env.held.wait(300), "the creation of t4 never reached its third partition"
            seen: list[set[str]] = []

            def read_while_held() -> None:
                _read_everything(logs)
                seen.append(set(logs.topics()))

            reader = threading.Thread(target=read_while_held)
            reader.start()
            reader.join(300)
            assert not reader.is_alive(), "a reader waited for a topic's creation"
            # t4 is half made: not shown; the whole topics before it are.
            assert seen == [{"t0", "t2"}]
        finally:
            env.release.set()
        while not done.is_set():
            _read_everything(logs)
            time.sleep(0.001)
        worker.join()
        assert not errors
        assert sorted(logs.topics()) == sorted(f"t{i}" for i in range(0, 12, 2))
