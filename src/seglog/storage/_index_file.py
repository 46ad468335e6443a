"""What the offset and time indexes share: a memory-mapped file of fixed-size entries.

Grammar (the entry layout is the subclass's)::

    index-file := entry* padding
    padding    := zero-filled whole entries      (only while the index is active)

Lifecycle, as in Kafka (``AbstractIndex`` behind a ``LazyIndex``):

* Nothing is opened or mapped when an index is constructed: the file is opened,
  mapped and its descriptor closed at first use (a lookup, an append, a
  property that needs the entries). A partition with thousands of segments
  therefore opens without touching their indexes, and holds neither a
  descriptor nor a mapping for an index nobody reads (Kafka's ``LazyIndex``).
  The map does not need the descriptor: it is closed as soon as the map exists.
* A file that does not exist yet, opened writable, is created at the maximum
  index size rounded down to whole entries, as a *sparse* file (ftruncate):
  it takes no disk blocks until entries are stored.
* An existing file holds its entries, then possibly padding: the trim at roll
  is not fsynced, so after a power cut an inactive segment's index may come
  back at its preallocated length, zeros after its entries. Entries after the
  first strictly increase, so padding is recognisable (the subclass's
  ``_is_padding``), and the first padding entry, found by binary search when
  the file is first loaded, is where the entries end; the padding is trimmed
  away when the index is writable and ignored otherwise. The loader still
  runs :meth:`IndexFile.sanity_check` on the active segment's index before
  trusting it. Only the owner of the active segment grows an index again
  (:meth:`IndexFile.resize`).
* When the segment stops being active, or is closed, the file is trimmed to
  exactly its entries.

Disk blocks and SIGBUS: a store into a page of a mapped file that has no disk
block behind it makes the kernel allocate one; if the disk is full, the process
gets SIGBUS and dies instead of seeing an error. Reserving the whole maximum
size up front (as this module once did) makes that impossible but costs 10 MiB
per index of real disk, which a restart cannot always find. Instead, before a
store reaches a page that was not yet reserved, the blocks of that page are
reserved with ``posix_fallocate`` (:meth:`IndexFile._reserve`): the only cost
is one open/fallocate/close per page of index (512 offset entries), a full
disk becomes a StorageError on that append, and the disk an index uses is what
its entries use. (Writing entries with ``pwrite`` would fail as cleanly, but
needs a descriptor kept open per active index, which Kafka does not keep.)

Everything past ``entries`` is kept zero (truncation zeroes what it drops), so
a crash-left file always ends in zero entries and never in stale ones that
would look valid.

An index is not thread-safe: its owner serialises every call, including
lookups against remapping (resize, trim, close). Loading at first use is the
exception: it takes a lock, because concurrent readers may be first together.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path
from typing import ClassVar

from seglog.errors import CorruptIndexError, StorageError
from seglog.storage import io

DEFAULT_MAX_INDEX_SIZE = 10_485_760
# Kafka's "warm section": lookups first probe the entry this many bytes from the
# end, so a lookup near the tail (the common case: consumers that keep up)
# touches only the pages recent appends already made hot.
_WARM_BYTES = 8192
# Blocks are reserved a page at a time, just before the first store into it.
_RESERVE_BYTES = mmap.PAGESIZE
_ZERO_PAGE = bytes(mmap.PAGESIZE)


class IndexFile:
    """A file of ``entry_size``-byte entries, memory-mapped. Subclasses give them meaning."""

    entry_size: ClassVar[int]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        *,
        env: io.Env | None = None,
    ) -> None:
        if max_index_size < self.entry_size:
            raise ValueError(
                f"max index size {max_index_size} is smaller than one entry ({self.entry_size})"
            )
        self._env = io.env_or_default(env)
        self._path = Path(path)
        self._base_offset = base_offset
        self._writable = writable
        self._max_size = max_index_size - max_index_size % self.entry_size
        self._warm_entries = _WARM_BYTES // self.entry_size
        # The map, and its buffer: the buffer is what lookups and stores use.
        self._file_map: io.FileMap | None = None
        self._mmap: memoryview | mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        # Bytes from the start of the file whose disk blocks are known to be
        # reserved: a store below it cannot SIGBUS. Starts at 0 even for a
        # file with entries (they might be a crash-left sparse tail); reserving
        # blocks that already exist costs little.
        self._reserved = 0
        self._closed = False
        self._loaded = False
        self._load_lock = threading.Lock()
        # Set by every store into the map and cleared by flush: a flush with
        # nothing new skips the msync (most flushes add no index entry).
        self._dirty = False
        self._entries_changed()

    # --------------------------------------------------------------- loading

    def load(self) -> None:
        """Open and map the file now instead of at first use (no-op once done or closed)."""
        if self._loaded:
            return
        with self._load_lock:
            if self._loaded or self._closed:
                return
            if self._writable:
                self._open_writable()
            else:
                self._open_read_only()
            self._loaded = True
            self._entries_changed()

    @property
    def loaded(self) -> bool:
        """True once the file has been opened and mapped."""
        return self._loaded

    def _use(self) -> None:
        """Raise if the index is closed; open it at its first use."""
        if self._closed:
            raise StorageError(f"index {self._path} is closed")
        if not self._loaded:
            self.load()

    def _peek(self) -> None:
        """Open the index at its first use, for properties (which do not raise when closed)."""
        if not self._loaded and not self._closed:
            self.load()

    def _open_writable(self) -> None:
        # Kafka's rule: only a file that this open creates gets the full length.
        # An existing file keeps its length (trimmed, for an inactive segment)
        # until the active segment's owner resizes it.
        created = True
        try:
            fd = self._env.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            created = False
            fd = self._env.open(self._path, os.O_RDWR)
        except FileNotFoundError as exc:
            raise io.storage_error("create index", self._path, exc) from exc
        try:
            length = self._env.file_size(fd)
            slots = length // self.entry_size
            self._entries = self._entries_before_padding(fd, slots)
            padded = self._entries < slots
            target = self._max_size if created else length
            if padded:
                target = self._entries * self.entry_size  # a power cut's untrimmed tail
            if target != length:
                try:
                    self._set_length(fd, target)
                except StorageError:
                    # Leave no file behind, so the next open creates it again.
                    self._env.unlink(self._path)
                    raise
            self._map(fd, target)
        finally:
            self._env.close(fd)

    def _open_read_only(self) -> None:
        try:
            fd = self._env.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            length = self._env.file_size(fd)
            self._entries = self._entries_before_padding(fd, length // self.entry_size)
            self._map(fd, length)
        finally:
            self._env.close(fd)

    def _entries_before_padding(self, fd: int, slots: int) -> int:
        """How many of the file's first ``slots`` slots are entries, not padding.

        Padding only ever follows the entries, so the first padding slot is
        found by binary search: a handful of reads, whatever the file's length.
        """
        size = self.entry_size
        lo, hi = 0, slots  # the first padding slot is in [lo, hi]; hi: none
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self._env.pread(fd, size, mid * size, name=self._path)
            if len(entry) == size and not self._is_padding(mid, entry):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _is_padding(self, slot: int, entry: bytes) -> bool:
        """Hook: whether ``entry``, at ``slot``, is zero padding rather than an entry."""
        return False

    def _set_length(self, fd: int, new: int) -> None:
        """Make the file ``new`` bytes long; growth is sparse (see the module docstring)."""
        self._env.truncate(fd, new)
        self._reserved = min(self._reserved, new)

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        if length == 0:
            # mmap refuses an empty mapping; an empty index needs none.
            self._file_map = self._mmap = None
            return
        self._file_map = self._env.mmap(fd, length, writable=self._writable, name=self._path)
        self._mmap = self._file_map.buffer

    def _unmap(self) -> None:
        if self._file_map is not None:
            self._mmap = None
            self._file_map.close()
            self._file_map = None

    def _remap(self, new_length: int) -> None:
        """Resize the file to ``new_length`` and map it again.

        If resizing fails the old mapping is restored; if even that fails the
        index is closed, so that no lookup can quietly find nothing.
        """
        fd = self._env.open(self._path, os.O_RDWR)
        old_length = self._length
        try:
            self._unmap()
            try:
                self._set_length(fd, new_length)
            except StorageError:
                self._map(fd, old_length)
                raise
            self._map(fd, new_length)
        except BaseException:
            if self._mmap is None and old_length > 0:
                self._closed = True
            raise
        finally:
            self._env.close(fd)

    def _reserve(self, end: int) -> None:
        """Reserve disk blocks for the file up to ``end`` before a store below it.

        Whole pages at a time, never past the file's length. A full disk
        raises StorageError here, before anything is stored.
        """
        if end <= self._reserved:
            return
        upto = min(self._length, -(-end // _RESERVE_BYTES) * _RESERVE_BYTES)
        fd = self._env.open(self._path, os.O_RDWR)
        try:
            self._env.allocate(fd, self._reserved, upto - self._reserved, name=self._path)
        finally:
            self._env.close(fd)
        self._reserved = upto

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
        self._peek()
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries the file holds at its current length."""
        self._peek()
        return self._length // self.entry_size

    @property
    def is_full(self) -> bool:
        """True when no entry can be appended."""
        self._peek()
        return self._entries >= self._length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        """The bytes taken by the entries: ``entries * entry_size``."""
        self._peek()
        return self._entries * self.entry_size

    @property
    def file_length(self) -> int:
        """The length of the file as this index last set or found it."""
        self._peek()
        return self._length

    def fault_in_first_page(self) -> None:
        """Reserve the first page's blocks and fault the page into the map for writing.

        For the index of a new active segment: the first store into a fresh
        shared map allocates its page cache, which costs milliseconds on some
        machines (1.6 ms on the development VM), and would otherwise land in
        the append that adds the first entry. The page's bytes do not change.
        """
        self._use()
        if not self._writable or self._mmap is None or self._length == 0:
            return
        buf = self._writable_map(min(self._length, _RESERVE_BYTES))
        buf[0] = buf[0]

    def _writable_map(self, end: int) -> memoryview | mmap.mmap:
        """The map, for a store below byte ``end``, with the blocks up to there reserved.

        Raises unless the index is open for writing, and StorageError (before
        anything is stored) if the disk has no room for the blocks.
        """
        self._use()
        if not self._writable:
            raise StorageError(f"index {self._path} is open read-only")
        if self._mmap is None:
            # Only a zero-length file has no map, and it is full.
            raise StorageError(f"index {self._path} has no room for an entry")
        if end > self._reserved:
            self._reserve(end)
        self._dirty = True
        return self._mmap

    # ----------------------------------------------------------------- search

    def _floor_slot(self, key: struct.Struct, field: int, target: int) -> int:
        """The last slot whose field at byte ``field`` is <= ``target``, or -1.

        The field must be non-decreasing over the entries. Probes the last
        entry, then the start of the warm section, so lookups near the tail
        touch few pages; then up to three interpolation probes and a binary
        search of what is left.
        """
        n = self._entries
        buf = self._mmap
        if n == 0 or buf is None:
            return -1
        size = self.entry_size
        unpack = key.unpack_from
        last = n - 1
        if (above := unpack(buf, last * size + field)[0]) <= target:
            return last
        # The last entry is above the target: the answer is in [-1, last - 1].
        first_hot = last - self._warm_entries
        if first_hot > 0 and (low := unpack(buf, first_hot * size + field)[0]) <= target:
            lo, hi = first_hot, last - 1
        else:
            if first_hot > 0:
                above = low
            if (low := unpack(buf, field)[0]) > target:
                return -1
            lo, hi = 0, (first_hot - 1 if first_hot > 0 else last - 1)
        # Invariant: slot lo is <= target (its key is ``low``), slot hi + 1 is above
        # it (its key is ``above``); the answer is in [lo, hi]. Offsets and times
        # grow about evenly, so a few interpolation probes narrow a large range to
        # a handful of slots; the binary search finishes, whatever the spread.
        probes = 3
        while hi - lo > 16 and probes:
            probes -= 1
            guess = lo + (target - low) * (hi + 1 - lo) // (above - low)
            guess = lo + 1 if guess <= lo else (hi if guess > hi else guess)
            key_at = unpack(buf, guess * size + field)[0]
            # Evenly spread keys put the guess on the answer or next to it: the
            # slot beside it, on the answer's side, often settles the search.
            if key_at <= target:
                lo, low = guess, key_at
                if guess < hi:
                    key_at = unpack(buf, (guess + 1) * size + field)[0]
                    if key_at > target:
                        return guess
                    lo, low = guess + 1, key_at
            else:
                hi, above = guess - 1, key_at
                if hi > lo:
                    key_at = unpack(buf, hi * size + field)[0]
                    if key_at <= target:
                        return hi
                    hi, above = hi - 1, key_at
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
            self._zero(buf, entries * self.entry_size, self._entries * self.entry_size)
        self._entries = entries
        self._entries_changed()

    def _zero(self, buf: memoryview | mmap.mmap, start: int, end: int) -> None:
        """Zero bytes [start, end) of the map, storing only into pages that need it.

        Beyond what this index reserved, a page may be a hole of a sparse file
        (a crash-left tail): it reads as zeros already, and a store into it
        could SIGBUS on a full disk. A page holding anything else has a block.
        """
        if end <= self._reserved:
            buf[start:end] = bytes(end - start)
            self._dirty = True
            return
        page = _RESERVE_BYTES
        position = start
        while position < end:
            stop = min(end, (position // page + 1) * page)
            zeros = _ZERO_PAGE[: stop - position]
            if position < self._reserved or buf[position:stop] != zeros:
                buf[position:stop] = zeros
                self._dirty = True
            position = stop

    def truncate_to_entries(self, entries: int) -> None:
        """Keep only the first ``entries`` entries (undoing appends)."""
        self._use()
        self._truncate_to_entries(entries)

    def truncate(self) -> None:
        """Remove every entry."""
        self._use()
        self._truncate_to_entries(0)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (a no-op for a read-only index)."""
        self._use()
        if self._writable:
            self.resize(self.size_in_bytes)

    def resize(self, new_size: int) -> None:
        """Set the file to ``new_size`` bytes rounded down to whole entries, keeping entries.

        Never shrinks below the entries. Growing makes room for appends again
        (the active segment's index, after load or truncation).
        """
        self._use()
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
        self._use()
        try:
            length = self._env.file_size(self._path)
        except FileNotFoundError:
            length = self._length
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
        self._use()
        if self._writable and self._file_map is not None and self._dirty:
            self._env.msync(self._file_map, name=self._path)
            self._dirty = False

    def close(self) -> None:
        """Trim the file to its entries (when writable) and unmap it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._loaded:
            return  # never opened: the file is as it was found
        self._unmap()
        valid = self._entries * self.entry_size
        if self._writable and self._length != valid and self._path.exists():
            self._env.truncate(self._path, valid)
            self._length = valid

    def rename_to(self, new_path: Path) -> None:
        """Rename the file (if it exists) and follow it; the mapping stays valid."""
        if self._path.exists():
            self._env.rename(self._path, new_path)
        self._path = Path(new_path)

    def delete(self) -> None:
        """Unmap and remove the file."""
        self._closed = True
        self._unmap()
        self._env.unlink(self._path)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset}, "
            f"entries={self._entries}, max_entries={self._length // self.entry_size}"
            f"{'' if self._loaded else ', not loaded'})"
        )
