"""The batch reader: ``spark.read.format("seglog")``.

Planning runs on the driver inside :meth:`BatchReader.partitions`: the
subscription is resolved to partitions, ``startingOffsets``/``endingOffsets``
(or their timestamp forms) to numbers, and the ranges are split as Spark's
connector splits them. Option errors surface there, before any task runs.
Each task opens its own transport and reads one range.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, InputPartition

from seglog.spark.offsets import OffsetRange, plan_ranges
from seglog.spark.options import SourceOptions
from seglog.spark.transport import open_transport, plan_inputs, resolve_offsets

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["BatchReader", "RangePartition"]


class RangePartition(InputPartition):
    """One Spark task: an offset range of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


def read_range(options: SourceOptions, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches, through a transport opened for the task."""
    with open_transport(options) as transport:
        yield from transport.read(rng, options.include_headers, options.fail_on_data_loss)


def plan_batch(options: SourceOptions) -> list[OffsetRange]:
    """Resolve a batch query's bounds and split them into ranges (driver side)."""
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
            f"different topic partitions for starting offsets topics[{sorted(map(str, start))}] "
            f"and ending offsets topics[{sorted(map(str, end))}]"
        )
    return plan_ranges(
        plan_inputs(start, end), options.min_partitions, options.max_records_per_partition
    )


class BatchReader(DataSourceReader):
    """``DataSourceReader`` over a broker or a log directory."""

    def __init__(self, options: SourceOptions, schema: StructType | None = None) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per planned offset range."""
        return [RangePartition(rng) for rng in plan_batch(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's range (none for Spark's placeholder partition)."""
        if not isinstance(partition, RangePartition):
            return iter(())  # nothing to read: Spark plans one empty partition instead of none
        return read_range(self.options, partition.range)
