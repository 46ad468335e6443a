"""The durability seam: every OS call whose ordering matters for crash safety.

Storage code calls these (as ``io.name(...)``, never ``from io import``) instead
of :mod:`os`, so the rules live in one place and a test can intercept any of
them with ``monkeypatch.setattr(io, "fsync_dir", ...)``:

* a replaced file is written to ``<name>.tmp``, fsynced, renamed over the old
  one, and its directory fsynced (:func:`atomic_write_text`);
* a rename or a creation is durable only after :func:`fsync_dir` of its
  directory, which the caller decides when to pay for;
* a failed call becomes a :class:`~seglog.errors.StorageError` that names the
  file, and says so when the disk is full.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import sys
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

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
    return StorageError(f"cannot {action} {target}: {reason}")


def _describe(target: int | IO[Any]) -> str:
    if isinstance(target, int):
        return f"file descriptor {target}"
    name = getattr(target, "name", None)
    return str(name) if isinstance(name, str | bytes | os.PathLike) else repr(target)


def fsync_file(fileobj_or_fd: int | IO[Any]) -> None:
    """fsync an open file (anything with ``fileno()``) or a raw descriptor.

    A Python file object is flushed first: data still in its buffer would not
    reach the kernel, so the fsync would not cover it.
    """
    if isinstance(fileobj_or_fd, int):
        fd = fileobj_or_fd
    else:
        try:
            fileobj_or_fd.flush()
            fd = fileobj_or_fd.fileno()
        except OSError as exc:
            raise storage_error("flush", _describe(fileobj_or_fd), exc) from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise storage_error("fsync", _describe(fileobj_or_fd), exc) from exc


def fsync_dir(path: Path | str) -> None:
    """fsync a directory, which makes the creations, renames and removals in it durable.

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


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so that a crash leaves the old or the new file whole.

    Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the
    directory. Without the first fsync a crash can leave the new name on an
    empty file; without the last, the old file.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        # Binary mode: the bytes on disk must not depend on the platform's newline.
        with open(tmp, "wb") as handle:
            handle.write(text.encode("utf-8"))
            fsync_file(handle)
        rename(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise storage_error("write", tmp, exc) from exc
    except StorageError:
        _discard(tmp)
        raise
    fsync_dir(path.parent)


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def rename(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, replacing ``dst`` if it exists (atomic on POSIX).

    The rename is durable only after :func:`fsync_dir` of the directory.
    """
    try:
        os.replace(src, dst)
    except OSError as exc:
        raise storage_error("rename", f"{src} to {dst}", exc) from exc


def unlink_if_exists(path: Path | str) -> bool:
    """Remove ``path``; False if it was not there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise storage_error("remove", path, exc) from exc
    return True


def truncate_file(path_or_fd: Path | str | int, size: int) -> None:
    """Set the length of a file, given by path or descriptor, to ``size`` bytes.

    Growing a file fills it with zeros (sparsely; see :func:`preallocate`).
    """
    try:
        if isinstance(path_or_fd, int):
            os.ftruncate(path_or_fd, size)
        else:
            os.truncate(path_or_fd, size)
    except OSError as exc:
        target = f"file descriptor {path_or_fd}" if isinstance(path_or_fd, int) else path_or_fd
        raise storage_error(f"truncate to {size} bytes", target, exc) from exc


def preallocate(fd: int, offset: int, length: int, *, name: object = None) -> None:
    """Reserve disk blocks for ``length`` bytes at ``offset`` of an open file.

    A memory-mapped file that was only extended with ftruncate is sparse; if
    the disk fills up, the first store to an unbacked page kills the process
    with SIGBUS instead of raising. Reserving the blocks up front turns that
    into a StorageError here. Where the file system cannot reserve blocks, this
    does nothing.
    """
    if length <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", None)):
            target = name if name is not None else f"file descriptor {fd}"
            raise storage_error(f"reserve {length} bytes for", target, exc) from exc


# ----------------------------------------------------- descriptors and maps


def open_fd(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` with close-on-exec; a failure names the file.

    FileNotFoundError and FileExistsError pass through as they are: callers
    test for them (a missing index, a file created with ``O_EXCL``).
    """
    try:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)
    except (FileNotFoundError, FileExistsError):
        raise
    except OSError as exc:
        raise storage_error("open", path, exc) from exc


def close_fd(fd: int) -> None:
    """Close a descriptor; an error closing one is reported, not hidden."""
    try:
        os.close(fd)
    except OSError as exc:
        raise storage_error("close", f"file descriptor {fd}", exc) from exc


def file_size(path_or_fd: Path | str | int) -> int:
    """The length in bytes of a file given by path or descriptor."""
    try:
        return (
            os.fstat(path_or_fd).st_size
            if isinstance(path_or_fd, int)
            else os.stat(path_or_fd).st_size
        )
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise storage_error(
            "stat", _describe(path_or_fd) if isinstance(path_or_fd, int) else path_or_fd, exc
        ) from exc


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


def map_file(fd: int, length: int, *, writable: bool, name: object = None) -> FileMap:
    """Map ``length`` bytes of an open file; the descriptor may be closed at once."""
    try:
        return FileMap(fd, length, writable=writable)
    except OSError as exc:
        raise storage_error(
            "map", name if name is not None else f"file descriptor {fd}", exc
        ) from exc


def flush_map(file_map: FileMap, *, name: object = None) -> None:
    """msync a map made by :func:`map_file`: its stores reach the file."""
    try:
        file_map.flush()
    except OSError as exc:
        raise storage_error("flush", name if name is not None else "a mapped file", exc) from exc


def pwritev(
    fd: int,
    buffers: Sequence[bytes | bytearray | memoryview],
    position: int,
    *,
    name: object = None,
) -> int:
    """Write ``buffers`` at ``position``; returns the bytes written (a write may be short).

    A failure (the disk is full, an I/O error) raises StorageError; the caller
    decides what to do with the bytes an earlier call of the same append wrote.
    """
    try:
        return os.pwritev(fd, buffers, position)
    except OSError as exc:
        raise storage_error(
            "write", name if name is not None else f"file descriptor {fd}", exc
        ) from exc
