"""The durability seam: every OS call whose ordering or failure matters for crash safety.

Storage code does its file I/O through an :class:`Env` (LevelDB's ``Env``):
open, pread, pwritev, fsync of files and directories, rename, truncate,
preallocation, mmap and msync (:class:`FileMap`, a map that holds no
descriptor), flock, directory creation, listing and removal.
A log directory is given its environment and passes it down to every log,
segment, index, snapshot and checkpoint it opens; what is built on its own
takes the module's default instance (:func:`env_or_default`), which a test
swaps with :func:`use_env`. The module-level functions (:func:`fsync_file`,
:func:`rename`, ...) are thin wrappers over that default for code outside the
storage engine.
The test suite's faulty environment (``tests/storage/faulty_env.py``) is such a
replacement: it remembers what was synced, drops the rest on a simulated
power cut and fails chosen calls with ENOSPC or EIO.

The rules that live here:

* a replaced file is written to ``<name>.tmp``, fsynced, renamed over the old
  one, and its directory fsynced (:func:`atomic_write_text`);
* a rename, a creation or a removal is durable only after :func:`fsync_dir` of
  its directory, which the caller decides when to pay for;
* a failed call becomes a :class:`~seglog.errors.StorageError` that names the
  file, and says so when the disk is full; the :class:`OSError` is its
  ``__cause__``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
import shutil
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, ParamSpec, TypeVar

from seglog.errors import StorageError

# Errors that fsync of a directory may give where directories cannot be synced
# (some network and FUSE file systems); there is nothing better to do there.
_DIR_FSYNC_UNSUPPORTED = frozenset(
    code
    for code in (
        errno.EINVAL,
        errno.EBADF,
        getattr(errno, "ENOTSUP", None),
        getattr(errno, "EOPNOTSUPP", None),
    )
    if code is not None
)
_DIR_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_P = ParamSpec("_P")
_R = TypeVar("_R")

Buffers = Sequence[bytes | bytearray | memoryview]
FileTarget = int | IO[Any]


def storage_error(action: str, target: object, exc: OSError) -> StorageError:
    """A StorageError for ``exc`` raised while doing ``action`` on ``target``.

    The message names the file and, for the errors an operator must act on,
    says what happened in plain words rather than an errno.
    """
    if exc.errno == errno.ENOSPC:
        reason = "the disk is full"
    elif exc.errno == getattr(errno, "EDQUOT", None):
        reason = "the disk quota is exceeded"
    elif exc.errno == errno.EROFS:
        reason = "the file system is read-only"
    else:
        reason = exc.strerror or str(exc)
    error = StorageError(f"cannot {action} {target}: {reason}")
    # The errno stays at hand however the error is raised: the log decides by it
    # whether the failure takes its partition offline.
    error.__cause__ = exc
    return error


def _describe(target: FileTarget) -> str:
    if isinstance(target, int):
        return f"file descriptor {target}"
    name = getattr(target, "name", None)
    return str(name) if isinstance(name, str | bytes | os.PathLike) else repr(target)


# ----------------------------------------------------- memory maps


class FileMap:
    """A shared memory map of a file that holds no file descriptor.

    ``buffer`` is what readers and writers use (``struct.unpack_from``,
    slicing, slice assignment). Python's own ``mmap`` keeps a duplicate of
    the descriptor it was made from for as long as it lives (until Python
    3.13's ``trackfd=False``), which would cost every mapped index a
    descriptor: on Linux the map is made with libc's ``mmap`` instead.

    The pages are unmapped when the last reference to ``buffer`` goes (after
    :meth:`close`, once no lookup in flight still holds it): a reader racing a
    remap keeps reading the old pages instead of faulting on unmapped memory.
    """

    __slots__ = ("_address", "_closed", "_length", "_mmap", "buffer")

    def __init__(self, fd: int, length: int, *, writable: bool) -> None:
        self._length = length
        self._closed = False
        self._address = 0
        self._mmap: mmap.mmap | None = None
        self.buffer: memoryview | mmap.mmap
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        if _LIBC is None:
            if sys.version_info >= (3, 13):
                self._mmap = mmap.mmap(fd, length, access=access, trackfd=False)
            else:  # pragma: no cover - platforms without libc's mmap reachable
                self._mmap = mmap.mmap(fd, length, access=access)
            self.buffer = self._mmap
            return
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _LIBC.mmap(None, length, prot, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self._address = address
        pages = (ctypes.c_ubyte * length).from_address(address)
        # Unmapped when the array dies, which is when the last view of it does.
        weakref.finalize(pages, _LIBC.munmap, address, length)
        view = memoryview(pages).cast("B")
        self.buffer = view if writable else view.toreadonly()

    def flush(self) -> None:
        """Write dirty pages back to the file (msync); raises OSError."""
        if self._closed:
            return
        if self._mmap is not None:
            self._mmap.flush()
            return
        assert _LIBC is not None
        if _LIBC.msync(self._address, self._length, _MS_SYNC) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    def close(self) -> None:
        """Drop this map; the pages go with the last reference to :attr:`buffer`."""
        if self._closed:
            return
        self._closed = True
        if self._mmap is not None:
            self._mmap.close()
        else:
            del self.buffer


def _load_libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.msync.restype = ctypes.c_int
        libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = None if sys.version_info >= (3, 13) else _load_libc()
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux's value; the libc path is taken on Linux only


# The number of threads an environment runs blocking work on: enough for a
# few fsyncs and a topic creation at once; the disk, not the CPU, is the limit.
_WORKERS = 8
_EXECUTOR_LOCK = threading.Lock()


class Env:
    """The real file system, with every failure turned into a StorageError.

    Subclass it to observe or change behaviour (tests); every method is a
    single OS operation, so a subclass can fail any one of them or keep its
    own record of what has reached the disk. Paths may be ``str`` or ``Path``;
    ``name`` arguments only label error messages.

    It is also where blocking work leaves an event loop: :meth:`submit` runs a
    call (a flush, a topic creation) on the environment's own threads, so
    that a server hands every piece of file work to one bounded pool.
    """

    _executor: concurrent.futures.ThreadPoolExecutor | None = None

    # ------------------------------------------------------------ threads

    def submit(
        self, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> concurrent.futures.Future[_R]:
        """Run ``fn(*args, **kwargs)`` on this environment's threads; its future.

        For callers on an event loop (``asyncio.wrap_future``): storage calls
        block on the disk, and this keeps them off the loop in one bounded
        pool, created at first use.
        """
        executor = self._executor
        if executor is None:
            with _EXECUTOR_LOCK:
                executor = self._executor
                if executor is None:
                    executor = concurrent.futures.ThreadPoolExecutor(
                        max_workers=_WORKERS, thread_name_prefix="seglog-io"
                    )
                    self._executor = executor
        return executor.submit(fn, *args, **kwargs)

    def shutdown(self) -> None:
        """Wait for the work submitted so far and stop the threads (a later submit restarts)."""
        with _EXECUTOR_LOCK:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    # ------------------------------------------------------------ descriptors

    def open(self, path: Path | str, flags: int, mode: int = 0o644) -> int:
        """``os.open`` with close-on-exec; ``O_CREAT`` makes a file, durable after fsync_dir.

        FileNotFoundError and FileExistsError pass through as they are: callers
        test for them (a missing index, a file created with ``O_EXCL``).
        """
        try:
            return os.open(path, flags | _CLOEXEC, mode)
        except (FileNotFoundError, FileExistsError):
            raise
        except OSError as exc:
            raise storage_error("open", path, exc) from exc

    def close(self, fd: int) -> None:
        """Close a descriptor; an error closing one is reported, not hidden."""
        try:
            os.close(fd)
        except OSError as exc:
            raise storage_error("close", f"file descriptor {fd}", exc) from exc

    def file_size(self, target: Path | str | int) -> int:
        """The length of a file given by path or descriptor; FileNotFoundError passes through."""
        try:
            return os.fstat(target).st_size if isinstance(target, int) else os.stat(target).st_size
        except FileNotFoundError:
            raise
        except OSError as exc:
            described = f"file descriptor {target}" if isinstance(target, int) else target
            raise storage_error("stat", described, exc) from exc

    def fstat(self, fd: int, *, name: object = None) -> os.stat_result:
        """Size and times of an open file."""
        try:
            return os.fstat(fd)
        except OSError as exc:
            raise storage_error("stat", name or f"file descriptor {fd}", exc) from exc

    def stat(self, path: Path | str) -> os.stat_result:
        """Size and times of a file by name."""
        try:
            return os.stat(path)
        except OSError as exc:
            raise storage_error("stat", path, exc) from exc

    def set_mtime(self, path: Path | str, mtime: float) -> None:
        """Set a file's access and modification times (retention reads them)."""
        try:
            os.utime(path, (mtime, mtime))
        except OSError as exc:
            raise storage_error("set the time of", path, exc) from exc

    # --------------------------------------------------------- reads, writes

    def pread(self, fd: int, length: int, offset: int, *, name: object = None) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
        try:
            return os.pread(fd, length, offset)
        except OSError as exc:
            raise storage_error("read", name or f"file descriptor {fd}", exc) from exc

    def preadv(
        self, fd: int, buffers: Sequence[memoryview], offset: int, *, name: object = None
    ) -> int:
        """Fill ``buffers`` from ``offset``; returns the bytes read (short at the end)."""
        try:
            return os.preadv(fd, buffers, offset)
        except OSError as exc:
            raise storage_error("read", name or f"file descriptor {fd}", exc) from exc

    def pwritev(self, fd: int, buffers: Buffers, offset: int, *, name: object = None) -> int:
        """One ``pwritev``: may write less than asked (the caller loops)."""
        try:
            return os.pwritev(fd, buffers, offset)
        except OSError as exc:
            raise storage_error("write", name or f"file descriptor {fd}", exc) from exc

    def write(self, fd: int, data: bytes | bytearray | memoryview, *, name: object = None) -> int:
        """One ``write`` at the file position: may write less than asked."""
        try:
            return os.write(fd, data)
        except OSError as exc:
            raise storage_error("write", name or f"file descriptor {fd}", exc) from exc

    def read_file(self, path: Path | str) -> bytes | None:
        """A whole (small) file's bytes, or None if it does not exist."""
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise storage_error("read", path, exc) from exc

    # ------------------------------------------------------------ durability

    def fsync(self, target: FileTarget, *, name: object = None) -> None:
        """fsync an open file (anything with ``fileno()``) or a raw descriptor.

        A Python file object is flushed first: data still in its buffer would
        not reach the kernel, so the fsync would not cover it.
        """
        if isinstance(target, int):
            fd = target
        else:
            try:
                target.flush()
                fd = target.fileno()
            except OSError as exc:
                raise storage_error("flush", name or _describe(target), exc) from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            raise storage_error("fsync", name or _describe(target), exc) from exc

    def fsync_dir(self, path: Path | str) -> None:
        """fsync a directory: makes the creations, renames and removals in it durable.

        File systems that cannot sync a directory are tolerated silently.
        """
        try:
            fd = os.open(path, _DIR_OPEN_FLAGS)
        except OSError as exc:
            raise storage_error("open directory", path, exc) from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
                raise storage_error("fsync directory", path, exc) from exc
        finally:
            os.close(fd)

    def truncate(self, target: Path | str | int, size: int) -> None:
        """Set a file's length (by path or descriptor); growth is sparse (zeros, no blocks)."""
        try:
            if isinstance(target, int):
                os.ftruncate(target, size)
            else:
                os.truncate(target, size)
        except OSError as exc:
            described = f"file descriptor {target}" if isinstance(target, int) else target
            raise storage_error(f"truncate to {size} bytes", described, exc) from exc

    def allocate(self, fd: int, offset: int, length: int, *, name: object = None) -> None:
        """Reserve disk blocks for ``length`` bytes at ``offset`` (see :func:`preallocate`)."""
        if length <= 0 or not hasattr(os, "posix_fallocate"):
            return
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", None)):
                target = name if name is not None else f"file descriptor {fd}"
                raise storage_error(f"reserve {length} bytes for", target, exc) from exc

    def mmap(self, fd: int, length: int, *, writable: bool, name: object = None) -> FileMap:
        """Map ``length`` bytes of an open file, shared; the descriptor may be closed at once."""
        try:
            return FileMap(fd, length, writable=writable)
        except OSError as exc:
            raise storage_error("map", name or f"file descriptor {fd}", exc) from exc

    def msync(self, file_map: FileMap, *, name: object = None) -> None:
        """Write a map's dirty pages to its file (the fsync of a mapped file)."""
        try:
            file_map.flush()
        except OSError as exc:
            raise storage_error("flush", name or "a mapped file", exc) from exc

    # -------------------------------------------------------------- names

    def rename(self, src: Path | str, dst: Path | str) -> None:
        """Rename ``src`` to ``dst``, replacing ``dst`` (atomic; durable after fsync_dir)."""
        try:
            os.replace(src, dst)
        except OSError as exc:
            raise storage_error("rename", f"{src} to {dst}", exc) from exc

    def unlink(self, path: Path | str) -> bool:
        """Remove a file; False if it was not there. Durable after fsync_dir."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise storage_error("remove", path, exc) from exc
        return True

    def mkdir(self, path: Path | str) -> None:
        """Create a directory and any missing parents; an existing one is fine."""
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise storage_error("create directory", path, exc) from exc

    def rmtree(self, path: Path | str, *, ignore_errors: bool = True) -> None:
        """Remove a directory and everything in it.

        By default what cannot be removed is left (and a missing directory is
        fine); with ``ignore_errors=False`` the first failure raises.
        """
        try:
            shutil.rmtree(path, ignore_errors=ignore_errors)
        except OSError as exc:
            raise storage_error("remove", path, exc) from exc

    def listdir(self, path: Path | str) -> list[str]:
        """Names in a directory; empty if the directory does not exist."""
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise storage_error("list", path, exc) from exc

    # --------------------------------------------------------------- locks

    def lock(self, fd: int) -> bool:
        """Take an exclusive ``flock`` without waiting; False if another holder has it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise storage_error("lock", f"file descriptor {fd}", exc) from exc
        return True

    def unlock(self, fd: int) -> None:
        """Release a lock taken with :meth:`lock`."""
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)

    # ------------------------------------------------- composite operations

    def write_file(
        self, path: Path, data: bytes | bytearray | memoryview, *, sync: bool = False
    ) -> None:
        """Create or replace ``path`` with ``data`` in place, fsynced when ``sync``.

        Not atomic: a crash may leave a torn file, so use it only for files whose
        readers detect that (producer snapshots carry a CRC); otherwise use
        :meth:`atomic_write_text`. The file's name is durable after fsync_dir.
        Built from this environment's own calls, so a subclass sees each of them.
        """
        try:
            fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as exc:  # a missing directory
            raise storage_error("open", path, exc) from exc
        try:
            view = memoryview(data)
            while view:
                written = self.write(fd, view, name=path)
                if written <= 0:
                    raise StorageError(f"cannot write {path}: the file system accepted no bytes")
                view = view[written:]
            if sync:
                self.fsync(fd, name=path)
        finally:
            self.close(fd)

    def atomic_write_text(self, path: Path, text: str) -> None:
        """Replace ``path`` with ``text`` (UTF-8): a crash leaves the old or the new file whole.

        Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the
        directory. Without the first fsync a crash can leave the new name on an
        empty file; without the last, the old file.
        """
        tmp = path.with_name(path.name + ".tmp")
        try:
            # Bytes: what is on disk must not depend on the platform's newline.
            self.write_file(tmp, text.encode("utf-8"), sync=True)
            self.rename(tmp, path)
        except StorageError:
            with contextlib.suppress(StorageError):
                self.unlink(tmp)
            raise
        self.fsync_dir(path.parent)


# ------------------------------------------------------------- the default

_default: Env = Env()
_default_lock = threading.Lock()


def default_env() -> Env:
    """The environment storage code uses."""
    return _default


def set_default_env(env: Env) -> Env:
    """Make ``env`` the environment storage code uses; returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, env
    return previous


def env_or_default(env: Env | None) -> Env:
    """``env``, or the default environment when None (where a component is built on its own)."""
    return _default if env is None else env


@contextlib.contextmanager
def use_env(env: Env) -> Iterator[Env]:
    """Run a block with ``env`` as the default environment (tests)."""
    previous = set_default_env(env)
    try:
        yield env
    finally:
        set_default_env(previous)


# ------------------------------------------- module-level thin wrappers


def open_fd(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """:meth:`Env.open` of the default environment."""
    return _default.open(path, flags, mode)


def close_fd(fd: int) -> None:
    """:meth:`Env.close` of the default environment."""
    _default.close(fd)


def stat(path: Path | str) -> os.stat_result:
    """:meth:`Env.stat` of the default environment."""
    return _default.stat(path)


def set_mtime(path: Path | str, mtime: float) -> None:
    """:meth:`Env.set_mtime` of the default environment."""
    _default.set_mtime(path, mtime)


def pread(fd: int, length: int, offset: int, *, name: object = None) -> bytes:
    """:meth:`Env.pread` of the default environment."""
    return _default.pread(fd, length, offset, name=name)


def fsync_file(fileobj_or_fd: FileTarget, *, name: object = None) -> None:
    """fsync an open file or descriptor (:meth:`Env.fsync`)."""
    _default.fsync(fileobj_or_fd, name=name)


def fsync_dir(path: Path | str) -> None:
    """fsync a directory, which makes the creations, renames and removals in it durable."""
    _default.fsync_dir(path)


def rename(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, replacing ``dst`` if it exists (atomic on POSIX).

    The rename is durable only after :func:`fsync_dir` of the directory.
    """
    _default.rename(src, dst)


def unlink_if_exists(path: Path | str) -> bool:
    """Remove ``path``; False if it was not there."""
    return _default.unlink(path)


def truncate_file(path_or_fd: Path | str | int, size: int) -> None:
    """Set the length of a file, given by path or descriptor, to ``size`` bytes.

    Growing a file fills it with zeros (sparsely; see :func:`preallocate`).
    """
    _default.truncate(path_or_fd, size)


def preallocate(fd: int, offset: int, length: int, *, name: object = None) -> None:
    """Reserve disk blocks for ``length`` bytes at ``offset`` of an open file.

    A memory-mapped file that was only extended with ftruncate is sparse; if
    the disk fills up, the first store to an unbacked page kills the process
    with SIGBUS instead of raising. Reserving the blocks up front turns that
    into a StorageError here. Where the file system cannot reserve blocks, this
    does nothing.
    """
    _default.allocate(fd, offset, length, name=name)


def map_file(fd: int, length: int, *, writable: bool, name: object = None) -> FileMap:
    """Map ``length`` bytes of an open file; the descriptor may be closed at once."""
    return _default.mmap(fd, length, writable=writable, name=name)


def flush_map(file_map: FileMap, *, name: object = None) -> None:
    """msync a map made by :func:`map_file`: its stores reach the file."""
    _default.msync(file_map, name=name)


def make_dirs(path: Path | str) -> None:
    """:meth:`Env.mkdir` of the default environment."""
    _default.mkdir(path)


def remove_tree(path: Path | str, *, ignore_errors: bool = True) -> None:
    """:meth:`Env.rmtree` of the default environment."""
    _default.rmtree(path, ignore_errors=ignore_errors)


def list_dir(path: Path | str) -> list[str]:
    """:meth:`Env.listdir` of the default environment."""
    return _default.listdir(path)


def read_file(path: Path | str) -> bytes | None:
    """:meth:`Env.read_file` of the default environment."""
    return _default.read_file(path)


def write_file(path: Path, data: bytes | bytearray | memoryview, *, sync: bool = False) -> None:
    """:meth:`Env.write_file` of the default environment."""
    _default.write_file(path, data, sync=sync)


def atomic_write_text(path: Path, text: str) -> None:
    """:meth:`Env.atomic_write_text` of the default environment."""
    _default.atomic_write_text(path, text)
