"""The seam between Spark's readers and where records come from: a broker or a log directory.

A :class:`Transport` answers four questions, the ones Spark's Kafka source
asks a cluster: which partitions a subscription covers, the earliest and
latest offset of each, the first offset at or after a timestamp, and the
records of one offset range (as Arrow batches). :class:`TopicTransport`
answers them from a :class:`~seglog.topic_source.TopicSource`, which owns
the reading itself (files or broker, isolation levels); what is Spark's is
here: the subscription strategies, the Arrow batches, and ``failOnDataLoss``
with Spark's words. :mod:`seglog.spark.network` and :mod:`seglog.spark.files`
open the two kinds of source from Spark's options and add what only their
mode has (group commits, scans split by segment). Readers resolve
``startingOffsets``/``endingOffsets`` specs into numbers with
:func:`resolve_offsets`, the same way for both.

Transports are opened where they are used (on the driver to plan, in each
task to read) from the picklable :class:`~seglog.spark.options.SourceOptions`;
a transport itself never crosses a process boundary.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Self

import pyarrow as pa  # type: ignore[import-untyped]

from seglog.errors import SeglogError
from seglog.spark.arrow import ColumnBuilder
from seglog.spark.offsets import EARLIEST, LATEST, OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Strategy,
    select_partitions,
)
from seglog.topic_source import Rows, TopicSource

__all__ = [
    "BATCH_ROWS",
    "DataLossError",
    "TopicTransport",
    "Transport",
    "data_loss",
    "open_transport",
    "resolve_offsets",
]

BATCH_ROWS = 65_536
"""Rows per Arrow batch handed to Spark (whole source batches are never split)."""

INSTRUCTION_FAIL_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "false".'
)
INSTRUCTION_FAIL_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".'
)


class DataLossError(SeglogError):
    """Offsets a query needs are gone (retention, truncation, a deleted topic or partition)."""

    kafka_error = "OFFSET_OUT_OF_RANGE"


def data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError` with Spark's advice, or return when data loss is tolerated."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {INSTRUCTION_FAIL_TRUE}")


class Transport(ABC):
    """Offsets and records of topic-partitions; see the module docstring."""

    @abstractmethod
    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions ``strategy`` covers now, sorted."""

    @abstractmethod
    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The log start offset of each partition."""

    @abstractmethod
    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The log end offset (high watermark) of each partition."""

    @abstractmethod
    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is at or after the given one (ms), or None."""

    @abstractmethod
    def read(
        self, rng: OffsetRange, include_headers: bool, fail_on_data_loss: bool
    ) -> Iterator[pa.RecordBatch]:
        """The records of ``rng`` in offset order, as batches of the Spark Kafka schema."""

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offsets to read) to the consumer group ``group``."""
        raise NotImplementedError(f"{type(self).__name__} cannot commit offsets to a group")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and files."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class TopicTransport(Transport):
    """A transport over a :class:`~seglog.topic_source.TopicSource`: Spark's questions
    asked of it, its chunks turned into Arrow batches of :data:`BATCH_ROWS` rows or so."""

    def __init__(self, source: TopicSource) -> None:
        self.source = source

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions of the source that ``strategy`` covers."""
        return select_partitions(strategy, self.source.partitions())

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The source's log start offsets."""
        return self.source.earliest_offsets(tps)

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The source's ends (the last stable offsets when it reads read_committed)."""
        return self.source.latest_offsets(tps)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The source's lookups by time."""
        return self.source.offsets_for_times(timestamps)

    def read(
        self, rng: OffsetRange, include_headers: bool, fail_on_data_loss: bool
    ) -> Iterator[pa.RecordBatch]:
        """The source's chunks of ``rng`` as Arrow batches; offsets it no longer holds are
        data loss."""

        def lost(message: str) -> None:
            data_loss(message, fail_on_data_loss)

        builder = ColumnBuilder(rng.topic, rng.partition, include_headers)
        chunks = self.source.read(
            *rng.topic_partition,
            rng.from_offset,
            rng.until_offset,
            headers=include_headers,
            lost=lost,
        )
        for chunk in chunks:
            if isinstance(chunk, Rows):
                builder.add_rows(chunk)
            else:
                builder.add_v2_batch(
                    chunk.buffer, chunk.position, chunk.header, chunk.start, chunk.until
                )
            if len(builder) >= BATCH_ROWS:
                yield builder.build()
        if len(builder):
            yield builder.build()

    def close(self) -> None:
        """Close the source."""
        self.source.close()


def open_transport(options: SourceOptions) -> Transport:
    """The transport ``options`` ask for: files mode with a ``path``, else the network."""
    if options.path is not None:
        from seglog.spark.files import FilesTransport

        read_committed = options.kafka_params.get("isolation.level") == "read_committed"
        return FilesTransport(options.path, read_committed=read_committed)
    from seglog.spark.network import NetworkTransport

    return NetworkTransport(options)


def _check_partitions(
    tps: list[TopicPartition], given: Mapping[TopicPartition, int], option: str
) -> None:
    if set(tps) != set(given):
        raise ValueError(
            f"If {option} contains specific offsets, you must specify all TopicPartitions.\n"
            "Use -1 for latest, -2 for earliest.\n"
            f"Specified: {sorted(map(str, given))} Assigned: {sorted(map(str, tps))}"
        )


def resolve_offsets(
    transport: Transport,
    spec: OffsetSpec,
    tps: list[TopicPartition],
    *,
    starting: bool,
    no_match_strategy: str = "error",
    sentinels: bool = False,
) -> PartitionOffsets:
    """Offsets for ``tps`` from an unresolved spec, as Spark's ``KafkaOffsetReader`` does.

    Sentinels in JSON become real offsets; a timestamp with no record at or
    after it gives the latest offset for an ending bound, and for a starting
    bound an error or the latest offset by ``startingOffsetsByTimestampStrategy``.

    With ``sentinels``, earliest and latest stay -2 and -1 instead of being
    looked up (a streaming query's start, which must not move as the log grows).
    """
    if isinstance(spec, Earliest):
        return dict.fromkeys(tps, EARLIEST) if sentinels else transport.earliest_offsets(tps)
    if isinstance(spec, Latest):
        return dict.fromkeys(tps, LATEST) if sentinels else transport.latest_offsets(tps)
    option = "startingOffsets" if starting else "endingOffsets"
    if isinstance(spec, SpecificOffsets):
        _check_partitions(tps, spec.offsets, option)
        out = dict(spec.offsets)
        if sentinels:
            return out
        earliest = [tp for tp, off in out.items() if off == EARLIEST]
        latest = [tp for tp, off in out.items() if off == LATEST]
        if earliest:
            out.update(transport.earliest_offsets(earliest))
        if latest:
            out.update(transport.latest_offsets(latest))
        return out
    if isinstance(spec, GlobalTimestamp):
        wanted = dict.fromkeys(tps, spec.timestamp)
    else:
        assert isinstance(spec, SpecificTimestamps)
        _check_partitions(tps, spec.timestamps, option + "ByTimestamp")
        wanted = dict(spec.timestamps)
    found = transport.offsets_for_times(wanted)
    missing = [tp for tp in tps if found.get(tp) is None]
    if missing and starting and no_match_strategy == "error":
        tp = missing[0]
        raise ValueError(
            f"No offset matched from request of topic-partition {tp} and timestamp {wanted[tp]}."
        )
    if sentinels:
        latest_for_missing = dict.fromkeys(missing, LATEST)
    else:
        latest_for_missing = transport.latest_offsets(missing) if missing else {}
    out = {}
    for tp in tps:
        offset = found.get(tp)
        out[tp] = latest_for_missing[tp] if offset is None else offset
    return out


def plan_inputs(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One unsplit range per partition present at both ends, in partition order."""
    return [
        OffsetRange(tp.topic, tp.partition, start[tp], end[tp]) for tp in sorted(end) if tp in start
    ]
