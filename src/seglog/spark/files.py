"""Files mode: a log directory's segments read straight from disk, read-only.

What is read, and how (the indexes, the tail of the active segment, lookups
by time, ``kafka.isolation.level=read_committed``), is the files topic source's
(:mod:`seglog.topic_source.files`); this module adds what only a Spark scan
of files does: a batch scan is planned by segments, one task per segment
(adjacent small segments packed together up to :data:`SCAN_TASK_BYTES`), so a
large partition is read in parallel.
"""

from __future__ import annotations

import itertools
import os

from seglog.spark.offsets import OffsetRange
from seglog.spark.transport import TopicTransport
from seglog.topic_source.files import FilesTopicSource

__all__ = ["SCAN_TASK_BYTES", "FilesTransport"]

SCAN_TASK_BYTES = 128 * 1024 * 1024
"""Segment bytes per batch task in files mode (Spark's default ``maxPartitionBytes``)."""


class FilesTransport(TopicTransport):
    """Offsets and records of the partitions of one log directory."""

    source: FilesTopicSource

    def __init__(self, path: str | os.PathLike[str], *, read_committed: bool = False) -> None:
        super().__init__(FilesTopicSource(path, read_committed=read_committed))

    def split_by_segments(
        self, rng: OffsetRange, max_bytes: int = SCAN_TASK_BYTES
    ) -> list[OffsetRange]:
        """``rng`` cut at segment boundaries into pieces of about ``max_bytes`` of segment
        files each, so that a large partition is read by many tasks at once.

        A piece is one segment or a run of adjacent small ones (as Spark packs
        small files up to ``spark.sql.files.maxPartitionBytes``); pieces follow
        segment bases, so each task opens only its own segments.
        """
        if rng.size <= 0:
            return []
        sizes = self.source.segment_sizes(
            rng.topic, rng.partition, rng.from_offset, rng.until_offset
        )
        cuts: list[int] = []
        pending = 0
        for base, size in sizes:
            if pending and pending + size > max_bytes:
                cuts.append(base)
                pending = 0
            pending += size
        bounds = [rng.from_offset, *(c for c in cuts if rng.from_offset < c < rng.until_offset)]
        bounds.append(rng.until_offset)
        return [
            OffsetRange(rng.topic, rng.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
