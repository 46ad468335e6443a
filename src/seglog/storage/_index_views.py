"""A segment's indexes read into memory, read-only: for readers that do not own the directory.

The live engine maps its indexes and writes them (:mod:`seglog.storage.offset_index`,
:mod:`seglog.storage.time_index`, whose entry layouts are read here); a
reader of a directory that may belong to a running broker reads an index
whole instead (a broker preallocates, trims and replaces its indexes, and a
map of a file the broker truncates would fault). Re-exported by
:mod:`seglog.storage.reader`.
"""

from __future__ import annotations

import bisect
import errno
import os
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path

from seglog.records import batch
from seglog.storage.offset_index import ENTRY_SIZE as _OFFSET_ENTRY_SIZE
from seglog.storage.time_index import ENTRY as _TIME_ENTRY

_LITTLE_ENDIAN = sys.byteorder == "little"


def read_whole(path: Path) -> bytes:
    """The file's bytes up to the end of its last written extent.

    An active segment's index is preallocated at full length (10 MiB by
    default) and sparse: reading its holes would copy megabytes of zeros that
    :func:`_used_entries` then strips. Only what lies before the end of the last
    data extent is read (holes before it read as zeros, as they are).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        end = _data_end(fd, os.fstat(fd).st_size)
        chunks = []
        done = 0
        while done < end:
            chunk = os.pread(fd, end - done, done)
            if not chunk:
                break
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _data_end(fd: int, size: int) -> int:
    """Where the file's last data extent ends (``size`` where holes cannot be asked about)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return size
    end = position = 0
    while position < size:
        try:
            start = os.lseek(fd, position, seek_data)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after position
                break
            return size  # the file system cannot tell
        position = os.lseek(fd, start, seek_hole)
        end = position
    return min(end, size)


def _used_entries(data: bytes, entry_size: int) -> bytes:
    """``data`` without the zero entries a broker preallocates after an index's entries
    (and without a partial entry at the end, which no writer leaves)."""
    used = len(data.rstrip(b"\0"))
    used += -used % entry_size
    whole = len(data) - len(data) % entry_size
    return data[: min(used, whole)]


class OffsetIndexView:
    """A segment's ``.index`` read into memory: (offset → position) entries, read-only."""

    __slots__ = ("_positions", "_relative", "base_offset")

    def __init__(self, base_offset: int, data: bytes) -> None:
        self.base_offset = base_offset
        values = array("i")
        values.frombytes(_used_entries(data, _OFFSET_ENTRY_SIZE))
        if _LITTLE_ENDIAN:  # the file is big-endian
            values.byteswap()
        self._relative = values[0::2]
        self._positions = values[1::2]

    @classmethod
    def load(cls, path: Path, base_offset: int) -> OffsetIndexView:
        """The index at ``path``; an empty one when the file does not exist."""
        return cls(base_offset, read_whole(path))

    def __len__(self) -> int:
        return len(self._relative)

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (absolute offset, position)."""
        return self.base_offset + self._relative[n], self._positions[n]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        base = self.base_offset
        for relative, position in zip(self._relative, self._positions, strict=True):
            yield base + relative, position

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when the index is empty."""
        return self.base_offset + (self._relative[-1] if self._relative else 0)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry whose offset is at most ``offset``;
        ``(base_offset, 0)`` when there is none."""
        slot = bisect.bisect_right(self._relative, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)


class TimeIndexView:
    """A segment's ``.timeindex`` read into memory: (timestamp → offset) entries, read-only.

    An entry (T, O) says that T is the largest timestamp of the records up to
    and including offset O.
    """

    __slots__ = ("_offsets", "_timestamps", "base_offset")

    def __init__(self, base_offset: int, data: bytes) -> None:
        self.base_offset = base_offset
        entries = list(_TIME_ENTRY.iter_unpack(_used_entries(data, _TIME_ENTRY.size)))
        self._timestamps = [ts for ts, _ in entries]
        self._offsets = [base_offset + relative for _, relative in entries]

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndexView:
        """The index at ``path``; an empty one when the file does not exist."""
        return cls(base_offset, read_whole(path))

    def __len__(self) -> int:
        return len(self._timestamps)

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (timestamp, absolute offset)."""
        return self._timestamps[n], self._offsets[n]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._timestamps, self._offsets, strict=True)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """The last (timestamp, offset), or None when the index is empty."""
        return (self._timestamps[-1], self._offsets[-1]) if self._timestamps else None

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry whose timestamp is at most
        ``timestamp``; ``(NO_TIMESTAMP, base_offset)`` when there is none."""
        slot = bisect.bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return batch.NO_TIMESTAMP, self.base_offset
        return self.entry(slot)
