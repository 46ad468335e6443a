"""The offset index (``.index``): a sparse map from offsets to byte positions in the ``.log``.

Grammar (big-endian, no header, no checksum)::

    offset-index := entry* zero-entry*
    entry        := relative-offset:int32 position:int32
    zero-entry   := 0x00000000 0x00000000     (preallocated room; trimmed away on close)

``relative-offset`` is ``offset - base_offset`` (0 .. 2**31-1) and ``position``
is the byte position in the segment's ``.log`` of the batch whose *last*
offset is ``offset``. Both strictly increase from entry to entry.

Example: in the segment with base offset 0, the batch whose last offset is 5
and which starts at byte 100 is the 8 bytes ``00000005 00000064``.

A lookup finds the greatest entry whose offset is at most the target; the
segment then scans the ``.log`` forward from that position. The index can
always be rebuilt from the ``.log``, which is why it carries no checksum.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError, StorageError
from seglog.storage._index_file import DEFAULT_MAX_INDEX_SIZE, IndexFile

__all__ = ["DEFAULT_MAX_INDEX_SIZE", "ENTRY_SIZE", "OffsetIndex"]

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")
_INT32 = struct.Struct(">i")
_POSITION_FIELD = 4
_MAX_INT32 = 2**31 - 1


class OffsetIndex(IndexFile):
    """Kafka's ``.index`` file of one segment: (offset → position) entries."""

    entry_size = ENTRY_SIZE
    _last_offset: int

    def _entries_changed(self) -> None:
        # Cached: the append path checks the last offset on every entry.
        n = self._entries
        buf = self._mmap
        if n == 0 or buf is None:
            self._last_offset = self._base_offset
        else:
            self._last_offset = self._base_offset + _INT32.unpack_from(buf, (n - 1) * 8)[0]

    def _is_padding(self, slot: int, entry: bytes) -> bool:
        # Relative offsets strictly increase, so only the first entry may hold 0;
        # and no entry points at position 0 (the first batch is never indexed).
        relative, position = _ENTRY.unpack(entry)
        return relative == 0 and (slot > 0 or position == 0)

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or the base offset when empty."""
        self._peek()
        return self._last_offset

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (absolute offset, position)."""
        self._use()
        buf = self._mmap
        if not 0 <= n < self._entries or buf is None:
            raise IndexError(f"entry {n} out of range: {self._path} has {self._entries}")
        relative, position = _ENTRY.unpack_from(buf, n * 8)
        return self._base_offset + relative, position

    def can_append_offset(self, offset: int) -> bool:
        """True if ``offset`` can be stored relative to the base (0 <= offset - base < 2**31).

        When it cannot, the segment must roll before taking the batch.
        """
        return 0 <= offset - self._base_offset <= _MAX_INT32

    def append(self, offset: int, position: int) -> None:
        """Add the entry (``offset`` → ``position``).

        Raises IndexFullError when there is no free slot, InvalidOffsetError if
        ``offset`` is not above the last entry's or cannot be stored relative to
        the base, and StorageError if the index is closed or read-only.
        """
        if self._closed or not self._loaded:  # else _use() has nothing to do
            self._use()
        if not self._writable:
            raise StorageError(f"cannot append to index {self._path}: it is open read-only")
        n = self._entries
        if n >= self._length >> 3:
            raise IndexFullError(f"offset index {self._path} is full ({n} entries)")
        if n > 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"cannot append offset {offset} to slot {n} of {self._path}: it is not "
                f"above the last offset {self._last_offset}"
            )
        relative = offset - self._base_offset
        if not 0 <= relative <= _MAX_INT32:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored in {self._path} relative to its base "
                f"offset {self._base_offset}"
            )
        if not 0 <= position <= _MAX_INT32:
            raise ValueError(f"position {position} does not fit an int32")
        end = (n + 1) * 8
        buf = self._mmap
        if buf is None or end > self._reserved:
            buf = self._writable_map(end)
        else:  # what _writable_map does when the blocks are already reserved
            self._dirty = True
        _ENTRY.pack_into(buf, n * 8, relative, position)
        self._entries = n + 1
        self._last_offset = offset

    def append_all(self, entries: Sequence[tuple[int, int]]) -> bool:
        """Add every (offset, position) of ``entries``, in one store, if :meth:`append`
        would take each of them in turn; False, with nothing stored, if it would
        refuse one or the disk has no room for the blocks (recovery then appends
        one by one, which raises where it must).
        """
        self._use()
        n = self._entries
        if not entries or not self._writable or n + len(entries) > self._length >> 3:
            return not entries
        base = self._base_offset
        last = self._last_offset if n > 0 else base - 1
        flat: list[int] = []
        add = flat.append
        for offset, position in entries:
            relative = offset - base
            if offset <= last or not (0 <= relative <= _MAX_INT32 and 0 <= position <= _MAX_INT32):
                return False
            add(relative)
            add(position)
            last = offset
        try:
            buf = self._writable_map((n + len(entries)) * 8)
        except StorageError:
            return False
        struct.pack_into(f">{len(flat)}i", buf, n * 8, *flat)
        self._entries = n + len(entries)
        self._last_offset = last
        return True

    def lookup(self, target: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry whose offset is <= ``target``.

        ``(base_offset, 0)`` if there is none: the scan then starts at the
        beginning of the segment.
        """
        self._use()
        slot = self._floor_slot(_INT32, 0, target - self._base_offset)
        buf = self._mmap
        if slot < 0 or buf is None:
            return self._base_offset, 0
        relative, position = _ENTRY.unpack_from(buf, slot * 8)
        return self._base_offset + relative, position

    def fetch_upper_bound_offset(
        self, start_position: int, fetch_size: int
    ) -> tuple[int, int] | None:
        """The first entry whose position is >= ``start_position + fetch_size``, or None.

        A read of ``fetch_size`` bytes from ``start_position`` cannot reach past
        that entry's batch, so it bounds how much of the ``.log`` to look at.
        """
        self._use()
        target = start_position + fetch_size
        slot = self._floor_slot(_INT32, _POSITION_FIELD, target - 1) + 1
        if slot >= self._entries:
            return None
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``.

        If ``offset`` falls between two entries the lower one stays: it still
        points at a batch that precedes ``offset``.
        """
        self._use()
        keep = self._floor_slot(_INT32, 0, offset - self._base_offset - 1) + 1
        self._truncate_to_entries(keep)

    def _check_entries(self, full: bool) -> None:
        n = self._entries
        if n == 0:
            return
        if self._last_offset < self._base_offset:
            raise CorruptIndexError(
                f"index {self._path} is corrupt: its last offset {self._last_offset} is "
                f"below the base offset {self._base_offset}"
            )
        buf = self._mmap
        if buf is None or n < 2:
            return
        # Entries strictly increase, so two equal last entries mean a zero tail
        # left by a crash (or stale bytes): the index must be rebuilt.
        first = n - 2 if not full else 0
        data = buf[first * 8 : n * 8]
        previous = -1
        for slot, (relative, position) in enumerate(_ENTRY.iter_unpack(data), start=first):
            if relative < 0:
                raise CorruptIndexError(
                    f"index {self._path} is corrupt: entry {slot} has a negative relative "
                    f"offset {relative}"
                )
            if relative <= previous:
                raise CorruptIndexError(
                    f"index {self._path} is corrupt: entry {slot} (offset "
                    f"{self._base_offset + relative}, position {position}) is not above "
                    "the entry before it"
                )
            previous = relative
