"""What a log and its segments answer: appends, reads and lookups, as plain values.

Owns no behaviour: these are the values :class:`~seglog.storage.log.Log` and
:class:`~seglog.storage.segment.LogSegment` return (Kafka keeps them in
classes of their own too: LogAppendInfo, FetchDataInfo, OffsetPosition,
TimestampAndOffset), and the sentinel timestamps of a ListOffsets lookup.
Both modules re-export the names they return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from seglog.storage.region import FileRegion

#: ListOffsets' sentinel timestamps (:meth:`Log.find_offset_by_timestamp
#: <seglog.storage.log.Log.find_offset_by_timestamp>`): the log start offset,
#: the high watermark, the record with the largest timestamp.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An entry found in a segment: its first offset, file position and size."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """A read from one segment: the bytes to send and the offset of the first entry."""

    region: FileRegion
    first_entry_offset: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A record's timestamp and offset, the answer of a lookup by time."""

    timestamp: int
    offset: int


class AppendInfo(NamedTuple):
    """What an append wrote: offsets, timestamps and counts.

    A named tuple: one is built per append, and a frozen dataclass's
    ``__init__`` costs several times as much.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    size: int
    #: True if the append repeated an idempotent producer's batch already in
    #: the log: nothing was written and the offsets are the original ones.
    duplicate: bool = False
    #: True if the append reached ``flush.messages`` and was asked to leave the
    #: fsync to its caller (``defer_flush``), which must ``flush(last_offset + 1)``.
    flush_needed: bool = False


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """A read: the bytes (None if there were none) and the log's offsets at that moment."""

    data: SegmentRead | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "LogReadResult",
    "OffsetPosition",
    "SegmentRead",
    "TimestampAndOffset",
]
