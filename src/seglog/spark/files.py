"""Files mode: a log directory's segments read straight from disk, read-only.

What is read, and how (the indexes, the tail of the active segment, lookups
by time, ``kafka.isolation.level=read_committed``), is the files topic source's
(:mod:`seglog.topic_source.files`); this module adds what only a Spark scan
of files does: a batch scan is planned by segments, one task per segment
(adjacent small segments packed together up to :data:`SCAN_TASK_BYTES`), so a
large partition is read in parallel; and a scan pruned to some keys reads
only their records, through the segments' key indexes (:meth:`FilesTransport.read_keys`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection, Iterable, Iterator

import pyarrow as pa  # type: ignore[import-untyped]

from seglog.spark.arrow import ColumnBuilder
from seglog.spark.offsets import OffsetRange, TopicPartition
from seglog.spark.transport import BATCH_ROWS, TopicTransport, data_loss
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

    def keeps_key_indexes(self, tps: Iterable[TopicPartition]) -> bool:
        """Whether every topic of ``tps`` keeps key indexes (and there is one)."""
        topics = {tp.topic for tp in tps}
        return bool(topics) and all(self.source.keeps_key_index(t) for t in topics)

    def read_keys(
        self,
        rng: OffsetRange,
        keys: Collection[bytes],
        include_headers: bool,
        fail_on_data_loss: bool,
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``rng`` whose key is one of ``keys``, through the key indexes, as
        Arrow batches: the rows :meth:`read` gives for them, in the same order."""

        def lost(message: str) -> None:
            data_loss(message, fail_on_data_loss)

        builder = ColumnBuilder(rng.topic, rng.partition, include_headers)
        for rows in self.source.read_keys(
            rng.topic,
            rng.partition,
            rng.from_offset,
            rng.until_offset,
            keys,
            headers=include_headers,
            lost=lost,
        ):
            builder.add_rows(rows)
            if len(builder) >= BATCH_ROWS:
                yield builder.build()
        if len(builder):
            yield builder.build()
