"""What the offset and time indexes share: a memory-mapped file of fixed-size entries.

A new index file is preallocated (zero-filled) to the maximum index size rounded
down to a whole number of entries and mapped; appends write into the map. An
existing file is trusted to be all entries (Kafka's assumption: only the active
segment's index is ever untrimmed, and an unclean shutdown rebuilds it). When
the segment stops being active, or is closed, the file is trimmed to its
entries; the active segment's index is resized back to the maximum.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from seglog.errors import StorageError
from seglog.storage import io


def _allocate(fd: int, size: int) -> None:
    """Give the zero-filled file real blocks now: the first write to each page of
    a sparse mapping would otherwise allocate on the append path."""
    if size > 0 and hasattr(os, "posix_fallocate"):
        with contextlib.suppress(OSError):
            os.posix_fallocate(fd, 0, size)


class IndexFile:
    """A file of ``entry_size``-byte entries, memory-mapped. Subclasses give them meaning."""

    entry_size: int = 8

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int = 10_485_760, writable: bool = True
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self._max_size = max_index_size - max_index_size % self.entry_size
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        try:
            exists = path.exists()
            length = path.stat().st_size if exists else 0
            if writable:
                with open(path, "r+b" if exists else "w+b") as handle:
                    if length == 0:
                        handle.truncate(self._max_size)
                        _allocate(handle.fileno(), self._max_size)
                        self._entries = 0
                    else:
                        self._entries = length // self.entry_size
                        handle.truncate(max(self._max_size, self._entries * self.entry_size))
                    self._map(handle.fileno())
            elif length > 0:
                self._entries = length // self.entry_size
                with open(path, "rb") as handle:
                    self._map(handle.fileno(), readonly=True)
        except OSError as exc:
            raise StorageError(f"cannot open index {path}: {exc.strerror}") from exc

    def _map(self, fd: int, readonly: bool = False) -> None:
        self._length = os.fstat(fd).st_size
        if self._length == 0:
            self._mmap = None
            return
        access = mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE
        self._mmap = mmap.mmap(fd, self._length, access=access)

    def _remap(self, new_length: int) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        try:
            with open(self.path, "r+b") as handle:
                handle.truncate(new_length)
                self._map(handle.fileno())
        except OSError as exc:
            raise StorageError(f"cannot resize index {self.path}: {exc.strerror}") from exc

    # ------------------------------------------------------------ properties

    @property
    def entries(self) -> int:
        """Number of entries written."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries fit in the file as mapped now."""
        return self._length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        """Bytes taken by the entries."""
        return self._entries * self.entry_size

    @property
    def file_length(self) -> int:
        """The length of the file on disk."""
        return self._length

    def _require_writable(self) -> mmap.mmap:
        if not self.writable or self._mmap is None:
            raise StorageError(f"index {self.path} is not open for writing")
        return self._mmap

    # ----------------------------------------------------------- maintenance

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = max(0, min(entries, self._entries))

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries."""
        if self.writable:
            self._remap(self._entries * self.entry_size)

    def resize(self, new_size: int) -> None:
        """Make the file ``new_size`` bytes (rounded down to whole entries), keeping entries."""
        if not self.writable:
            return
        rounded = max(new_size - new_size % self.entry_size, self._entries * self.entry_size)
        self._max_size = rounded
        if rounded != self._length:
            self._remap(rounded)

    def flush(self) -> None:
        """Write the mapped pages back to the file (msync)."""
        if self._mmap is not None and self.writable:
            self._mmap.flush()

    def close(self) -> None:
        """Trim (when writable) and unmap."""
        if self.writable and self._mmap is not None:
            self.trim_to_valid_size()
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def rename_to(self, new_path: Path) -> None:
        """Rename the file; the mapping stays valid."""
        if self.path.exists():
            io.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        """Unmap and remove the file."""
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        io.unlink_if_exists(self.path)
