"""What the offset and time indexes share: a memory-mapped file of fixed-size entries.

Grammar (the entry layout is the subclass's)::

    index-file := entry* padding
    padding    := zero-filled whole entries      (only while the index is active)

Lifecycle, as in Kafka:

* A new index (file missing or empty) opened writable is preallocated to the
  maximum index size rounded down to whole entries, zero-filled, with blocks
  reserved, and mapped; appends store into the map.
* An existing non-empty file is trusted to be entries only: ``entries`` is its
  length divided by the entry size. Only the active segment's index is ever
  longer than its entries, and after an unclean shutdown it is rebuilt from
  the log, so the loader must run :meth:`IndexFile.sanity_check` (which spots a
  crash-left zero tail) before trusting it. Opened writable, the file is grown
  back to the maximum size so appends can continue.
* When the segment stops being active, or is closed, the file is trimmed to
  exactly its entries.

Everything past ``entries`` is kept zero (truncation zeroes what it drops), so
a crash-left file always ends in zero entries and never in stale ones that
would look valid.

An index is not thread-safe: its owner serialises every call, including
lookups against remapping (resize, trim, close).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar

from seglog.errors import CorruptIndexError, StorageError
from seglog.storage import io

DEFAULT_MAX_INDEX_SIZE = 10_485_760
# Kafka's "warm section": lookups first probe the entry this many bytes from the
# end, so a lookup near the tail (the common case: consumers that keep up)
# touches only the pages recent appends already made hot.
_WARM_BYTES = 8192


class IndexFile:
    """A file of ``entry_size``-byte entries, memory-mapped. Subclasses give them meaning."""

    entry_size: ClassVar[int]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        if max_index_size < self.entry_size:
            raise ValueError(
                f"max index size {max_index_size} is smaller than one entry ({self.entry_size})"
            )
        self._path = Path(path)
        self._base_offset = base_offset
        self._writable = writable
        self._max_size = max_index_size - max_index_size % self.entry_size
        self._warm_entries = _WARM_BYTES // self.entry_size
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        self._closed = False
        # Set by every store into the map and cleared by flush: a flush with
        # nothing new skips the msync (most flushes add no index entry).
        self._dirty = False
        if writable:
            self._open_writable()
        else:
            self._open_read_only()
        self._entries_changed()

    def _open_writable(self) -> None:
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise io.storage_error("open index", self._path, exc) from exc
        try:
            length = _file_size(fd, self._path)
            size = self.entry_size
            if length == 0:
                target = self._max_size
            elif length % size != 0:
                # Not a whole number of entries: leave it for sanity_check to
                # report, rather than hide the evidence by resizing it.
                target = length
            else:
                target = max(self._max_size, length)
            self._entries = length // size
            self._set_length(fd, length, target)
            self._map(fd, target)
        finally:
            os.close(fd)

    def _open_read_only(self) -> None:
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise io.storage_error("open index", self._path, exc) from exc
        try:
            length = _file_size(fd, self._path)
            self._entries = length // self.entry_size
            self._map(fd, length)
        finally:
            os.close(fd)

    def _set_length(self, fd: int, old: int, new: int) -> None:
        """Make the file ``new`` bytes long, with blocks reserved for any growth.

        On failure the file is put back to ``old`` bytes: a sparse tail left
        behind would become SIGBUS on the first store into it.
        """
        if new == old:
            return
        io.truncate_file(fd, new)
        if new > old:
            try:
                io.preallocate(fd, old, new - old, name=self._path)
            except StorageError:
                with contextlib.suppress(StorageError):
                    io.truncate_file(fd, old)
                raise

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        if length == 0:
            # mmap refuses an empty mapping; an empty index needs none.
            self._mmap = None
            return
        access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
        try:
            self._mmap = mmap.mmap(fd, length, access=access)
        except OSError as exc:
            raise io.storage_error("map index", self._path, exc) from exc

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _remap(self, new_length: int) -> None:
        """Resize the file to ``new_length`` and map it again.

        If resizing fails the old mapping is restored; if even that fails the
        index is closed, so that no lookup can quietly find nothing.
        """
        try:
            fd = os.open(self._path, os.O_RDWR)
        except OSError as exc:
            raise io.storage_error("open index", self._path, exc) from exc
        old_length = self._length
        try:
            self._unmap()
            try:
                self._set_length(fd, old_length, new_length)
            except StorageError:
                self._map(fd, old_length)
                raise
            self._map(fd, new_length)
        except BaseException:
            if self._mmap is None and old_length > 0:
                self._closed = True
            raise
        finally:
            os.close(fd)

    def _entries_changed(self) -> None:
        """Hook: ``_entries`` was set other than by an append (open, truncation)."""

    # ------------------------------------------------------------------ state

    @property
    def path(self) -> Path:
        """The file; follows :meth:`rename_to`."""
        return self._path

    @property
    def base_offset(self) -> int:
        """The base offset of the segment; entries store offsets relative to it."""
        return self._base_offset

    @property
    def writable(self) -> bool:
        """Whether the file is mapped for writing (appends, resizes, trims)."""
        return self._writable

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`delete`."""
        return self._closed

    @property
    def entries(self) -> int:
        """The number of entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries the file holds at its current length."""
        return self._length // self.entry_size

    @property
    def is_full(self) -> bool:
        """True when no entry can be appended."""
        return self._entries >= self._length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        """The bytes taken by the entries: ``entries * entry_size``."""
        return self._entries * self.entry_size

    @property
    def file_length(self) -> int:
        """The length of the file as this index last set or found it."""
        return self._length

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"index {self._path} is closed")

    def _writable_map(self) -> mmap.mmap:
        """The map, for a store; raises unless the index is open for writing."""
        self._check_open()
        if not self._writable:
            raise StorageError(f"index {self._path} is open read-only")
        if self._mmap is None:
            # Only a zero-length file has no map, and it is full.
            raise StorageError(f"index {self._path} has no room for an entry")
        self._dirty = True
        return self._mmap

    # ----------------------------------------------------------------- search

    def _floor_slot(self, key: struct.Struct, field: int, target: int) -> int:
        """The last slot whose field at byte ``field`` is <= ``target``, or -1.

        The field must be non-decreasing over the entries. Probes the last
        entry, then the start of the warm section, before a binary search, so
        lookups near the tail touch few pages.
        """
        n = self._entries
        buf = self._mmap
        if n == 0 or buf is None:
            return -1
        size = self.entry_size
        unpack = key.unpack_from
        last = n - 1
        if unpack(buf, last * size + field)[0] <= target:
            return last
        # The last entry is above the target: the answer is in [-1, last - 1].
        first_hot = last - self._warm_entries
        if first_hot > 0 and unpack(buf, first_hot * size + field)[0] <= target:
            lo, hi = first_hot, last - 1
        else:
            if unpack(buf, field)[0] > target:
                return -1
            lo, hi = 0, (first_hot - 1 if first_hot > 0 else last - 1)
        # Invariant: slot lo is <= target; the answer is in [lo, hi].
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(buf, mid * size + field)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # ------------------------------------------------------------ maintenance

    def _truncate_to_entries(self, entries: int) -> None:
        entries = max(0, min(entries, self._entries))
        if entries == self._entries:
            return
        buf = self._mmap
        if self._writable and buf is not None:
            start = entries * self.entry_size
            end = self._entries * self.entry_size
            buf[start:end] = bytes(end - start)
            self._dirty = True
        self._entries = entries
        self._entries_changed()

    def truncate(self) -> None:
        """Remove every entry."""
        self._check_open()
        self._truncate_to_entries(0)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (a no-op for a read-only index)."""
        self._check_open()
        if self._writable:
            self.resize(self.size_in_bytes)

    def resize(self, new_size: int) -> None:
        """Set the file to ``new_size`` bytes rounded down to whole entries, keeping entries.

        Never shrinks below the entries. Growing makes room for appends again
        (the active segment's index, after load or truncation).
        """
        self._check_open()
        if not self._writable:
            raise StorageError(f"cannot resize index {self._path}: it is open read-only")
        rounded = max(new_size - new_size % self.entry_size, self.size_in_bytes)
        if rounded != self._length:
            self._remap(rounded)
            self._dirty = True

    def sanity_check(self, full: bool = False) -> None:
        """Raise CorruptIndexError if the file cannot be a valid index of this segment.

        Checks the length of the file on disk (whole entries) and the format's
        rules about the entries. By default only the first and last entries are
        examined, which is cheap and catches what a crash leaves (a zero tail);
        ``full=True`` checks the order of every entry.
        """
        self._check_open()
        try:
            length = os.stat(self._path).st_size
        except FileNotFoundError:
            length = self._length
        except OSError as exc:
            raise io.storage_error("stat index", self._path, exc) from exc
        if length % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self._path} is corrupt: its length {length} is not a "
                f"multiple of {self.entry_size}"
            )
        self._check_entries(full)

    def _check_entries(self, full: bool) -> None:
        """Hook: raise CorruptIndexError if the entries break the format's rules."""

    def flush(self) -> None:
        """Write the mapped pages back to the file (msync)."""
        self._check_open()
        if self._writable and self._mmap is not None and self._dirty:
            try:
                self._mmap.flush()
            except OSError as exc:
                raise io.storage_error("flush index", self._path, exc) from exc
            self._dirty = False

    def close(self) -> None:
        """Trim the file to its entries (when writable) and unmap it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._unmap()
        valid = self.size_in_bytes
        if self._writable and self._length != valid and self._path.exists():
            io.truncate_file(self._path, valid)
            self._length = valid

    def rename_to(self, new_path: Path) -> None:
        """Rename the file (if it exists) and follow it; the mapping stays valid."""
        if self._path.exists():
            io.rename(self._path, new_path)
        self._path = Path(new_path)

    def delete(self) -> None:
        """Unmap and remove the file."""
        self._closed = True
        self._unmap()
        io.unlink_if_exists(self._path)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset}, "
            f"entries={self._entries}, max_entries={self.max_entries})"
        )


def _file_size(fd: int, path: Path) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError as exc:
        raise io.storage_error("stat index", path, exc) from exc
