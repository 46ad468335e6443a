"""Recovery's scan of a ``.log``, chunk by chunk: every entry checked and indexed in one pass.

:meth:`LogSegment.recover <seglog.storage.segment.LogSegment.recover>` reads
the file a chunk at a time (:meth:`~seglog.storage.reader.BatchWalk.valid_chunks`)
and hands each chunk to a :class:`ChunkIndexer`, which walks it once: per v2
batch one header unpack, one CRC-32C call over the batch and the index
bookkeeping, with no object made for the batch. Recovery costs the copy from
the page cache and the CRCs; this keeps the Python around them to a few
operations a batch. Anything else (a legacy entry, a batch that fails a check)
goes through :func:`~seglog.records.log_entries.read_entry`, which accepts it
or names what is wrong. :func:`index_chunks` stores the index entries of
each chunk in the segment's indexes, all at once where they take them.

The rules are those of a whole-file scan: the walk stops at the first entry
that is not whole and valid, and also (``stopped``) at a valid entry whose
offsets are not above the previous one's or cannot be stored relative to the
segment's base: garbage that happens to carry a good CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from seglog.errors import CorruptRecordError
from seglog.records import batch
from seglog.records.crc32c import crc32c_raw
from seglog.records.log_entries import ScanResult, read_entry
from seglog.storage.offset_index import OffsetIndex
from seglog.storage.time_index import TimeIndex

# Base offset, batch length, magic, CRC, last offset delta, max timestamp, record count.
_FIELDS = struct.Struct(">qi4xbI2xi8xq14xi")
_MAX_RELATIVE_OFFSET = 2**31 - 1


class ChunkIndexer:
    """The state of a recovery carried from chunk to chunk, and the walk of one chunk.

    After each chunk, ``offsets``, ``times`` and ``befores`` hold the index
    entries it calls for ((last offset, position), (max timestamp so far, its
    offset), and the bytes since the previous entry), for the caller to store
    and clear; ``valid_end`` and ``next_offset`` describe the whole, valid
    entries so far.
    """

    def __init__(
        self,
        base_offset: int,
        interval: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        since_index: int,
    ) -> None:
        self.base_offset = base_offset
        self.interval = interval
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.since_index = since_index
        self.valid_end = 0
        self.next_offset = base_offset
        self.stopped = False
        self.offsets: list[tuple[int, int]] = []
        self.times: list[tuple[int, int]] = []
        self.befores: list[int] = []

    def __call__(self, view: memoryview, chunk_start: int) -> ScanResult:
        """Check and index the entries of ``view`` (the file from ``chunk_start``).

        Returns where the whole, valid entries end in it and the error that
        ended them, as :func:`~seglog.records.log_entries.scan` does (the
        entries themselves are not listed).
        """
        lowest = self.base_offset
        highest = lowest + _MAX_RELATIVE_OFFSET
        interval = self.interval
        max_ts = self.max_timestamp
        offset_of_max = self.offset_of_max_timestamp
        since_index = self.since_index
        next_offset = self.next_offset
        add_offset = self.offsets.append
        add_time = self.times.append
        add_before = self.befores.append
        unpack = _FIELDS.unpack_from
        checksum = crc32c_raw
        header_size = batch.HEADER_SIZE
        crc_start = batch.ATTRIBUTES_OFFSET
        stop = len(view)
        position = 0
        error: CorruptRecordError | None = None
        while position < stop:
            # The common case inline: a whole v2 batch with a valid CRC.
            if position + header_size <= stop:
                first, length, magic, crc, last_delta, entry_max_ts, count = unpack(view, position)
                end = position + length + 12
                good = (
                    magic == 2
                    and length >= header_size - 12
                    and end <= stop
                    and last_delta >= 0
                    and count >= 0
                    and checksum(view[position + crc_start : end]) == crc
                )
            else:
                good = False
            if good:
                last = first + last_delta
                # Offsets must increase and stay relative-addressable (last >= first
                # >= next_offset >= base is all that is left to check); anything
                # else is garbage that happens to have a valid CRC.
                if first < next_offset or last > highest:
                    self.stopped = True
                    break
            else:
                try:
                    info = read_entry(view, position, check_crc=True)
                except CorruptRecordError as exc:
                    # Drop the traceback: its frames would pin views of the buffer.
                    error = exc.with_traceback(None)
                    break
                first, last, entry_max_ts = info.base_offset, info.last_offset, info.max_timestamp
                end = position + info.size
                if not (lowest <= first <= highest and lowest <= last <= highest) or (
                    first < next_offset
                ):
                    self.stopped = True
                    break
            if entry_max_ts > max_ts:
                max_ts, offset_of_max = entry_max_ts, last
            if since_index > interval:
                add_offset((last, chunk_start + position))
                add_time((max_ts, offset_of_max))
                add_before(since_index)
                since_index = 0
            since_index += end - position
            next_offset = last + 1
            position = end
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = offset_of_max
        self.since_index = since_index
        self.next_offset = next_offset
        if position > 0:
            self.valid_end = chunk_start + position
        if self.stopped and error is None:
            error = CorruptRecordError(
                f"entry at position {chunk_start + position} is out of order"
            )
        return ScanResult([], position, error)


def index_chunks(
    scan: ChunkIndexer,
    chunks: Iterable[object],
    offset_index: OffsetIndex,
    time_index: TimeIndex,
) -> None:
    """Store the index entries ``scan`` calls for, chunk by chunk, into both indexes.

    ``chunks`` is the walk that feeds ``scan`` (one item per chunk checked);
    it ends at the first entry that is not whole and valid, or where ``scan``
    stopped. If an index refuses an entry, its error propagates with ``scan``
    holding the state of that entry, as if the entries had been stored one by one.
    """
    for _ in chunks:
        # The index entries of a chunk are stored together once its
        # entries are checked.
        offsets, times = scan.offsets, scan.times
        if offsets and not _store_index_entries(offset_index, time_index, offsets, times):
            # One by one, as the entries were checked: the error of the
            # entry an index refuses propagates with the state of then.
            end_state = scan.max_timestamp, scan.offset_of_max_timestamp, scan.since_index
            for i, (last, position) in enumerate(offsets):
                max_ts, offset_of_max = times[i]
                scan.max_timestamp, scan.offset_of_max_timestamp = max_ts, offset_of_max
                scan.since_index = scan.befores[i]
                offset_index.append(last, position)
                time_index.maybe_append(max_ts, offset_of_max)
            scan.max_timestamp, scan.offset_of_max_timestamp, scan.since_index = end_state
        scan.offsets, scan.times, scan.befores = [], [], []
        if scan.stopped:
            break


def _store_index_entries(
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    offsets: list[tuple[int, int]],
    times: list[tuple[int, int]],
) -> bool:
    """Store a chunk's index entries at once, if both indexes take all of them;
    False, with nothing stored, if either would refuse one."""
    if offset_index.append_all(offsets):
        if time_index.maybe_append_all(times):
            return True
        # Every offset stored is above those already there: this removes just them.
        offset_index.truncate_to(offsets[0][0])
    return False
