"""A consistency checker for partitions on disk, used by tests and ``seglog verify``.

It reads and reports; it never repairs (that is recovery's job). For each
partition it checks that:

* segments are ordered and their offset ranges do not overlap;
* every entry of every ``.log`` is whole, has a valid CRC and offsets that
  increase, all at or above the segment's base and below the next segment's;
* every offset-index entry points at an entry boundary whose last offset is
  the indexed offset, and entries increase;
* time-index timestamps never decrease, and each indexed offset exists;
* the log end offset is the next offset of the last segment.

Files are read through :mod:`seglog.storage.reader` as they are on disk, also
for an open log: what is checked is what a restart or another reader would
find, not what the log holds in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage.log import Log
from seglog.storage.reader import SegmentReader, segment_bases


@dataclass
class VerifyReport:
    """Problems found in one partition (empty when it is consistent)."""

    name: str
    problems: list[str] = field(default_factory=list)
    entries: int = 0
    bytes: int = 0

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def _scan_segment(segment: SegmentReader, upper: int | None, report: VerifyReport) -> int | None:
    """Check one segment's log and indexes, as they are on disk; return its next offset."""
    name = segment.path.name
    offset_index = segment.offset_index
    if segment.size == 0:
        if len(offset_index):
            report.problems.append(f"{name}: empty log but its offset index has entries")
        return None
    result = segment.scan(check_crc=True)
    if result.error is not None:
        report.problems.append(f"{name}: at position {result.valid_end}: {result.error}")
    boundaries: dict[int, int] = {}
    firsts: dict[int, int] = {}
    previous_last = segment.base_offset - 1
    for entry in result.entries:
        if entry.base_offset <= previous_last:
            report.problems.append(
                f"{name}: entry at position {entry.position} starts at offset "
                f"{entry.base_offset}, not after {previous_last}"
            )
        if upper is not None and entry.last_offset >= upper:
            report.problems.append(
                f"{name}: offset {entry.last_offset} reaches the next segment's base {upper}"
            )
        boundaries[entry.position] = entry.last_offset
        firsts[entry.position] = entry.base_offset
        previous_last = entry.last_offset
    report.entries += len(result.entries)
    report.bytes += result.valid_end

    last_indexed = -1
    for n, (offset, position) in enumerate(offset_index):
        if offset <= last_indexed:
            report.problems.append(f"{name}: offset index entry {n} ({offset}) does not increase")
        last_indexed = offset
        # Lookups stay correct as long as the entry at the indexed position
        # starts at or before the indexed offset (Kafka before 3.8 indexed the
        # last offset of a whole append against the position of its first batch).
        first = firsts.get(position)
        if first is None or first > offset:
            report.problems.append(
                f"{name}: offset index entry {n} maps {offset} to position {position}, "
                f"which is not the start of an entry at or before that offset"
            )
    last_ts = -1
    offsets = set(boundaries.values())
    last_offset = previous_last
    for n, (timestamp, offset) in enumerate(segment.time_index):
        if timestamp < last_ts:
            report.problems.append(f"{name}: time index entry {n} goes back in time")
        last_ts = timestamp
        if offset not in offsets and not segment.base_offset <= offset <= last_offset:
            report.problems.append(
                f"{name}: time index entry {n} names offset {offset}, outside the segment"
            )
    return previous_last + 1 if result.entries else None


def verify_log(log: Log) -> VerifyReport:
    """Check one open partition."""
    report = VerifyReport(log.directory.name)
    segments = log.segments
    next_offset = None
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if upper is not None and upper <= segment.base_offset:
            report.problems.append(f"segments {segment.base_offset} and {upper} are out of order")
        with SegmentReader(segment.log_path, segment.base_offset) as reader:
            found = _scan_segment(reader, upper, report)
        if found is not None:
            next_offset = found
    expected_end = next_offset if next_offset is not None else segments[-1].base_offset
    if segments[-1].size > 0 and log.log_end_offset != expected_end:
        report.problems.append(
            f"log end offset {log.log_end_offset} but the last entry ends at {expected_end}"
        )
    if log.log_start_offset < segments[0].base_offset:
        report.problems.append(
            f"log start offset {log.log_start_offset} is below the first segment "
            f"{segments[0].base_offset}"
        )
    return report


def verify_partition_dir(
    directory: Path, checked: Callable[[int], None] | None = None
) -> VerifyReport:
    """Check a partition directory on disk without changing it (opened read-only).

    ``checked`` is called with each segment's ``.log`` size once it is checked
    (``seglog verify`` draws its progress from it).
    """
    report = VerifyReport(directory.name)
    bases = segment_bases(directory)
    for i, base in enumerate(bases):
        with SegmentReader.open(directory, base) as segment:
            _scan_segment(segment, bases[i + 1] if i + 1 < len(bases) else None, report)
            if checked is not None:
                checked(segment.size)
    return report
