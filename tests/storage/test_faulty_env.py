"""The test file system itself: what a power cut keeps, and failures on demand."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from seglog.errors import StorageError
from seglog.storage import io
from tests.storage.faulty_env import FaultyEnv, Files, installed


@pytest.fixture
def env(tmp_path: Path) -> Iterator[FaultyEnv]:
    with installed(tmp_path / "root") as faulty:
        yield faulty


def _write(env: FaultyEnv, path: Path, data: bytes, *, sync: bool) -> None:
    fd = env.open(path, os.O_RDWR | os.O_CREAT)
    try:
        env.pwritev(fd, [data], 0)
        if sync:
            env.fsync(fd)
    finally:
        env.close(fd)


def test_bytes_since_the_last_fsync_are_lost(env: FaultyEnv) -> None:
    path = env.root / "f"
    _write(env, path, b"synced", sync=True)
    env.fsync_dir(env.root)
    fd = env.open(path, os.O_RDWR)
    env.pwritev(fd, [b"SYNCED and more"], 0)
    env.power_cut()
    assert path.read_bytes() == b"synced"
    with pytest.raises(OSError):
        os.fstat(fd)  # the process's descriptors died with it


def test_truncation_since_the_last_fsync_is_lost(env: FaultyEnv) -> None:
    path = env.root / "f"
    _write(env, path, b"0123456789", sync=True)
    env.fsync_dir(env.root)
    env.truncate(path, 3)
    env.power_cut()
    assert path.read_bytes() == b"0123456789"


def test_a_file_needs_its_directory_synced(env: FaultyEnv) -> None:
    _write(env, env.root / "synced-data-only", b"x", sync=True)
    env.power_cut()
    assert list(env.root.iterdir()) == []
    _write(env, env.root / "name-only", b"x", sync=False)
    env.fsync_dir(env.root)
    env.power_cut()
    # The name survives; the bytes never reached the disk (ext4's empty file).
    assert (env.root / "name-only").read_bytes() == b""


def test_rename_and_unlink_need_the_directory_synced(env: FaultyEnv) -> None:
    a, b, c = env.root / "a", env.root / "b", env.root / "c"
    _write(env, a, b"A", sync=True)
    _write(env, c, b"C", sync=True)
    env.fsync_dir(env.root)
    env.rename(a, b)
    env.unlink(c)
    assert env.durable_names(env.root) == {"a", "c"}
    env.power_cut()
    assert sorted(p.name for p in env.root.iterdir()) == ["a", "c"]
    assert a.read_bytes() == b"A" and c.read_bytes() == b"C"
    env.rename(a, b)
    env.unlink(c)
    env.fsync_dir(env.root)
    env.power_cut()
    assert sorted(p.name for p in env.root.iterdir()) == ["b"]
    assert b.read_bytes() == b"A"


def test_rename_over_a_file_restores_both(env: FaultyEnv) -> None:
    old, tmp = env.root / "file", env.root / "file.tmp"
    _write(env, old, b"old", sync=True)
    env.fsync_dir(env.root)
    _write(env, tmp, b"new", sync=True)
    env.rename(tmp, old)
    env.power_cut()
    assert old.read_bytes() == b"old" and not tmp.exists()


def test_directories_and_their_entries(env: FaultyEnv) -> None:
    sub = env.root / "t-0"
    env.mkdir(sub)
    _write(env, sub / "f", b"data", sync=True)
    env.fsync_dir(sub)
    env.power_cut()
    assert not sub.exists()  # the root was never synced after the mkdir
    env.mkdir(sub)
    env.fsync_dir(env.root)
    _write(env, sub / "f", b"data", sync=True)
    env.power_cut()
    assert sub.is_dir() and list(sub.iterdir()) == []
    _write(env, sub / "f", b"data", sync=True)
    env.fsync_dir(sub)
    moved = env.root / "t-0.x-delete"
    env.rename(sub, moved)
    env.rmtree(moved)
    env.power_cut()
    assert (sub / "f").read_bytes() == b"data"


def test_msync_makes_a_mapped_file_durable(env: FaultyEnv) -> None:
    path = env.root / "index"
    _write(env, path, bytes(8), sync=False)
    env.fsync_dir(env.root)
    fd = env.open(path, os.O_RDWR)
    file_map = env.mmap(fd, 8, writable=True, name=path)
    env.close(fd)  # a map holds no descriptor
    file_map.buffer[:4] = b"abcd"
    env.msync(file_map, name=path)
    file_map.buffer[4:] = b"efgh"
    file_map.close()
    env.power_cut()
    assert path.read_bytes() == b"abcd" + bytes(4)


def test_keep_unsynced_chooses_per_file(env: FaultyEnv) -> None:
    for name in ("kept", "lost"):
        _write(env, env.root / name, b"old", sync=True)
    env.fsync_dir(env.root)
    for name in ("kept", "lost"):
        _write(env, env.root / name, b"new", sync=False)
    env.power_cut(keep_unsynced=lambda relative: relative == PurePosixPath("kept"))
    assert (env.root / "kept").read_bytes() == b"new"
    assert (env.root / "lost").read_bytes() == b"old"


def test_fail_the_nth_call(env: FaultyEnv) -> None:
    path = env.root / "f"
    fd = env.open(path, os.O_RDWR | os.O_CREAT)
    env.fail("pwritev", nth=2, error=errno.EIO)
    env.pwritev(fd, [b"one"], 0)
    with pytest.raises(StorageError, match=r"cannot write .*f: Input/output error") as info:
        env.pwritev(fd, [b"two"], 3)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.EIO
    env.pwritev(fd, [b"three"], 3)  # one failure only
    assert env.failures == [("pwritev", str(path), errno.EIO)]
    env.fail("fsync", named="other")
    env.fsync(fd)  # not the file the fault is for
    env.close(fd)
    assert path.read_bytes() == b"onethree"


def test_partial_write_then_failure(env: FaultyEnv) -> None:
    path = env.root / "f"
    fd = env.open(path, os.O_RDWR | os.O_CREAT)
    env.fail("pwritev", partial=0.5)
    with pytest.raises(StorageError, match="disk is full"):
        env.pwritev(fd, [b"ab", b"cdef"], 0)
    env.close(fd)
    assert path.read_bytes() == b"abc"


def test_disk_full_until_cleared(env: FaultyEnv) -> None:
    env.disk_full = True
    with pytest.raises(StorageError, match="disk is full"):
        io.write_file(env.root / "f", b"x")  # through the module functions too
    with pytest.raises(StorageError, match="disk is full"):
        io.atomic_write_text(env.root / "g", "x")
    assert sorted(p.name for p in env.root.iterdir()) == []
    env.fsync_dir(env.root)  # needs no space
    env.clear_faults()
    io.atomic_write_text(env.root / "g", "x")
    env.power_cut()
    assert (env.root / "g").read_text() == "x"


def test_a_failed_fsync_can_lose_bytes_for_good(env: FaultyEnv) -> None:
    """Linux marks the pages of a failed writeback clean: a later fsync does not rewrite them."""
    env.failed_fsync_loses_data = True
    path = env.root / "f"
    _write(env, path, b"AAAA", sync=True)
    env.fsync_dir(env.root)
    fd = env.open(path, os.O_RDWR)
    env.pwritev(fd, [b"BBBB"], 4)
    env.fail("fsync", error=errno.EIO)
    with pytest.raises(StorageError, match="Input/output error"):
        env.fsync(fd)
    env.pwritev(fd, [b"CCCC"], 8)
    env.fsync(fd)  # succeeds, yet the Bs never reach the disk
    assert path.read_bytes() == b"AAAABBBBCCCC"  # the page cache still shows them
    env.power_cut()
    assert path.read_bytes() == b"AAAA" + bytes(4) + b"CCCC"


def test_bytes_written_again_after_a_failed_fsync_are_synced(env: FaultyEnv) -> None:
    env.failed_fsync_loses_data = True
    path = env.root / "f"
    _write(env, path, b"AAAA", sync=True)
    env.fsync_dir(env.root)
    fd = env.open(path, os.O_RDWR)
    env.pwritev(fd, [b"BBBB"], 4)
    env.fail("fsync", error=errno.EIO)
    with pytest.raises(StorageError):
        env.fsync(fd)
    env.pwritev(fd, [b"bb"], 5)
    env.fsync(fd)
    env.power_cut()
    assert path.read_bytes() == b"AAAA\0bb\0"


def test_faults_choose_files_by_whole_components_below_the_root(tmp_path: Path) -> None:
    """The root's own location never matches: a first pytest run's ``pytest-0`` holds
    ``t-0`` as a substring, and here the root even lies in a directory named ``t-0``."""
    root = tmp_path / "pytest-0" / "t-0" / "data"
    with installed(root) as env:
        names = ("t-0/00.log", "test-0/00.log", "t-0x/00.log", "t-1/00.index", "a-checkpoint")
        paths = {name: root / name for name in names}
        fds = {}
        for name, path in paths.items():
            env.mkdir(path.parent)
            fds[name] = env.open(path, os.O_RDWR | os.O_CREAT)
        try:

            def failing(**where: str) -> set[str]:
                failed = set()
                for name, fd in fds.items():
                    env.fail("pwritev", error=errno.EIO, times=1000, **where)
                    try:
                        env.pwritev(fd, [b"x"], 0)
                    except StorageError:
                        failed.add(name)
                    env.clear_faults()
                return failed

            assert failing(in_dir="t-0") == {"t-0/00.log"}
            assert failing(named="*.log") == {"t-0/00.log", "test-0/00.log", "t-0x/00.log"}
            assert failing(in_dir="t-1", named="*.index") == {"t-1/00.index"}
            assert failing(named="*-checkpoint") == {"a-checkpoint"}
            assert failing(in_dir="data") == set()  # the root's own name is not below it
            assert failing() == set(paths)
        finally:
            for fd in fds.values():
                env.close(fd)


def test_a_rename_fault_matches_either_name(env: FaultyEnv) -> None:
    env.mkdir(env.root / "t-0")
    (env.root / "t-0" / "a.log").write_bytes(b"")
    env.fail("rename", error=errno.EIO, named="b.log.deleted")
    with pytest.raises(StorageError):
        env.rename(env.root / "t-0" / "a.log", env.root / "t-0" / "b.log.deleted")
    env.fail("rename", error=errno.EIO, named="elsewhere")
    env.rename(env.root / "t-0" / "a.log", env.root / "t-0" / "b.log")


def test_a_choice_is_made_of_single_components() -> None:
    for bad in ("t-0/", "/t-0", "t-0/00.log", "", ".."):
        with pytest.raises(ValueError, match="component"):
            Files(in_dir=bad)
        with pytest.raises(ValueError, match="component"):
            Files(named=bad)
    assert Files(in_dir="t-0")(PurePosixPath("t-0/00.log"))
    assert not Files(in_dir="t-0")(PurePosixPath("test-0/00.log"))
    assert Files(named="*.log")(PurePosixPath("t-0/00.log"))
    assert not Files(named="*.log")(PurePosixPath("t-0/00.log.deleted"))


def test_keep_unsynced_by_partition_directory(env: FaultyEnv) -> None:
    for directory in ("t-0", "test-0"):
        env.mkdir(env.root / directory)
        _write(env, env.root / directory / "f", b"old", sync=True)
        env.fsync_dir(env.root / directory)
    env.fsync_dir(env.root)
    for directory in ("t-0", "test-0"):
        _write(env, env.root / directory / "f", b"new", sync=False)
    env.power_cut(keep_unsynced=Files(in_dir="t-0"))
    assert (env.root / "t-0" / "f").read_bytes() == b"new"
    assert (env.root / "test-0" / "f").read_bytes() == b"old"
