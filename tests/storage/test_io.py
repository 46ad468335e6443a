"""The durability seam: ordering of writes, fsyncs and renames, and how failures read."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from seglog.errors import StorageError
from seglog.storage import io


def _os_error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


# ---------------------------------------------------------- atomic_write_text


def test_atomic_write_creates_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    io.atomic_write_text(path, "one\n")
    io.atomic_write_text(path, "two\r\nπ")
    # Bytes exactly as given: no newline translation, UTF-8.
    assert path.read_bytes() == "two\r\nπ".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


class _RecordingEnv(io.Env):
    """The real file system, noting each durability call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.checks: dict[str, Any] = {}

    def fsync(self, target: io.FileTarget, *, name: object = None) -> None:
        self.calls.append(("fsync", name))
        if "fsync" in self.checks:
            self.checks["fsync"]()
        super().fsync(target, name=name)

    def rename(self, src: Path | str, dst: Path | str) -> None:
        self.calls.append(("rename", (src, dst)))
        super().rename(src, dst)

    def fsync_dir(self, path: Path | str) -> None:
        self.calls.append(("fsync_dir", path))
        if "fsync_dir" in self.checks:
            self.checks["fsync_dir"]()
        super().fsync_dir(path)


def test_atomic_write_orders_fsync_rename_fsync_dir(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    tmp = tmp_path / "f.tmp"
    env = _RecordingEnv()

    def at_fsync() -> None:
        # At fsync time the new text is whole in the .tmp and the old file untouched.
        assert tmp.read_text() == "new" and path.read_text() == "old"

    def at_fsync_dir() -> None:
        assert path.read_text() == "new" and not tmp.exists()

    env.checks = {"fsync": at_fsync, "fsync_dir": at_fsync_dir}
    with io.use_env(env):
        io.atomic_write_text(path, "new")
    assert env.calls == [("fsync", tmp), ("rename", (tmp, path)), ("fsync_dir", tmp_path)]


def test_atomic_write_disk_full_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_text("old")

    def full(fd: int) -> None:
        raise _os_error(errno.ENOSPC)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError, match="disk is full") as info:
        io.atomic_write_text(path, "new")
    assert "f.tmp" in str(info.value)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_atomic_write_rename_failure_removes_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"

    def broken(src: Any, dst: Any) -> None:
        raise _os_error(errno.EIO)

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(StorageError, match="cannot rename"):
        io.atomic_write_text(path, "new")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="missing"):
        io.atomic_write_text(tmp_path / "missing" / "f", "x")


# ------------------------------------------------------------------- fsyncs


def test_fsync_file_accepts_descriptor_and_file_object(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with open(path, "wb") as handle:
        handle.write(b"buffered")
        io.fsync_file(handle)  # flushes Python's buffer first
        assert path.read_bytes() == b"buffered"
        io.fsync_file(handle.fileno())


def test_fsync_file_error_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fd: int) -> None:
        raise _os_error(errno.EIO)

    monkeypatch.setattr(os, "fsync", failing)
    with open(tmp_path / "named", "wb") as handle, pytest.raises(StorageError, match="named"):
        io.fsync_file(handle)
    with pytest.raises(StorageError, match="descriptor 7"):
        io.fsync_file(7)


def test_fsync_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    io.fsync_dir(tmp_path)
    io.fsync_dir(str(tmp_path))
    with pytest.raises(StorageError, match="nope"):
        io.fsync_dir(tmp_path / "nope")
    # A file system that cannot sync directories is tolerated; a real error is not.
    for code, tolerated in ((errno.EINVAL, True), (errno.ENOTSUP, True), (errno.EIO, False)):

        def failing(fd: int, code: int = code) -> None:
            raise _os_error(code)

        monkeypatch.setattr(os, "fsync", failing)
        if tolerated:
            io.fsync_dir(tmp_path)
        else:
            with pytest.raises(StorageError, match="fsync directory"):
                io.fsync_dir(tmp_path)


def test_fsync_dir_closes_its_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[int] = []
    closed: list[int] = []
    real_open, real_close = os.open, os.close

    def tracking_open(*args: Any, **kwargs: Any) -> int:
        fd = real_open(*args, **kwargs)
        opened.append(fd)
        return fd

    def tracking_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    def failing(fd: int) -> None:
        raise _os_error(errno.EIO)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "close", tracking_close)
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(StorageError):
        io.fsync_dir(tmp_path)
    assert opened and opened == closed


# ------------------------------------------------------------ rename, unlink


def test_rename_replaces(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    io.rename(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_text() == "a" and not (tmp_path / "a").exists()
    with pytest.raises(StorageError, match=r"cannot rename .*a to .*b"):
        io.rename(tmp_path / "a", tmp_path / "b")


def test_unlink_if_exists(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    assert io.unlink_if_exists(path) is True
    assert io.unlink_if_exists(path) is False
    assert io.unlink_if_exists(str(path)) is False
    (tmp_path / "d").mkdir()
    with pytest.raises(StorageError, match="cannot remove"):
        io.unlink_if_exists(tmp_path / "d")


# ------------------------------------------------------ truncate, preallocate


def test_truncate_file_by_path_and_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    io.truncate_file(path, 4)
    assert path.read_bytes() == b"0123"
    fd = os.open(path, os.O_RDWR)
    try:
        io.truncate_file(fd, 6)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"0123\0\0"
    with pytest.raises(StorageError, match="missing"):
        io.truncate_file(tmp_path / "missing", 0)


def test_truncate_disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any) -> None:
        raise _os_error(errno.ENOSPC)

    monkeypatch.setattr(os, "truncate", full)
    with pytest.raises(StorageError, match=r"f: the disk is full"):
        io.truncate_file(tmp_path / "f", 10)


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="no posix_fallocate")
def test_preallocate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        io.preallocate(fd, 0, 1 << 16)
        assert os.fstat(fd).st_size == 1 << 16
        io.preallocate(fd, 0, 0)  # nothing to do

        def fail_with(code: int) -> Any:
            def fallocate(*args: Any) -> None:
                raise _os_error(code)

            return fallocate

        # Unsupported: silently skipped. Disk full: a StorageError now, not SIGBUS later.
        monkeypatch.setattr(os, "posix_fallocate", fail_with(errno.EOPNOTSUPP))
        io.preallocate(fd, 0, 8)
        monkeypatch.setattr(os, "posix_fallocate", fail_with(errno.ENOSPC))
        with pytest.raises(StorageError, match=r"idx: the disk is full"):
            io.preallocate(fd, 0, 8, name="idx")
    finally:
        os.close(fd)


def test_storage_error_messages() -> None:
    assert "disk is full" in str(io.storage_error("write", "p", _os_error(errno.ENOSPC)))
    assert "read-only" in str(io.storage_error("write", "p", _os_error(errno.EROFS)))
    message = str(io.storage_error("open", "/x/y", _os_error(errno.EACCES)))
    assert message == f"cannot open /x/y: {os.strerror(errno.EACCES)}"


# ------------------------------------------------------ the Env and its default


def test_default_env_is_replaced_for_a_block(tmp_path: Path) -> None:
    original = io.default_env()
    env = _RecordingEnv()
    with io.use_env(env):
        assert io.default_env() is env
        io.fsync_dir(tmp_path)  # the module functions go to the replacement
    assert io.default_env() is original
    assert env.calls == [("fsync_dir", tmp_path)]


def test_env_reads_and_writes_by_descriptor(tmp_path: Path) -> None:
    env = io.Env()
    path = tmp_path / "f"
    fd = env.open(path, os.O_RDWR | os.O_CREAT)
    try:
        assert os.get_inheritable(fd) is False  # close-on-exec: not leaked into children
        assert env.pwritev(fd, [b"ab", memoryview(b"cd")], 0) == 4
        assert env.write(fd, b"ef") == 2  # at the file position, which pwritev did not move
        assert env.pread(fd, 10, 0) == b"efcd"
        buffer = bytearray(3)
        assert env.preadv(fd, [memoryview(buffer)], 1) == 3 and buffer == b"fcd"
        assert env.fstat(fd).st_size == 4
        env.fsync(fd)
    finally:
        env.close(fd)
    with pytest.raises(StorageError, match="cannot close"):
        env.close(fd)  # a second close is an error, reported
    with pytest.raises(StorageError, match=r"cannot read .*named: "):
        env.pread(fd, 1, 0, name=tmp_path / "named")
    with pytest.raises(StorageError, match=r"cannot write file descriptor"):
        env.pwritev(fd, [b"x"], 0)
    with pytest.raises(FileNotFoundError):  # passed through: callers test for it
        env.open(tmp_path / "missing" / "f", os.O_RDONLY)
    with pytest.raises(StorageError, match=r"cannot open .*under-a-file: Not a directory"):
        env.open(tmp_path / "f" / "under-a-file", os.O_RDONLY)


def test_env_whole_files(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert io.read_file(path) is None
    io.write_file(path, b"first version", sync=True)
    io.write_file(path, b"second")  # replaces, shorter
    assert io.read_file(path) == b"second"
    assert io.list_dir(tmp_path) == ["f"]
    assert io.list_dir(tmp_path / "missing") == []
    with pytest.raises(StorageError, match="cannot read"):
        io.read_file(tmp_path)  # a directory


def test_env_directories(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    io.make_dirs(nested)
    io.make_dirs(nested)  # exists already: fine
    (nested / "f").write_bytes(b"x")
    io.remove_tree(tmp_path / "a")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StorageError, match="cannot create directory"):
        io.make_dirs(tmp_path / "file" / "sub")


def test_env_mmap_and_msync(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(16))
    fd = io.open_fd(path, os.O_RDWR)
    try:
        file_map = io.map_file(fd, 16, writable=True, name=path)
        file_map.buffer[0:4] = b"abcd"
        io.flush_map(file_map, name=path)
        file_map.close()
        read_only = io.map_file(fd, 16, writable=False)
        assert bytes(read_only.buffer[0:4]) == b"abcd"
        read_only.close()
    finally:
        io.close_fd(fd)
    with pytest.raises(StorageError, match=r"cannot map .*f: "):
        io.map_file(fd, 16, writable=True, name=path)  # a closed descriptor


def test_env_lock_is_exclusive(tmp_path: Path) -> None:
    env = io.Env()
    first = env.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    second = env.open(tmp_path / ".lock", os.O_RDWR)
    try:
        assert env.lock(first) is True
        assert env.lock(second) is False
        env.unlock(first)
        assert env.lock(second) is True
    finally:
        env.close(first)
        env.close(second)


def test_env_times(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"")
    io.set_mtime(path, 1_000_000.0)
    assert io.stat(path).st_mtime == 1_000_000.0
    with pytest.raises(StorageError, match="cannot stat"):
        io.stat(tmp_path / "missing")


def test_env_runs_blocking_work_on_its_own_bounded_threads() -> None:
    env = io.Env()
    other = io.Env()
    try:
        futures = [env.submit(threading.current_thread) for _ in range(50)]
        threads = {future.result(timeout=10) for future in futures}
        assert threading.current_thread() not in threads
        assert all(thread.name.startswith("seglog-io") for thread in threads)
        assert len(threads) <= 8
        assert env.submit(lambda a, *, b: a + b, 1, b=2).result(timeout=10) == 3
        # Each environment has its own pool.
        assert other.submit(threading.current_thread).result(timeout=10) not in threads
    finally:
        env.shutdown()
        other.shutdown()
    # A shut-down pool starts again on the next submit.
    assert env.submit(int, "7").result(timeout=10) == 7
    env.shutdown()
