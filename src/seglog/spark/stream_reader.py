"""The streaming reader: ``spark.readStream.format("seglog")``.

Theory of operation
-------------------
An offset is Spark's Kafka form, ``{"topic": {"partition": next offset}}``,
so a checkpoint written by this source reads like one written by Spark's.
Spark drives the reader on the driver:

1. ``initialOffset()`` for a new query: ``startingOffsets`` (default
   ``latest``) for the partitions the subscription covers now. Spark calls it
   again whenever it needs the start of the first micro-batch (to plan it, to
   run it, and again after a restart until that batch is committed), so the
   answer must never change. Spark's Kafka source resolves ``latest`` once and
   writes it to ``sources/0/0`` in the checkpoint; a Python reader is never
   told where the checkpoint is, so here ``latest`` and ``earliest`` stay the
   sentinels -1 and -2 of Spark's JSON form (a timestamp with no match under
   the ``latest`` strategy too) and are resolved where a number is needed:
   ``latestOffset`` reads a ``latest`` partition's first micro-batch as empty
   (it ends where the log ends then), and ``partitions`` takes that batch's
   end as its start. The end is what Spark writes to the checkpoint's offsets
   log, so the first micro-batch is the same on every call and every restart,
   and the records after it are read by the next one. Timestamps and explicit
   offsets resolve to numbers that do not move as the log grows.
2. ``latestOffset(start, limit)`` before each micro-batch: the current log end
   offsets (or, under ``Trigger.AvailableNow``, the ones recorded by
   ``prepareForTriggerAvailableNow``), then admission control as in Spark's
   ``KafkaMicroBatchStream``:

   ========================  ==================================================
   limit                     end offset returned
   ========================  ==================================================
   ReadAllAvailable          the latest offsets (options are ignored, as Spark
                             requires)
   min rows not reached and  ``start`` itself: no batch yet
   maxTriggerDelay not over
   ReadMaxRows(n)            ``start`` + n offsets shared between partitions in
                             proportion to their backlog (never starving one)
   ========================  ==================================================

   Spark's ``CompositeReadLimit`` cannot cross the Python boundary, so the
   default limit is ``ReadMaxRows(maxOffsetsPerTrigger)`` (or
   ``ReadMinRows(minOffsetsPerTrigger)`` alone) and the minimum is applied
   from the options whenever the engine asks with a limit other than
   ``ReadAllAvailable``. Under AvailableNow the minimum is ignored so the
   query always finishes.
3. ``partitions(start, end)``: one range per partition, split by
   ``minPartitions``/``maxRecordsPerPartition``. The ranges are a pure
   function of ``start`` and ``end`` (and, for a partition new since
   ``start``, its earliest offset), so a replayed batch reads the same
   records. Offsets that went backwards or partitions that vanished are data
   loss (``failOnDataLoss``).
4. ``read(partition)`` in a task, ``commit(end)`` after the batch: with the
   ``commitOffsetsToGroup`` option (off by default) the offsets go to that
   consumer group, so lag tools see the pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from seglog.spark.batch_reader import RangePartition, read_range
from seglog.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    from_json_dict,
    plan_ranges,
    rate_limit,
    to_json_dict,
)
from seglog.spark.options import SourceOptions
from seglog.spark.transport import Transport, data_loss, open_transport, resolve_offsets
from seglog.spark.typed.read import TypedPlan

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["StreamReader", "admit"]


def admit(
    limit: ReadLimit,
    options: SourceOptions,
    start: PartitionOffsets,
    latest: PartitionOffsets,
    earliest_of_new: PartitionOffsets,
    *,
    min_rows_due: bool,
) -> PartitionOffsets:
    """The end offsets of the next micro-batch under ``limit`` (see the module docstring).

    ``min_rows_due`` says whether ``maxTriggerDelay`` has passed since the last
    batch, which lifts the minimum.
    """
    if isinstance(limit, ReadAllAvailable):
        return dict(latest)
    min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else options.min_offsets_per_trigger
    max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
    if min_rows is not None and not min_rows_due:
        backlog = sum(
            end - start.get(tp, earliest_of_new.get(tp, end)) for tp, end in latest.items()
        )
        if backlog < min_rows:
            return dict(start)
    if max_rows is not None:
        return rate_limit(max_rows, start, latest, earliest_of_new)
    return dict(latest)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``DataSourceStreamReader`` with admission control and ``Trigger.AvailableNow``."""

    def __init__(
        self,
        options: SourceOptions,
        schema: StructType | None = None,
        typed: TypedPlan | None = None,
    ) -> None:
        self.options = options
        self.schema = schema
        self.typed = typed
        self._transport: Transport | None = None
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_trigger_ms = time.monotonic() * 1000

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a copy of the reader to call read(): no client travels with it.
        state = self.__dict__.copy()
        state["_transport"] = None
        return state

    @property
    def transport(self) -> Transport:
        """The driver-side transport, opened on first use."""
        if self._transport is None:
            self._transport = open_transport(self.options)
        return self._transport

    # ----------------------------------------------------------------- offsets

    def initialOffset(self) -> dict[str, Any]:
        """``startingOffsets`` (default latest) for the partitions covered now, with
        ``latest``/``earliest`` left as the sentinels -1/-2 (see the module docstring)."""
        tps = self.transport.partitions(self.options.strategy)
        offsets = resolve_offsets(
            self.transport,
            self.options.starting,
            tps,
            starting=True,
            no_match_strategy=self.options.no_match_strategy,
            sentinels=True,
        )
        return to_json_dict(offsets)

    def _resolve_start(self, start: PartitionOffsets, end: PartitionOffsets) -> PartitionOffsets:
        """``start`` with its sentinels made numbers: -2 is the log start now, -1 is ``end``
        (the first micro-batch of a ``latest`` partition is empty)."""
        out = dict(start)
        earliest = [tp for tp, off in start.items() if off == EARLIEST]
        latest = [tp for tp, off in start.items() if off == LATEST]
        if earliest:
            out.update(self.transport.earliest_offsets(earliest))
        # A partition missing from `end` keeps -1: plan() reports it gone.
        out.update({tp: end[tp] for tp in latest if tp in end})
        return out

    def prepareForTriggerAvailableNow(self) -> None:
        """Record the latest offsets now: an AvailableNow query reads up to them and stops."""
        tps = self.transport.partitions(self.options.strategy)
        self._target = self.transport.latest_offsets(tps)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMinRows(minOffsetsPerTrigger)``."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch (``start`` itself when there is nothing to read)."""
        if self._target is not None:
            latest = dict(self._target)
        else:
            tps = self.transport.partitions(self.options.strategy)
            latest = self.transport.latest_offsets(tps)
        # The first micro-batch of a "latest" partition ends where it starts: at the log
        # end seen now (partitions() takes that end as the start, see the module docstring).
        begin = self._resolve_start(from_json_dict(start), latest)
        if self._target is not None:
            for tp, offset in begin.items():
                latest.setdefault(tp, offset)
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        earliest_of_new = self.transport.earliest_offsets(new) if new else {}
        now = time.monotonic() * 1000
        due = (
            self._target is not None
            or now - self._last_trigger_ms >= self.options.max_trigger_delay_ms
        )
        end = admit(limit, self.options, begin, latest, earliest_of_new, min_rows_due=due)
        if end != begin:
            self._last_trigger_ms = now
        return to_json_dict(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The log end offsets seen by the last ``latestOffset`` call, for query progress."""
        return None if self._latest is None else to_json_dict(self._latest)

    # ------------------------------------------------------------- partitions

    def plan(self, start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
        """The ranges of the micro-batch ``(start, end]``, with data-loss checks."""
        fail = self.options.fail_on_data_loss
        for tp in sorted(set(start) - set(end)):
            data_loss(f"{tp} is gone. Some data may have been missed", fail)
        new = [tp for tp in end if tp not in start]
        begin = dict(start)
        if new:
            earliest = self.transport.earliest_offsets(new)
            for tp in new:
                if earliest[tp] != 0:
                    data_loss(
                        f"Added partition {tp} starts from {earliest[tp]} instead of 0. "
                        "Some data may have been missed",
                        fail,
                    )
                begin[tp] = earliest[tp]
        ranges = []
        for tp in sorted(end):
            if end[tp] < begin[tp]:
                data_loss(
                    f"Partition {tp}'s offset was changed from {begin[tp]} to {end[tp]}, "
                    "some data may have been missed",
                    fail,
                )
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, begin[tp], end[tp]))
        return plan_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One input partition per planned range."""
        stop = from_json_dict(end)
        ranges = self.plan(self._resolve_start(from_json_dict(start), stop), stop)
        return [RangePartition(rng) for rng in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of one range (in a task)."""
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition.range, typed=self.typed)

    def commit(self, end: dict[str, Any]) -> None:
        """With ``commitOffsetsToGroup``, commit ``end`` to that group (Spark's checkpoint
        stays the source of truth; the group only lets lag tools see the pipeline).

        Spark calls this when it plans the batch after the one that ended at
        ``end``, so the group trails the query by one micro-batch.
        """
        if self.options.commit_group is not None:
            self.transport.commit(self.options.commit_group, from_json_dict(end))

    def stop(self) -> None:
        """Close the driver-side transport."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
