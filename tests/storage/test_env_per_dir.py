"""A log directory does all its file work through the environment it was given.

Two directories in one process, each over its own :class:`~seglog.storage.io.Env`,
while the process's default environment refuses every call: creation, appends,
rolls, producer snapshots, flushes, checkpoints, compaction, retention,
deletion and a reopen touch only their own environment, and a power cut of one
leaves the other as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import io
from seglog.storage.cleaner import LogCleaner
from seglog.storage.log_dir import LogDir, LogDirSettings
from seglog.storage.verify import verify_log
from tests.storage.conftest import make_batch
from tests.storage.faulty_env import FaultyEnv

SETTINGS = LogDirSettings(log_cleaner_enable=False)
COMPACTED = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": "700",
    "min.cleanable.dirty.ratio": "0.01",
}


class Refusing(io.Env):
    """The default environment during these tests: any call through it is a bug."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and callable(getattr(io.Env, name, None)):
            raise AssertionError(f"io.Env.{name} called on the default environment")
        return super().__getattribute__(name)


class Recording(io.Env):
    """The real file system, remembering every path it was asked about."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def _saw(self, *paths: Path | str | int) -> None:
        self.paths += [Path(p) for p in paths if not isinstance(p, int)]

    def open(self, path: Path | str, flags: int, mode: int = 0o644) -> int:
        self._saw(path)
        return super().open(path, flags, mode)

    def rename(self, src: Path | str, dst: Path | str) -> None:
        self._saw(src, dst)
        super().rename(src, dst)

    def unlink(self, path: Path | str) -> bool:
        self._saw(path)
        return super().unlink(path)

    def fsync_dir(self, path: Path | str) -> None:
        self._saw(path)
        super().fsync_dir(path)

    def truncate(self, target: Path | str | int, size: int) -> None:
        self._saw(target)
        super().truncate(target, size)

    def read_file(self, path: Path | str) -> bytes | None:
        self._saw(path)
        return super().read_file(path)

    def rmtree(self, path: Path | str, *, ignore_errors: bool = True) -> None:
        self._saw(path)
        super().rmtree(path, ignore_errors=ignore_errors)


@pytest.fixture(autouse=True)
def refusing_default() -> Iterator[None]:
    with io.use_env(Refusing()):
        yield


def _exercise(log_dir: LogDir) -> None:
    """Everything a directory does to its files, short of a broker."""
    log_dir.create_topic("plain", 2)
    log_dir.create_topic("compacted", 1, COMPACTED)
    for i in range(30):
        log_dir.append("plain", i % 2, make_batch([b"p%d" % i * 20]))
        log_dir.append("compacted", 0, make_batch([b"v" * 40], keys=[b"k%d" % (i % 3)]))
    idempotent = build_batch(
        [SimpleRecord(key=b"k", value=b"v")], producer_id=7, producer_epoch=0, base_sequence=0
    )
    log_dir.append("plain", 0, idempotent)
    log_dir.log("plain", 0).roll()  # a producer snapshot at the roll
    log_dir.log("plain", 0).flush()
    log_dir.log("plain", 0).truncate_to(log_dir.log("plain", 0).log_end_offset - 2)
    log_dir.log("plain", 1).truncate_fully_and_start_at(100)
    log_dir.log("plain", 1).increment_log_start_offset(100)
    assert LogCleaner(log_dir).clean_once() is not None
    log_dir.run_retention()
    log_dir.checkpoint()
    log_dir.create_topic("doomed", 1)
    log_dir.delete_topic("doomed")
    log_dir.run_pending_deletions(now_ms=2**62)


def test_two_directories_each_use_their_own_environment(tmp_path: Path) -> None:
    first_root, second_root = tmp_path / "first", tmp_path / "second"
    first_root.mkdir()
    first = FaultyEnv(first_root)
    second = Recording()
    with (
        LogDir.open(first_root, settings=SETTINGS, env=first) as one,
        LogDir.open(second_root, settings=SETTINGS, env=second) as two,
    ):
        assert one.env is first and two.env is second
        for log_dir in (one, two):
            _exercise(log_dir)
            for log in log_dir.logs().values():
                assert log.env is log_dir.env
                assert all(segment.env is log_dir.env for segment in log.segments)
        assert second.paths
        assert all(second_root in p.parents or p == second_root for p in second.paths)
        unsynced = one.append("plain", 1, make_batch([b"not synced"])).first_offset
        kept = two.append("plain", 1, make_batch([b"kept"])).first_offset

    # A power cut of the first file system drops what only it held unsynced
    # (nothing here, after a clean close) and leaves the second alone.
    first.power_cut()
    with (
        LogDir.open(first_root, settings=SETTINGS, env=first) as one,
        LogDir.open(second_root, settings=SETTINGS, env=Recording()) as two,
    ):
        for log_dir in (one, two):
            for key, log in log_dir.logs().items():
                report = verify_log(log)
                assert report.ok, (key, report.problems)
        assert one.log("plain", 1).log_end_offset == unsynced + 1
        assert two.log("plain", 1).log_end_offset == kept + 1


class Descriptors(io.Env):
    """The real file system, keeping the descriptors opened through it and not yet closed."""

    def __init__(self) -> None:
        self.open_fds: dict[int, str] = {}

    def open(self, path: Path | str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.open_fds[fd] = Path(path).name
        return fd

    def close(self, fd: int) -> None:
        self.open_fds.pop(fd, None)
        super().close(fd)


def test_every_descriptor_opened_through_the_environment_is_closed_through_it(
    tmp_path: Path,
) -> None:
    """Segments close their .log through the environment that opened it, so that one which
    keeps track of descriptors (the faulty file system does) never holds a stale one."""
    env = Descriptors()
    with LogDir.open(tmp_path, settings=SETTINGS, env=env) as log_dir:
        _exercise(log_dir)
        assert any(name.endswith(".log") for name in env.open_fds.values())
    assert env.open_fds == {}
