"""A partition taken offline by an I/O error: writes refused, reads served, a restart recovers.

Kafka takes its log directory offline at the first I/O error
(``LogDirFailureChannel``); seglog does the same per partition. These tests
drive the error through the faulty file system and check what stays and what
is refused.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.conftest import make_batch
from tests.storage.faulty_env import installed
from tests.storage.test_power_cut import read_log

SETTINGS = LogDirSettings(log_cleaner_enable=False)


def test_a_failed_fsync_takes_only_its_partition_offline(tmp_path: Path) -> None:
    config = LogConfig(flush_messages=1)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        log_dir.create_topic("t", 2)
        log_dir.append("t", 0, make_batch([b"first"]))
        env.fail("fsync", error=errno.EIO, in_dir="t-0")
        with pytest.raises(StorageError, match="Input/output error"):
            log_dir.append("t", 0, make_batch([b"refused"]))
        log = log_dir.log("t", 0)
        assert log.offline_reason is not None
        # Every later write is refused, even with the disk well again.
        for write in (
            lambda: log_dir.append("t", 0, make_batch([b"later"])),
            log.flush,
            log.roll,
        ):
            with pytest.raises(StorageError, match="offline"):
                write()
        # Reads serve what was acknowledged; the other partition goes on.
        assert read_log(log) == [(0, b"first")]
        assert log_dir.append("t", 1, make_batch([b"other"])).first_offset == 0
        recovery_point = log.recovery_point
        log_dir.checkpoint()
        log_dir.close()
        # No clean-shutdown marker: the next start recovers the partition.
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        try:
            assert not log_dir.had_clean_shutdown
            assert recovery_point == 1
            log = log_dir.log("t", 0)
            assert log.offline_reason is None
            assert log_dir.append("t", 0, make_batch([b"after restart"])).first_offset >= 1
            assert read_log(log_dir.log("t", 1)) == [(0, b"other")]
        finally:
            log_dir.close()


def test_a_full_disk_on_write_leaves_the_partition_online(tmp_path: Path) -> None:
    """A write refused for want of space and cut away leaves nothing in doubt."""
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        log_dir.create_topic("t", 1)
        log_dir.append("t", 0, make_batch([b"first"]))
        env.fail("pwritev", error=errno.ENOSPC, partial=0.5)
        with pytest.raises(StorageError, match="disk is full"):
            log_dir.append("t", 0, make_batch([b"refused" * 20]))
        assert log_dir.log("t", 0).offline_reason is None
        assert log_dir.append("t", 0, make_batch([b"room again"])).first_offset == 1
        log_dir.close()


def test_an_eio_on_write_takes_the_partition_offline(tmp_path: Path) -> None:
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        log_dir.create_topic("t", 1)
        env.fail("pwritev", error=errno.EIO)
        with pytest.raises(StorageError, match="Input/output error"):
            log_dir.append("t", 0, make_batch([b"refused"]))
        with pytest.raises(StorageError, match="offline"):
            log_dir.append("t", 0, make_batch([b"later"]))
        log_dir.close()


def test_a_failing_checkpoint_takes_the_directory_offline(tmp_path: Path) -> None:
    """The checkpoint files are the directory's: an I/O error there is Kafka's log dir failure."""
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        log_dir.create_topic("t", 2)
        # A checkpoint is written to a .tmp file, synced, then renamed over the old one.
        env.fail("fsync", error=errno.EIO, named="*-checkpoint.tmp")
        with pytest.raises(StorageError):
            log_dir.checkpoint()
        for partition in (0, 1):
            with pytest.raises(StorageError, match="offline"):
                log_dir.append("t", partition, make_batch([b"refused"]))
        log_dir.close()
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        assert log_dir.append("t", 0, make_batch([b"after restart"])).first_offset == 0
        log_dir.close()


def test_a_restart_after_a_failed_fsync_builds_only_on_durable_bytes(tmp_path: Path) -> None:
    """Linux keeps the pages of a failed fsync cached but clean: a restart reads them back,
    and a later acknowledged batch on top of them must not be lost with them."""
    config = LogConfig(flush_messages=1)
    with installed(tmp_path) as env:
        env.failed_fsync_loses_data = True
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        log_dir.create_topic("t", 1)
        log_dir.append("t", 0, make_batch([b"first"]))
        env.fail("fsync", error=errno.EIO, named="*.log")
        with pytest.raises(StorageError):
            log_dir.append("t", 0, make_batch([b"in doubt"]))
        log_dir.close()
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        info = log_dir.append("t", 0, make_batch([b"acknowledged after the restart"]))
        env.power_cut()
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        try:
            values = dict(read_log(log_dir.log("t", 0)))
            assert values[0] == b"first"
            assert values.get(info.first_offset) == b"acknowledged after the restart"
        finally:
            log_dir.close()
