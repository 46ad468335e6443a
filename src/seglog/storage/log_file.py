"""One segment's ``.log`` file as bytes at positions (Kafka's FileRecords).

Owns the file's descriptor and its current path (which follows the
segment's renames), and every operation on its bytes: positional reads and
writes, cutting it back, fsync, rename, release. Knows nothing of entries,
offsets or indexes: :class:`~seglog.storage.segment.LogSegment` decides what
is written where, and how much of the file its readers may see.

The descriptor is a :class:`~seglog.storage.region.SharedFile`: the regions
reads hand out hold it too, so releasing the file (the segment's close or
delete) closes the descriptor only once the last region is released.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from seglog.errors import StorageError
from seglog.storage import io
from seglog.storage.region import FileRegion, SharedFile

# The most buffers one pwritev takes (the usual IOV_MAX).
_IOV_MAX = 1024


class LogFile:
    """An open ``.log`` file: create with :meth:`open`."""

    __slots__ = ("_env", "_file", "fd", "path")

    def __init__(self, env: io.Env, fd: int, path: Path) -> None:
        self._env = env
        #: The descriptor, for zero-copy sends.
        self.fd = fd
        #: The file's path, with any transient suffix.
        self.path = path
        # Regions handed to sends share the descriptor: closing the segment
        # only drops its reference (see seglog.storage.region).
        self._file = SharedFile(fd, path, env.close)

    @classmethod
    def open(cls, env: io.Env, path: Path) -> LogFile:
        """Open ``path`` for reads and writes, creating it if it is missing."""
        try:
            fd = env.open(path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:  # its directory is gone
            raise io.storage_error("open", path, exc) from exc
        return cls(env, fd, path)

    def stat(self) -> os.stat_result:
        """The file's status; a failure closes the file before it propagates (at open)."""
        try:
            return self._env.fstat(self.fd, name=self.path)
        except StorageError:
            self._env.close(self.fd)
            raise

    def modified_ms(self) -> int:
        """The file's modification time, in milliseconds."""
        return int(self._env.fstat(self.fd).st_mtime * 1000)

    # ------------------------------------------------------------------ read

    def read_at(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer only at the end of the file)."""
        return self._env.pread(self.fd, length, position, name=self.path)

    def read_into(self, view: memoryview, position: int) -> int:
        """Fill ``view`` from ``position``; fewer bytes only at the end of the file."""
        done = 0
        total = len(view)
        while done < total:
            n = self._env.preadv(self.fd, [view[done:]], position + done, name=self.path)
            if n <= 0:
                break
            done += n
        return done

    def region(self, position: int, length: int) -> FileRegion:
        """``length`` bytes at ``position`` as a region holding the file open."""
        return FileRegion(self._file, position, length, self.path)

    # ----------------------------------------------------------------- write

    def write(
        self, chunks: Sequence[bytes | bytearray | memoryview], total: int, position: int
    ) -> None:
        """Write ``chunks`` (``total`` bytes) at ``position``, continuing after short writes.

        Raises StorageError on a failed write or one that writes nothing; the
        caller cuts away whatever was written (:meth:`cut`).
        """
        # The common case: one call writes everything.
        written = (
            self._env.pwritev(self.fd, chunks, position, name=self.path)
            if len(chunks) <= _IOV_MAX
            else 0
        )
        if written != total:
            self._write_rest(chunks, total, position, written)

    def _write_rest(
        self,
        chunks: Sequence[bytes | bytearray | memoryview],
        total: int,
        position: int,
        written: int,
    ) -> None:
        """Write what is left of ``chunks`` after the first ``written`` bytes (a
        short write, or none yet)."""
        env, fd, name = self._env, self.fd, self.path
        pending = [memoryview(c) for c in chunks]
        first = 0
        done = written
        while True:
            # Skip what went out; a short write leaves part of one buffer.
            while first < len(pending) and done >= len(pending[first]):
                done -= len(pending[first])
                first += 1
            if first < len(pending) and done:
                pending[first] = pending[first][done:]
            if first >= len(pending):
                break
            done = env.pwritev(fd, pending[first : first + _IOV_MAX], position + written, name=name)
            if done <= 0:
                raise StorageError(
                    f"cannot append to {name}: a write at {position + written} wrote 0 bytes"
                )
            written += done
        if written != total:
            raise StorageError(f"appended {written} bytes to {name}, expected {total}")

    def cut(self, size: int) -> None:
        """Truncate the file to ``size`` bytes."""
        self._env.truncate(self.fd, size)

    def fsync(self) -> None:
        """fsync the file."""
        self._env.fsync(self.fd, name=self.path)

    # ------------------------------------------------------------- lifecycle

    def move_to(self, new_path: Path) -> None:
        """Rename the file (the descriptor stays open)."""
        self._env.rename(self.path, new_path)
        self.path = new_path

    def release(self) -> None:
        """Drop the segment's reference: the descriptor closes with the last region's."""
        self._file.release()


__all__ = ["LogFile"]
