"""The test file system itself: what a power cut keeps, and failures on demand."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.errors import StorageError
from seglog.storage import io
from tests.storage.faulty_env import FaultyEnv, installed


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
    env.power_cut(keep_unsynced=lambda relative: relative == "kept")
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
    env.fail("fsync", path_contains="other")
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
