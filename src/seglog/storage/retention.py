"""Retention for ``cleanup.policy=delete``: whole segments go, oldest first.

Three rules, each walking segments from the oldest and stopping at the first
that does not match, so only a prefix of the log is ever removed:

* log start offset: a segment goes when the *next* segment's base is at or
  below the log start offset (DeleteRecords moved it past the whole segment);
  this rule applies whatever the cleanup policy;
* time: a segment goes when ``now - largest timestamp > retention.ms``
  (``retention.ms < 0`` disables it);
* size: while the log is more than ``retention.bytes`` over, the oldest
  segment goes if it is no bigger than what is still over
  (``retention.bytes < 0`` disables it).

A segment is removable only once everything in it is below the high
watermark; the empty active segment is never removed; if every segment
qualifies, the log rolls first so that an active segment remains and offsets
never go backwards. The removed segments are renamed ``.deleted`` and unlinked
after ``file.delete.delay.ms`` by the log directory.
"""

from __future__ import annotations

from collections.abc import Callable

from seglog.storage.log import Log
from seglog.storage.segment import LogSegment

Predicate = Callable[[LogSegment, LogSegment | None], bool]


def _deletable_prefix(log: Log, predicate: Predicate, skip: int = 0) -> int:
    """How many segments from ``skip`` on the rule removes (what is left after ``skip`` went)."""
    segments = log.segments
    high_watermark = log.high_watermark
    count = 0
    for i, segment in enumerate(segments):
        if i < skip:
            continue
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log.log_end_offset
        if upper > high_watermark:
            break
        if following is None and segment.is_empty:
            break
        if not predicate(segment, following):
            break
        count += 1
    return count


def delete_log_start_offset_breached(log: Log) -> int:
    """Remove segments wholly below the log start offset; returns the count."""
    start = log.log_start_offset

    def below_start(segment: LogSegment, following: LogSegment | None) -> bool:
        return following is not None and following.base_offset <= start

    return log.delete_segments_prefix(
        _deletable_prefix(log, below_start), "log start offset breach"
    )


def delete_retention_ms_breached(log: Log, now_ms: int) -> int:
    """Remove segments whose newest record is older than ``retention.ms``."""
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0

    def expired(segment: LogSegment, following: LogSegment | None) -> bool:
        return now_ms - segment.largest_timestamp > retention_ms

    return log.delete_segments_prefix(_deletable_prefix(log, expired), "retention time breach")


def delete_retention_size_breached(log: Log) -> int:
    """Remove the oldest segments while the log is larger than ``retention.bytes``."""
    retention_bytes = log.config.retention_bytes
    if retention_bytes < 0:
        return 0
    excess = log.size - retention_bytes
    if excess <= 0:
        return 0
    remaining = excess

    def over(segment: LogSegment, following: LogSegment | None) -> bool:
        nonlocal remaining
        if segment.size <= remaining:
            remaining -= segment.size
            return True
        return False

    return log.delete_segments_prefix(_deletable_prefix(log, over), "retention size breach")


def delete_old_segments(log: Log, now_ms: int) -> int:
    """Apply the rules of the log's cleanup policy; returns the segments removed."""
    removed = delete_log_start_offset_breached(log)
    if log.config.delete:
        removed += delete_retention_ms_breached(log, now_ms)
        removed += delete_retention_size_breached(log)
    return removed


def due_segments(log: Log, now_ms: int) -> int:
    """How many of the oldest segments the next pass of :func:`delete_old_segments` removes.

    The same rules in the same order, without removing anything: what one
    rule would take is skipped by the next, as the pass does.
    """
    start = log.log_start_offset
    due = _deletable_prefix(
        log, lambda segment, following: following is not None and following.base_offset <= start
    )
    config = log.config
    if not config.delete:
        return due
    if config.retention_ms >= 0:
        retention_ms = config.retention_ms
        due += _deletable_prefix(
            log,
            lambda segment, following: now_ms - segment.largest_timestamp > retention_ms,
            due,
        )
    if config.retention_bytes >= 0:
        segments = log.segments
        remaining = log.size - sum(s.size for s in segments[:due]) - config.retention_bytes

        def over(segment: LogSegment, following: LogSegment | None) -> bool:
            nonlocal remaining
            if remaining > 0 and segment.size <= remaining:
                remaining -= segment.size
                return True
            return False

        due += _deletable_prefix(log, over, due)
    return due
