"""The offset index (``.index``): sparse map from offsets to ``.log`` positions.

Layout: entries back to back, big-endian, no header::

    OffsetIndex => entry*
    entry       => relative_offset:int32 position:int32    (offset - base_offset)

Worked example: in the segment with base offset 1000, the batch whose last
offset is 1005 and which starts at byte 4170 is indexed as the 8 bytes
``00000005 0000104a``.

Entries increase in both fields. A lookup finds the greatest entry whose
offset is at most the target; the caller scans the log forward from there.
"""

from __future__ import annotations

import struct

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from seglog.storage._index_file import IndexFile

_ENTRY = struct.Struct(">ii")
_MAX_RELATIVE = 2**31 - 1
# Kafka's "warm section": the last 8 KiB of entries are searched first, so
# lookups near the end touch only pages that are already hot.
_WARM_ENTRIES = 8192 // 8


class OffsetIndex(IndexFile):
    """Kafka's ``.index`` file of one segment."""

    entry_size = 8
    _cached_last: tuple[int, int] | None = None

    @property
    def is_full(self) -> bool:
        """True when no entry can be appended."""
        return self._entries >= self.max_entries

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or the base offset when empty."""
        if self._entries == 0:
            return self.base_offset
        # Cached for the append path, which checks it on every entry.
        if self._cached_last is None or self._cached_last[0] != self._entries:
            self._cached_last = (self._entries, self.entry(self._entries - 1)[0])
        return self._cached_last[1]

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position)."""
        if not 0 <= n < self._entries or self._mmap is None:
            raise IndexError(f"index entry {n} out of range (entries: {self._entries})")
        relative, position = _ENTRY.unpack_from(self._mmap, n * 8)
        return self.base_offset + relative, position

    def can_append_offset(self, offset: int) -> bool:
        """True when ``offset`` fits a 32-bit offset relative to the base."""
        return 0 <= offset - self.base_offset <= _MAX_RELATIVE

    def append(self, offset: int, position: int) -> None:
        """Add (offset → position); offsets must strictly increase."""
        buf = self._require_writable()
        if self._entries >= self._length >> 3:
            raise IndexFullError(f"the offset index {self.path} is full")
        relative = offset - self.base_offset
        if not 0 <= relative <= _MAX_RELATIVE:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base {self.base_offset}"
            )
        if self._entries > 0 and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not above the last indexed offset {self.last_offset} "
                f"in {self.path}"
            )
        _ENTRY.pack_into(buf, self._entries * 8, relative, position)
        self._entries += 1
        self._cached_last = (self._entries, offset)

    def _search(self, relative: int) -> int:
        """Index of the greatest entry with relative offset <= ``relative``, or -1."""
        buf = self._mmap
        n = self._entries
        if buf is None or n == 0:
            return -1
        unpack = _ENTRY.unpack_from
        if unpack(buf, 0)[0] > relative:
            return -1
        lo, hi = 0, n - 1
        warm_start = max(0, n - _WARM_ENTRIES)
        if unpack(buf, warm_start * 8)[0] <= relative:
            lo = warm_start
        else:
            hi = warm_start
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(buf, mid * 8)[0] <= relative:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, target: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry not above ``target``, else (base, 0)."""
        found = self._search(target - self.base_offset)
        if found < 0:
            return self.base_offset, 0
        return self.entry(found)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``offset`` or more."""
        found = self._search(offset - self.base_offset)
        if found < 0:
            self._truncate_to_entries(0)
            return
        entry_offset = self.entry(found)[0]
        self._truncate_to_entries(found if entry_offset == offset else found + 1)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file cannot be an offset index of this segment."""
        if self.file_length % 8 != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self.file_length}, not a multiple of 8"
            )
        if self._entries > 0 and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt index {self.path}: last offset {self.last_offset} is below the base "
                f"offset {self.base_offset}"
            )
