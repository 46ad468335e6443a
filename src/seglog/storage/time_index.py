"""The time index (``.timeindex``): sparse map from timestamps to offsets.

Layout: entries back to back, big-endian, no header::

    TimeIndex => entry*
    entry     => timestamp:int64 relative_offset:int32     (offset - base_offset)

An entry (T, O) means "the largest timestamp in the segment up to offset O is
T". Timestamps never decrease; an entry is added only when T grows. One slot
is kept free for the entry written when the segment is sealed.
"""

from __future__ import annotations

import struct

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from seglog.storage._index_file import IndexFile

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """Kafka's ``.timeindex`` file of one segment."""

    entry_size = 12
    _cached_last: tuple[int, tuple[int, int]] | None = None

    @property
    def is_full(self) -> bool:
        """True when only the reserved final slot is left."""
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (timestamp, absolute offset)."""
        if not 0 <= n < self._entries or self._mmap is None:
            raise IndexError(f"time index entry {n} out of range (entries: {self._entries})")
        timestamp, relative = _ENTRY.unpack_from(self._mmap, n * 12)
        return timestamp, self.base_offset + relative

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if self._entries == 0:
            return NO_TIMESTAMP, self.base_offset
        # Cached for the append path, which checks it on every entry.
        if self._cached_last is None or self._cached_last[0] != self._entries:
            self._cached_last = (self._entries, self.entry(self._entries - 1))
        return self._cached_last[1]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last one."""
        buf = self._require_writable()
        last_ts, last_offset = self.last_entry
        if self._entries > 0 and offset < last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is below the last time-indexed offset {last_offset} in "
                f"{self.path}"
            )
        if self._entries > 0 and timestamp <= last_ts:
            return
        if not skip_full_check and self.is_full:
            raise IndexFullError(f"the time index {self.path} is full")
        if self._entries >= self.max_entries:
            raise IndexFullError(f"the time index {self.path} has no slot left")
        _ENTRY.pack_into(buf, self._entries * 12, timestamp, offset - self.base_offset)
        self._entries += 1
        self._cached_last = (self._entries, (timestamp, offset))

    def _search(self, timestamp: int) -> int:
        buf = self._mmap
        n = self._entries
        if buf is None or n == 0:
            return -1
        unpack = _ENTRY.unpack_from
        if unpack(buf, 0)[0] > timestamp:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(buf, mid * 12)[0] <= timestamp:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry not above the target, else (-1, base)."""
        found = self._search(target_timestamp)
        if found < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.entry(found)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``offset`` or more."""
        keep = self._entries
        while keep > 0 and self.entry(keep - 1)[1] >= offset:
            keep -= 1
        self._truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file cannot be a time index of this segment."""
        if self.file_length % 12 != 0:
            raise CorruptIndexError(
                f"time index file {self.path} has length {self.file_length}, not a multiple of 12"
            )
        if self._entries > 0:
            first_ts = self.entry(0)[0]
            last_ts, last_offset = self.last_entry
            if last_ts < first_ts:
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: last timestamp {last_ts} is below the "
                    f"first {first_ts}"
                )
            if last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"corrupt time index {self.path}: last offset {last_offset} is below the "
                    f"base offset {self.base_offset}"
                )
