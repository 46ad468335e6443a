"""A file system for tests that forgets what was not synced and fails on demand.

:class:`FaultyEnv` is a :class:`seglog.storage.io.Env` over a real directory
(the *root*) that keeps, beside the real files, an image of what a disk would
hold after a power cut (LevelDB's ``fault_injection_test.cc``, extended to
directory entries and to files that are rewritten in place):

* a file's durable bytes are its bytes at its last ``fsync`` (or ``msync``)
  through the env; a file never synced has none (ext4's zero-length file after
  a crash);
* a directory's durable entries are its entries at its last ``fsync_dir``;
  until then a creation, rename or removal in it is not durable, and a new
  directory holds nothing durable.

:meth:`FaultyEnv.power_cut` closes every descriptor opened through the env (the
process is gone) and rewrites the root to that image, optionally letting some
files keep their unsynced bytes (the kernel may have written some pages back).
:meth:`FaultyEnv.fail` makes a chosen call fail with an errno (ENOSPC, EIO),
optionally after writing part of its bytes; :attr:`FaultyEnv.disk_full` makes
every call that needs space fail with ENOSPC until it is cleared.

Which files a fault or a power cut's kept pages apply to is said with :class:`Files`:
whole components of the path below the root (a partition directory's name, a file's
name), never a substring of the full path. The root is a temporary directory whose
name is the machine's choice (a first pytest run's ``.../pytest-0/`` contains ``t-0/``),
so a test must not be able to say anything about it.

Files are told apart by inode, through an id the env assigns, so that a name
renamed or removed after the last directory sync comes back with the bytes it
had. Everything under the root must be created, renamed and removed through
the env (storage code does that) for the image to be right; files the env has
never seen synced come back empty. Memory-mapped indexes count as synced
at their last ``msync`` through the env (:func:`seglog.storage.io.flush_map`).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import shutil
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from seglog.errors import StorageError
from seglog.storage import io

#: Calls that need free space: they fail while the disk is full.
SPACE_CALLS = frozenset({"open_create", "pwritev", "write", "allocate", "mkdir", "rename"})


@dataclass(frozen=True)
class Files:
    """A choice of files below a :class:`FaultyEnv`'s root, by whole path components.

    ``in_dir``: the path is a directory of that name or lies below one (a partition
    directory such as ``"t-0"``). ``named``: the path's own name is that, or matches
    that glob (``"*.log"``, ``"*-checkpoint"``). Both given: both must hold; neither:
    every path. Paths are taken relative to the root, so the temporary directory the
    root lies in can never match; a path outside the root matches nothing but the
    empty choice. Callable, so it can be given as :meth:`FaultyEnv.power_cut`'s
    ``keep_unsynced``.
    """

    in_dir: str | None = None
    named: str | None = None

    def __post_init__(self) -> None:
        # A component cannot hold a slash: a path here would be a substring match again.
        for value in (self.in_dir, self.named):
            if value is not None and ("/" in value or value in ("", ".", "..")):
                raise ValueError(f"not a single path component: {value!r}")

    @property
    def everything(self) -> bool:
        """Whether the choice is every path (no condition given)."""
        return self.in_dir is None and self.named is None

    def __call__(self, relative: PurePosixPath) -> bool:
        """Whether ``relative`` (a path relative to the root) is chosen."""
        if self.in_dir is not None and self.in_dir not in relative.parts:
            return False
        return self.named is None or (
            bool(relative.parts) and fnmatch.fnmatchcase(relative.name, self.named)
        )


@dataclass
class Fault:
    """Fail the ``nth`` matching call of ``op`` (counted from when it was armed)."""

    op: str
    nth: int = 1
    error: int = errno.ENOSPC
    files: Files = Files()
    #: For pwritev and write: write this fraction of the bytes before failing.
    partial: float = 0.0
    #: How many consecutive matching calls fail once the nth is reached.
    times: int = 1
    seen: int = 0
    fired: int = 0

    def matches(self, op: str, targets: Sequence[PurePosixPath | None]) -> bool:
        """Count the call if it is ``op`` on a chosen file; say whether it fails.

        ``targets`` are the call's paths relative to the root (None: outside it, or
        no path known); a rename has two and matches if either is chosen.
        """
        if op != self.op:
            return False
        if not self.files.everything and not any(
            target is not None and self.files(target) for target in targets
        ):
            return False
        self.seen += 1
        if self.seen >= self.nth and self.fired < self.times:
            self.fired += 1
            return True
        return False

    @property
    def spent(self) -> bool:
        return self.fired >= self.times


@dataclass
class _Node:
    """A file or directory of the durable image."""

    kind: str  # "f" or "d"
    data: bytes = b""
    entries: dict[str, int] | None = None


class FaultyEnv(io.Env):
    """See the module docstring. Thread-safe; install with :func:`installed`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._ids: dict[tuple[int, int], int] = {}
        self._next_id = 0
        self._durable: dict[int, _Node] = {}
        # Descriptors opened through the env: path, and the file they refer to.
        self._fds: dict[int, str] = {}
        self._fd_files: dict[int, tuple[int, int]] = {}
        self.faults: list[Fault] = []
        self.disk_full = False
        #: Calls made, by operation; ``failures`` those that were failed on purpose.
        self.calls: Counter[str] = Counter()
        self.failures: list[tuple[str, str, int]] = []
        #: Linux after a failed fsync: the dirty pages are marked clean, so what
        #: they held never reaches the disk unless written again, even when a
        #: later fsync succeeds ("fsyncgate"). Off: a failed fsync changes nothing.
        self.failed_fsync_loses_data = False
        # File id -> (durable bytes when an fsync failed, byte ranges lost then).
        self._lost: dict[int, tuple[bytes, list[tuple[int, int]]]] = {}
        self._root_id = self._snapshot_everything()

    # --------------------------------------------------------------- faults

    def fail(
        self,
        op: str,
        nth: int = 1,
        error: int = errno.ENOSPC,
        *,
        in_dir: str | None = None,
        named: str | None = None,
        partial: float = 0.0,
        times: int = 1,
    ) -> Fault:
        """Arm a fault: the ``nth`` next call of ``op`` fails with ``error``.

        ``in_dir`` and ``named`` restrict it to some files, as :class:`Files` says.
        """
        fault = Fault(op, nth, error, Files(in_dir, named), partial, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Disarm every fault and free the disk."""
        with self._lock:
            self.faults.clear()
            self.disk_full = False

    def _check(
        self, op: str, target: object, action: str, *, paths: Sequence[object] = ()
    ) -> Fault | None:
        """Raise (or, for a partial write, return) the fault due for this call.

        ``target`` names the call's file in the error; ``paths`` are the files it acts
        on when there are several (a rename), else ``target`` is.
        """
        with self._lock:
            self.calls[op] += 1
            text = str(target)
            relatives = [self._relative(path) for path in (paths or [target])]
            due = None
            for fault in self.faults:  # every armed fault counts the call
                if fault.matches(op, relatives) and due is None:
                    due = fault
            self.faults = [f for f in self.faults if not f.spent]
            if due is None and self.disk_full and op in SPACE_CALLS:
                due = Fault(op, error=errno.ENOSPC)
            if due is None:
                return None
            self.failures.append((op, text, due.error))
            if due.partial > 0:
                return due
        raise _error(action, target, due.error)

    # ------------------------------------------------------------ identity

    def _id(self, st: os.stat_result) -> int:
        key = _key(st)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self._next_id
            self._next_id += 1
        return found

    def _forget(self, path: Path | str) -> None:
        """The name is going away: if it was the inode's last, its id dies with it."""
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode) or st.st_nlink <= 1:
            self._ids.pop((st.st_dev, st.st_ino), None)

    def _relative(self, path: object) -> PurePosixPath | None:
        """``path`` relative to the root, or None when it is not a path below the root."""
        if not isinstance(path, str | Path):
            return None
        for candidate in (os.path.abspath(path), os.path.realpath(path)):
            with contextlib.suppress(ValueError):
                return PurePosixPath(Path(candidate).relative_to(self.root))
        return None

    def _under_root(self, path: Path | str) -> bool:
        return os.path.realpath(path).startswith(str(self.root))

    def _fd_path(self, fd: int) -> str:
        path = self._fds.get(fd)
        if path is not None:
            return path
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return f"file descriptor {fd}"

    def _record_file(self, path: str) -> None:
        """Take the file's current bytes as durable."""
        if not self._under_root(path):
            return
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                data = handle.read()
        except OSError:
            return
        node_id = self._id(st)
        lost = self._lost.get(node_id)
        if lost is not None:
            # Pages dropped by a failed fsync hold, on disk, what they held before.
            base, ranges = lost
            patched = bytearray(data)
            for start, end in ranges:
                end = min(end, len(patched))
                if start < end:
                    old = base[start:end]
                    patched[start:end] = old + bytes(end - start - len(old))
            data = bytes(patched)
        self._durable[node_id] = _Node("f", data)

    def _lose_dirty_pages(self, fd: int) -> None:
        """A failed fsync: what differs from the durable bytes is lost until rewritten."""
        try:
            with open(f"/proc/self/fd/{fd}", "rb") as handle:
                node_id = self._id(os.fstat(handle.fileno()))
                current = handle.read()
        except OSError:
            return
        node = self._durable.get(node_id)
        durable = node.data if node is not None else b""
        start = next(
            (i for i, (a, b) in enumerate(zip(current, durable, strict=False)) if a != b),
            min(len(current), len(durable)),
        )
        if start < len(current):
            base, ranges = self._lost.get(node_id, (durable, []))
            self._lost[node_id] = (base, [*ranges, (start, len(current))])

    def _rewritten(self, fd: int, start: int, length: int) -> None:
        """Bytes written again are dirty again: the next fsync writes them."""
        if not self._lost or length <= 0:
            return
        try:
            node_id = self._ids.get(_key(os.fstat(fd)))
        except OSError:
            return
        if node_id is None or node_id not in self._lost:
            return
        base, ranges = self._lost[node_id]
        end = start + length
        kept: list[tuple[int, int]] = []
        for a, b in ranges:
            if b <= start or a >= end:
                kept.append((a, b))
                continue
            if a < start:
                kept.append((a, start))
            if b > end:
                kept.append((end, b))
        self._lost[node_id] = (base, kept)

    def _record_dir(self, path: Path | str) -> None:
        """Take the directory's current entries as durable."""
        if not self._under_root(path):
            return
        entries: dict[str, int] = {}
        for name in os.listdir(path):
            try:
                st = os.lstat(os.path.join(path, name))
            except FileNotFoundError:
                continue
            child = self._id(st)
            entries[name] = child
            if child not in self._durable:
                kind = "d" if stat.S_ISDIR(st.st_mode) else "f"
                self._durable[child] = _Node(kind, entries={} if kind == "d" else None)
        self._durable[self._id(os.stat(path))] = _Node("d", entries=entries)

    def _snapshot_everything(self) -> int:
        """Make the whole tree under the root durable as it is; returns the root's id."""
        for directory, _, files in os.walk(self.root):
            for name in files:
                self._record_file(os.path.join(directory, name))
            self._record_dir(directory)
        return self._id(os.stat(self.root))

    # ----------------------------------------------------------- power cut

    def power_cut(self, keep_unsynced: Callable[[PurePosixPath], bool] | None = None) -> None:
        """Lose everything not synced, as a power failure would, and start afresh.

        Every descriptor opened through the env is closed (the process died).
        ``keep_unsynced(relative_path)`` may say that a file which survives keeps its
        current bytes instead of its synced ones; it is given the file's path relative
        to the root, so :class:`Files` (``Files(in_dir="t-0")``) or a test of its
        components chooses by name, never by where the root happens to be.
        """
        with self._lock:
            for fd, file in self._fd_files.items():
                # Closed elsewhere (os.close) and reused since: not ours to close.
                with contextlib.suppress(OSError):
                    if _key(os.fstat(fd)) == file:
                        os.close(fd)
            self._fds.clear()
            self._fd_files.clear()
            current = self._current_paths() if keep_unsynced is not None else {}
            image = self._durable
            for name in os.listdir(self.root):
                _remove(self.root / name)

            def restore(node_id: int, path: Path, relative: PurePosixPath) -> None:
                node = image.get(node_id, _Node("f"))
                if node.kind == "d":
                    if path != self.root:
                        path.mkdir()
                    for name, child in sorted((node.entries or {}).items()):
                        restore(child, path / name, relative / name)
                    return
                data = node.data
                if keep_unsynced is not None and node_id in current and keep_unsynced(relative):
                    data = current[node_id]
                path.write_bytes(data)

            restore(self._root_id, self.root, PurePosixPath())
            self._ids.clear()
            self._durable = {}
            self._lost.clear()
            self._root_id = self._snapshot_everything()
            self.faults.clear()
            self.disk_full = False

    def _current_paths(self) -> dict[int, bytes]:
        """Current bytes of every file under the root the env has an id for."""
        found: dict[int, bytes] = {}
        for directory, _, files in os.walk(self.root):
            for name in files:
                path = os.path.join(directory, name)
                try:
                    st = os.lstat(path)
                    node_id = self._ids.get((st.st_dev, st.st_ino))
                    if node_id is not None:
                        found[node_id] = Path(path).read_bytes()
                except OSError:
                    continue
        return found

    def durable_names(self, directory: Path) -> set[str] | None:
        """The names a power cut now would leave in ``directory`` (None: it would be gone)."""
        with self._lock:
            node = self._durable.get(self._root_id)
            relative = Path(os.path.realpath(directory)).relative_to(self.root)
            for part in relative.parts:
                if node is None or node.entries is None or part not in node.entries:
                    return None
                node = self._durable.get(node.entries[part])
            return set(node.entries or {}) if node is not None else None

    # -------------------------------------------------- the Env, observed

    def open(self, path: Path | str, flags: int, mode: int = 0o644) -> int:
        op = "open_create" if flags & os.O_CREAT and not os.path.exists(path) else "open"
        self._check(op, path, "open")
        fd = super().open(path, flags, mode)
        with self._lock:
            self._fds[fd] = str(path)
            self._fd_files[fd] = _key(os.fstat(fd))
        return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)
            self._fd_files.pop(fd, None)
        super().close(fd)

    def pread(self, fd: int, length: int, offset: int, *, name: object = None) -> bytes:
        self._check("pread", name or self._fd_path(fd), "read")
        return super().pread(fd, length, offset, name=name)

    def preadv(
        self, fd: int, buffers: Sequence[memoryview], offset: int, *, name: object = None
    ) -> int:
        self._check("preadv", name or self._fd_path(fd), "read")
        return super().preadv(fd, buffers, offset, name=name)

    def pwritev(self, fd: int, buffers: io.Buffers, offset: int, *, name: object = None) -> int:
        target = name or self._fd_path(fd)
        fault = self._check("pwritev", target, "write")
        if fault is not None:
            part = _prefix(buffers, fault.partial)
            if part:
                super().pwritev(fd, [part], offset, name=name)
                self._rewritten(fd, offset, len(part))
            raise _error("write", target, fault.error)
        written = super().pwritev(fd, buffers, offset, name=name)
        with self._lock:
            self._rewritten(fd, offset, written)
        return written

    def write(self, fd: int, data: bytes | bytearray | memoryview, *, name: object = None) -> int:
        target = name or self._fd_path(fd)
        fault = self._check("write", target, "write")
        if fault is not None:
            part = _prefix([data], fault.partial)
            position = os.lseek(fd, 0, os.SEEK_CUR)
            if part:
                super().write(fd, part, name=name)
                self._rewritten(fd, position, len(part))
            raise _error("write", target, fault.error)
        position = os.lseek(fd, 0, os.SEEK_CUR)
        written = super().write(fd, data, name=name)
        with self._lock:
            self._rewritten(fd, position, written)
        return written

    def fsync(self, target: io.FileTarget, *, name: object = None) -> None:
        fd = target if isinstance(target, int) else target.fileno()
        try:
            self._check("fsync", name or self._fd_path(fd), "fsync")
        except StorageError:
            if self.failed_fsync_loses_data:
                with self._lock:
                    self._lose_dirty_pages(fd)
            raise
        super().fsync(target, name=name)
        with self._lock:
            # Read through the descriptor: the name may have changed since.
            self._record_file(f"/proc/self/fd/{fd}")

    def fsync_dir(self, path: Path | str) -> None:
        self._check("fsync_dir", path, "fsync directory")
        super().fsync_dir(path)
        with self._lock:
            self._record_dir(path)

    def truncate(self, target: Path | str | int, size: int) -> None:
        where = self._fd_path(target) if isinstance(target, int) else target
        self._check("truncate", where, f"truncate to {size} bytes")
        super().truncate(target, size)

    def allocate(self, fd: int, offset: int, length: int, *, name: object = None) -> None:
        if length > 0:
            self._check("allocate", name or self._fd_path(fd), f"reserve {length} bytes for")
        super().allocate(fd, offset, length, name=name)

    def mmap(self, fd: int, length: int, *, writable: bool, name: object = None) -> io.FileMap:
        self._check("mmap", name or self._fd_path(fd), "map")
        return super().mmap(fd, length, writable=writable, name=name)

    def msync(self, file_map: io.FileMap, *, name: object = None) -> None:
        self._check("msync", name, "flush")
        super().msync(file_map, name=name)
        if isinstance(name, str | Path):
            with self._lock:
                self._record_file(str(name))

    def rename(self, src: Path | str, dst: Path | str) -> None:
        self._check("rename", f"{src} to {dst}", "rename", paths=(src, dst))
        with self._lock:
            try:
                same = os.path.samefile(src, dst)
            except OSError:
                same = False
            if not same:
                self._forget(dst)
            super().rename(src, dst)

    def unlink(self, path: Path | str) -> bool:
        self._check("unlink", path, "remove")
        with self._lock:
            self._forget(path)
            removed: bool = super().unlink(path)
            return removed

    def mkdir(self, path: Path | str) -> None:
        if not os.path.isdir(path):
            self._check("mkdir", path, "create directory")
        super().mkdir(path)

    def rmtree(self, path: Path | str, *, ignore_errors: bool = True) -> None:
        self._check("rmtree", path, "remove")
        with self._lock:
            for directory, dirs, files in os.walk(path):
                for name in (*dirs, *files):
                    self._forget(os.path.join(directory, name))
            self._forget(path)
            super().rmtree(path, ignore_errors=ignore_errors)


def _key(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _error(action: str, target: object, code: int) -> StorageError:
    cause = OSError(code, os.strerror(code))
    error = io.storage_error(action, target, cause)
    error.__cause__ = cause
    return error


def _prefix(buffers: io.Buffers, fraction: float) -> bytes:
    data = b"".join(bytes(b) for b in buffers)
    return data[: int(len(data) * fraction)]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@contextmanager
def installed(root: Path) -> Iterator[FaultyEnv]:
    """A :class:`FaultyEnv` over ``root``, the default env for the block."""
    env = FaultyEnv(root)
    with io.use_env(env):
        yield env
