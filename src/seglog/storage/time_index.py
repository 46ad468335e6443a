"""The time index (``.timeindex``): a sparse map from timestamps to offsets.

Grammar (big-endian, no header, no checksum)::

    time-index := entry* zero-entry*
    entry      := timestamp:int64 relative-offset:int32
    zero-entry := 0x0000000000000000 0x00000000   (preallocated room; trimmed away on close)

An entry (T, O) means "T is the largest timestamp of any record up to and
including offset O" (``relative-offset`` is ``O - base_offset``). Timestamps
strictly increase from entry to entry and offsets never decrease, because an
entry is added only when the segment's maximum timestamp has grown.

Example: in the segment with base offset 1000, a maximum timestamp of
1 700 000 000 000 ms first reached at offset 1005 is the 12 bytes
``0000018bcfe56800 00000005``.

The last slot of the file is kept for the entry written when the segment
stops being active or is closed, so that the final maximum timestamp is
always indexed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from seglog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError, StorageError
from seglog.storage._index_file import DEFAULT_MAX_INDEX_SIZE, IndexFile

__all__ = ["DEFAULT_MAX_INDEX_SIZE", "ENTRY", "ENTRY_SIZE", "NO_TIMESTAMP", "TimeIndex"]

ENTRY_SIZE = 12
NO_TIMESTAMP = -1
_ZERO_ENTRY = bytes(ENTRY_SIZE)
#: One entry: (timestamp, offset relative to the base), big-endian.
ENTRY = _ENTRY = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_OFFSET_FIELD = 8
_MAX_INT32 = 2**31 - 1
_MIN_INT64 = -(2**63)
_MAX_INT64 = 2**63 - 1


class TimeIndex(IndexFile):
    """Kafka's ``.timeindex`` file of one segment: (timestamp → offset) entries."""

    entry_size = ENTRY_SIZE
    _last_entry: tuple[int, int]

    def _entries_changed(self) -> None:
        # Cached: the append path compares with the last entry on every call.
        n = self._entries
        buf = self._mmap
        if n == 0 or buf is None:
            self._last_entry = (NO_TIMESTAMP, self._base_offset)
        else:
            timestamp, relative = _ENTRY.unpack_from(buf, (n - 1) * ENTRY_SIZE)
            self._last_entry = (timestamp, self._base_offset + relative)

    @property
    def is_full(self) -> bool:
        """True when only the slot reserved for the final entry is left."""
        self._peek()
        return self._entries >= self._length // ENTRY_SIZE - 1

    def _is_padding(self, slot: int, entry: bytes) -> bool:
        # Timestamps strictly increase and are not negative, so only the first
        # entry could be (0, relative 0); it never is in practice, and taking it
        # for padding costs at most a scan, while keeping it would make the
        # segment look 56 years old to retention.
        return entry == _ZERO_ENTRY

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or ``(-1, base_offset)`` when empty."""
        self._peek()
        return self._last_entry

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry (0-based) as (timestamp, absolute offset)."""
        self._use()
        buf = self._mmap
        if not 0 <= n < self._entries or buf is None:
            raise IndexError(f"entry {n} out of range: {self._path} has {self._entries}")
        timestamp, relative = _ENTRY.unpack_from(buf, n * ENTRY_SIZE)
        return timestamp, self._base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (``timestamp``, ``offset``) if ``timestamp`` is above the last entry's.

        A timestamp that is not above the last one (for an empty index: not
        above -1, so records without timestamps add nothing) is ignored, which
        makes repeating the final entry at roll and at close harmless.

        Raises IndexFullError when the index is full (unless
        ``skip_full_check``, which only the final entry may use, and which
        still needs a slot), InvalidOffsetError if ``offset`` is below the last
        entry's or cannot be stored relative to the base, and StorageError if
        the index is closed, or read-only and the entry would be written.
        """
        if self._closed or not self._loaded:  # else _use() has nothing to do
            self._use()
        n = self._entries
        if not skip_full_check and n >= self._length // ENTRY_SIZE - 1:
            raise IndexFullError(f"time index {self._path} is full ({n} entries)")
        last_timestamp, last_offset = self._last_entry
        if n > 0 and offset < last_offset:
            raise InvalidOffsetError(
                f"cannot append offset {offset} to slot {n} of {self._path}: it is below "
                f"the last offset {last_offset}"
            )
        if timestamp <= last_timestamp:
            return
        relative = offset - self._base_offset
        if not 0 <= relative <= _MAX_INT32:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored in {self._path} relative to its base "
                f"offset {self._base_offset}"
            )
        if timestamp > _MAX_INT64:
            raise ValueError(f"timestamp {timestamp} does not fit an int64")
        if not self._writable:
            raise StorageError(f"cannot append to time index {self._path}: it is open read-only")
        if n >= self._length // ENTRY_SIZE:
            raise IndexFullError(f"time index {self._path} has no slot left ({n} entries)")
        end = (n + 1) * ENTRY_SIZE
        buf = self._mmap
        if buf is None or end > self._reserved:
            buf = self._writable_map(end)
        else:  # what _writable_map does when the blocks are already reserved
            self._dirty = True
        _ENTRY.pack_into(buf, n * ENTRY_SIZE, timestamp, relative)
        self._entries = n + 1
        self._last_entry = (timestamp, offset)

    def maybe_append_all(self, entries: Sequence[tuple[int, int]]) -> bool:
        """:meth:`maybe_append` of every (timestamp, offset) of ``entries``, in one store,
        if it would take (or ignore) each of them in turn; False, with nothing
        stored, if it would refuse one or the disk has no room for the blocks
        (recovery then appends one by one, which raises where it must).
        """
        self._use()
        n = self._entries
        slots = self._length // ENTRY_SIZE - 1  # the last slot is the final entry's
        if not self._writable:
            return not entries
        base = self._base_offset
        last_timestamp, last_offset = self._last_entry
        count = n
        flat: list[int] = []
        add = flat.append
        for timestamp, offset in entries:
            if count >= slots or (count > 0 and offset < last_offset):
                return False
            if timestamp <= last_timestamp:
                continue
            relative = offset - base
            if not 0 <= relative <= _MAX_INT32 or timestamp > _MAX_INT64:
                return False
            add(timestamp)
            add(relative)
            last_timestamp, last_offset = timestamp, offset
            count += 1
        if count == n:
            return True
        try:
            buf = self._writable_map(count * ENTRY_SIZE)
        except StorageError:
            return False
        struct.pack_into(">" + "qi" * (count - n), buf, n * ENTRY_SIZE, *flat)
        self._entries = count
        self._last_entry = (last_timestamp, last_offset)
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry whose timestamp is <= the target.

        ``(-1, base_offset)`` if there is none: the search then starts at the
        beginning of the segment.
        """
        self._use()
        slot = self._floor_slot(_INT64, 0, target_timestamp)
        buf = self._mmap
        if slot < 0 or buf is None:
            return NO_TIMESTAMP, self._base_offset
        timestamp, relative = _ENTRY.unpack_from(buf, slot * ENTRY_SIZE)
        return timestamp, self._base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._use()
        keep = self._floor_slot(_INT32, _OFFSET_FIELD, offset - self._base_offset - 1) + 1
        self._truncate_to_entries(keep)

    def _check_entries(self, full: bool) -> None:
        n = self._entries
        buf = self._mmap
        if n == 0 or buf is None:
            return
        first_timestamp = _INT64.unpack_from(buf, 0)[0]
        last_timestamp, last_offset = self._last_entry
        if last_timestamp < first_timestamp:
            raise CorruptIndexError(
                f"time index {self._path} is corrupt: its last timestamp {last_timestamp} "
                f"is below its first {first_timestamp}"
            )
        if last_offset < self._base_offset:
            raise CorruptIndexError(
                f"time index {self._path} is corrupt: its last offset {last_offset} is "
                f"below the base offset {self._base_offset}"
            )
        if n < 2:
            return
        # Timestamps strictly increase, so two equal last entries mean a zero
        # tail left by a crash (or stale bytes): the index must be rebuilt.
        first = 0 if full else n - 2
        data = buf[first * ENTRY_SIZE : n * ENTRY_SIZE]
        previous_timestamp = _MIN_INT64 - 1
        previous_relative = 0
        for slot, (timestamp, relative) in enumerate(_ENTRY.iter_unpack(data), start=first):
            if timestamp <= previous_timestamp or relative < previous_relative:
                raise CorruptIndexError(
                    f"time index {self._path} is corrupt: entry {slot} (timestamp "
                    f"{timestamp}, offset {self._base_offset + relative}) does not follow "
                    "the entry before it"
                )
            previous_timestamp, previous_relative = timestamp, relative
