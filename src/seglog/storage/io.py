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
import errno
import os
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
