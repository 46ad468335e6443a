"""The batch reader: ``spark.read.format("seglog")``.

Planning runs on the driver inside :meth:`BatchReader.partitions`: the
subscription is resolved to partitions, ``startingOffsets``/``endingOffsets``
(or their timestamp forms) to numbers, and the ranges are split as Spark's
connector splits them. Option errors surface there, before any task runs.
Each task opens its own transport and reads one range. In files mode ranges
are first cut at segment boundaries (one task per segment, small ones packed).

Filter pushdown (PySpark's ``spark.sql.python.filterPushdown.enabled``, off
by default) narrows the scan before it is planned:

=========================================  =====================================
filter                                     effect
=========================================  =====================================
``partition = p``, ``partition IN (...)``  other partitions are not read
``offset`` ``=``, ``>``, ``>=``, ``<``,    the range of each partition is cut to
``<=``                                     the bounds (exact: Spark does not
                                           filter again)
``timestamp`` ``>``, ``>=``, ``=``         each range starts at the first offset
                                           whose timestamp is at or after the
                                           bound, found through the time indexes
                                           (files) or ListOffsets (network), so
                                           the segments before it are never
                                           opened; Spark still applies the filter
                                           to the rows read
``key = b``, ``key IN (...)``              files mode, when every topic read
                                           keeps key indexes
                                           (``key.index.enable``): each task
                                           reads only the records of those keys,
                                           found through the segments' key
                                           indexes (exact: Spark does not filter
                                           again); otherwise not pushed
=========================================  =====================================

PySpark raises ``DATA_SOURCE_PUSHDOWN_DISABLED`` for a reader that
implements ``pushFilters`` while pushdown is off, so ``reader()`` returns
:class:`FilteringBatchReader` only when PySpark builds it to push filters.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import FrameType
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from seglog.spark.files import FilesTransport
from seglog.spark.offsets import OffsetRange, TopicPartition, plan_ranges
from seglog.spark.options import SourceOptions
from seglog.spark.refusal import refusing
from seglog.spark.transport import open_transport, plan_inputs, resolve_offsets
from seglog.spark.typed.read import TypedBatches, TypedPlan

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["BatchReader", "FilteringBatchReader", "RangePartition", "ScanBounds"]


@dataclass(frozen=True)
class ScanBounds:
    """What pushed filters allow a batch scan to skip (None: no bound)."""

    partitions: frozenset[int] | None = None
    min_offset: int | None = None  # inclusive
    max_offset: int | None = None  # inclusive
    min_timestamp_ms: int | None = None
    keys: frozenset[bytes] | None = None  # files mode, indexed topics only

    def clip(self, ranges: Iterable[OffsetRange]) -> list[OffsetRange]:
        """``ranges`` without the partitions and offsets the bounds exclude."""
        out = []
        for rng in ranges:
            if self.partitions is not None and rng.partition not in self.partitions:
                continue
            lo = (
                rng.from_offset
                if self.min_offset is None
                else max(rng.from_offset, self.min_offset)
            )
            hi = (
                rng.until_offset
                if self.max_offset is None
                else min(rng.until_offset, self.max_offset + 1)
            )
            out.append(replace(rng, from_offset=lo, until_offset=max(lo, hi)))
        return out


def _millis(value: object) -> int | None:
    # PySpark hands timestamps over as datetimes (naive ones in local time, as
    # TimestampType.fromInternal makes them); .timestamp() reads both right.
    if isinstance(value, dt.datetime):
        return math.floor(value.timestamp() * 1000)
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class RangePartition(InputPartition):
    """One Spark task: an offset range of one topic-partition (only the records of ``keys``
    when the scan was pruned to them)."""

    def __init__(self, rng: OffsetRange, keys: frozenset[bytes] | None = None) -> None:
        super().__init__(rng)
        self.range = rng
        self.keys = keys


def read_range(
    options: SourceOptions,
    rng: OffsetRange,
    keys: frozenset[bytes] | None = None,
    typed: TypedPlan | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches, through a transport opened for the task;
    with ``typed``, its key/value columns decoded (:mod:`seglog.spark.typed.read`)."""
    batches = _read_range(options, rng, keys)
    if typed is None:
        return batches
    return TypedBatches(typed, options.include_headers)(batches)


def _read_range(
    options: SourceOptions, rng: OffsetRange, keys: frozenset[bytes] | None
) -> Iterator[pa.RecordBatch]:
    with open_transport(options) as transport:
        if keys is not None and isinstance(transport, FilesTransport):
            yield from transport.read_keys(
                rng, keys, options.include_headers, options.fail_on_data_loss
            )
            return
        yield from transport.read(rng, options.include_headers, options.fail_on_data_loss)


def plan_batch(options: SourceOptions, bounds: ScanBounds | None = None) -> list[OffsetRange]:
    """Resolve a batch query's bounds, narrow them by pushed filters and split them into
    ranges (driver side)."""
    bounds = bounds or ScanBounds()
    with open_transport(options) as transport:
        tps = transport.partitions(options.strategy)
        start = resolve_offsets(
            transport,
            options.starting,
            tps,
            starting=True,
            no_match_strategy=options.no_match_strategy,
        )
        end = resolve_offsets(transport, options.ending, tps, starting=False)
        if set(start) != set(end):
            raise ValueError(
                "different topic partitions for starting offsets "
                f"topics[{sorted(map(str, start))}] and ending offsets "
                f"topics[{sorted(map(str, end))}]"
            )
        _check_begins_before_ends(start, end)
        ranges = bounds.clip(plan_inputs(start, end))
        if bounds.min_timestamp_ms is not None:
            wanted = {r.topic_partition: bounds.min_timestamp_ms for r in ranges if r.size > 0}
            found = transport.offsets_for_times(wanted)
            ranges = [
                _start_at(r, found.get(r.topic_partition)) if r.size > 0 else r for r in ranges
            ]
        if isinstance(transport, FilesTransport) and bounds.keys is None:
            # A pruned scan reads a few records per partition: one task each suffices.
            ranges = [piece for r in ranges for piece in transport.split_by_segments(r)]
    return plan_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def _check_begins_before_ends(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> None:
    """Refuse a range that starts after it ends (a ``startingOffsets`` past the end of its
    partition), with Spark's message, rather than read nothing from it."""
    for tp in sorted(start):
        if start[tp] > end[tp]:
            raise ValueError(
                f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic "
                f"{tp.topic} partition {tp.partition}. You either provided an invalid "
                "fromOffset, or the Kafka topic has been damaged"
            )


def _start_at(rng: OffsetRange, first: int | None) -> OffsetRange:
    """``rng`` from ``first`` on (the first offset at or after a time; None: there is none)."""
    lo = rng.until_offset if first is None else min(max(rng.from_offset, first), rng.until_offset)
    return replace(rng, from_offset=lo)


class BatchReader(DataSourceReader):
    """``DataSourceReader`` over a broker or a log directory."""

    def __init__(
        self,
        options: SourceOptions,
        schema: StructType | None = None,
        typed: TypedPlan | None = None,
    ) -> None:
        self.options = options
        self.schema = schema
        self.typed = typed

    bounds = ScanBounds()

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per planned offset range; a refusal (Spark's message) is reported
        without the worker's traceback."""
        ranges = refusing(lambda: plan_batch(self.options, self.bounds))
        return [RangePartition(rng, self.bounds.keys) for rng in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's range (none for Spark's placeholder partition)."""
        if not isinstance(partition, RangePartition):
            return iter(())  # nothing to read: Spark plans one empty partition instead of none
        return read_range(self.options, partition.range, partition.keys, self.typed)


_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def building_for_pushdown() -> bool:
    """True when PySpark's filter-pushdown worker is building the reader (see the module
    docstring): ``reader()``'s caller is that worker's module."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _PUSHDOWN_WORKER:
            return True
        frame = frame.f_back
    return False


class FilteringBatchReader(BatchReader):
    """:class:`BatchReader` that narrows its scan by pushed filters."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Take the filters the scan can use (module docstring); return those Spark must
        still apply: every timestamp filter, and every filter not understood."""
        bounds = self.bounds
        remaining = []
        prunable: bool | None = None  # asked of the files once, at the first key filter
        for f in filters:
            attribute: tuple[str, ...] = getattr(f, "attribute", ())
            column = attribute[0] if len(attribute) == 1 else None
            narrowed = None
            if column == "partition":
                narrowed = _partition_bounds(bounds, f)
            elif column == "offset":
                narrowed = _offset_bounds(bounds, f)
            elif column == "timestamp":
                bounds = _timestamp_bounds(bounds, f)
            elif column == "key" and self.options.typed.key_format == "binary":
                # A typed key's filters compare decoded values, not the bytes the index holds.
                if prunable is None:
                    prunable = refusing(lambda: _keys_indexed(self.options))
                if prunable:
                    narrowed = _key_bounds(bounds, f)
            if narrowed is None:
                remaining.append(f)
            else:
                bounds = narrowed
        self.bounds = bounds
        return remaining


def _partition_bounds(bounds: ScanBounds, f: Filter) -> ScanBounds | None:
    if isinstance(f, EqualTo) and _int(f.value) is not None:
        wanted = frozenset({f.value})
    elif isinstance(f, In) and all(_int(v) is not None for v in f.value):
        wanted = frozenset(f.value)
    else:
        return None
    current = bounds.partitions
    return replace(bounds, partitions=wanted if current is None else current & wanted)


def _offset_bounds(bounds: ScanBounds, f: Filter) -> ScanBounds | None:
    value = _int(getattr(f, "value", None))
    if value is None:
        return None
    lo, hi = None, None
    if isinstance(f, EqualTo):
        lo, hi = value, value
    elif isinstance(f, GreaterThan):
        lo = value + 1
    elif isinstance(f, GreaterThanOrEqual):
        lo = value
    elif isinstance(f, LessThan):
        hi = value - 1
    elif isinstance(f, LessThanOrEqual):
        hi = value
    else:
        return None
    if lo is not None and (bounds.min_offset is None or lo > bounds.min_offset):
        bounds = replace(bounds, min_offset=lo)
    if hi is not None and (bounds.max_offset is None or hi < bounds.max_offset):
        bounds = replace(bounds, max_offset=hi)
    return bounds


def _keys_indexed(options: SourceOptions) -> bool:
    """Whether a scan by ``options`` can be pruned to keys: files mode, and every topic it
    reads keeps key indexes (an unindexed topic would be scanned whole by every task)."""
    if options.path is None:
        return False
    with open_transport(options) as transport:
        assert isinstance(transport, FilesTransport)
        return transport.keeps_key_indexes(transport.partitions(options.strategy))


def _key_value(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None


def _key_bounds(bounds: ScanBounds, f: Filter) -> ScanBounds | None:
    if isinstance(f, EqualTo):
        values: list[object] = [f.value]
    elif isinstance(f, In):
        values = list(f.value)
    else:
        return None
    keys = [_key_value(v) for v in values]
    wanted = frozenset(k for k in keys if k is not None)
    if not keys or len(wanted) < len(set(keys)):
        return None  # a null or a value of another type: Spark decides
    current = bounds.keys
    return replace(bounds, keys=wanted if current is None else current & wanted)


def _timestamp_bounds(bounds: ScanBounds, f: Filter) -> ScanBounds:
    if isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo):
        ms = _millis(f.value)
        if ms is not None and (bounds.min_timestamp_ms is None or ms > bounds.min_timestamp_ms):
            return replace(bounds, min_timestamp_ms=ms)
    return bounds
