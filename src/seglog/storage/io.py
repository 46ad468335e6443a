"""The durability seam: every OS call whose ordering matters for crash safety.

Storage code calls these instead of ``os`` directly, so that the rules live in
one place: a replaced file is written to ``.tmp``, fsynced, renamed over the
old one and its directory fsynced; a failed call becomes a
:class:`~seglog.errors.StorageError` naming the file (a full disk says so).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import IO

from seglog.errors import StorageError


def _error(action: str, path: object, exc: OSError) -> StorageError:
    if exc.errno == errno.ENOSPC:
        return StorageError(f"cannot {action} {path}: the disk is full")
    return StorageError(f"cannot {action} {path}: {exc.strerror or exc}")


def fsync_file(target: int | IO[bytes]) -> None:
    """fsync a descriptor or an open file."""
    fd = target if isinstance(target, int) else target.fileno()
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _error("fsync", f"descriptor {fd}", exc) from exc


def fsync_dir(path: Path) -> None:
    """fsync a directory so that renames and creations in it are durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise _error("open directory", path, exc) from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise _error("fsync directory", path, exc) from exc
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old or the new file whole."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _error("write", path, exc) from exc
    fsync_dir(path.parent)


def rename(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, replacing it."""
    try:
        os.replace(src, dst)
    except OSError as exc:
        raise _error("rename", f"{src} to {dst}", exc) from exc


def unlink_if_exists(path: Path) -> bool:
    """Remove ``path``; False if it was not there."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _error("remove", path, exc) from exc


def truncate_file(target: int | Path, size: int) -> None:
    """Cut a file (by descriptor or path) to ``size`` bytes."""
    try:
        if isinstance(target, int):
            os.ftruncate(target, size)
        else:
            os.truncate(target, size)
    except OSError as exc:
        raise _error("truncate", target, exc) from exc
