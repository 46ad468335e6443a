from __future__ import annotations

from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import checkpoints
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
