"""The interface of a topic source, and the values it hands out.

A :class:`TopicSource` answers what a reader of a cluster asks before and
while it reads, the same way whether the answers come from a log directory's
files (:mod:`seglog.topic_source.files`) or from a broker over the Kafka
protocol (:mod:`seglog.topic_source.broker`):

=====================================  ==========================================
question                               method
=====================================  ==========================================
which partitions and topics exist      :meth:`~TopicSource.partitions`,
                                       :meth:`~TopicSource.topics`
where a partition starts and ends      :meth:`~TopicSource.bounds`,
                                       :meth:`~TopicSource.earliest_offsets`,
                                       :meth:`~TopicSource.latest_offsets`
the first offset at or after a time    :meth:`~TopicSource.offsets_for_times`
the records of an offset range         :meth:`~TopicSource.read` (chunks),
                                       :meth:`~TopicSource.records` (records)
what consumer groups have committed    :meth:`~TopicSource.committed`
=====================================  ==========================================

The isolation level is a setting of the source, fixed when it is opened, as
it is a setting of a Kafka consumer: a read_committed source ends each
partition at its last stable offset (the first offset of the oldest
transaction still open), and its reads leave out the records of aborted
transactions. Control batches (transaction markers) are never records at any
level: their offsets are gaps, like the offsets compaction removed.

A read yields *chunks*, so that a reader that turns records into columns
(Spark) never builds a Python object per record: a :class:`StoredBatch` is a
v2 record batch as the files hold it (the reader decodes it, or asks it for
:class:`~seglog.records.record.Record` objects), and :class:`Rows` are records
already decoded into columns (a broker's fetch, a legacy message set). Both
can give :class:`~seglog.records.record.Record` objects, which is what
:meth:`TopicSource.records` yields.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import NamedTuple, Self

from seglog._typing import BytesLike
from seglog.errors import SeglogError
from seglog.records import batch
from seglog.records import record as record_codec
from seglog.records.record import Header, Record

__all__ = [
    "Chunk",
    "HeaderPairs",
    "LostCallback",
    "Rows",
    "StoredBatch",
    "TopicInfo",
    "TopicPartition",
    "TopicSource",
    "UnknownPartitionError",
    "clip",
]


class TopicPartition(NamedTuple):
    """A topic and a partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its partition count and its topic-level config overrides."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class UnknownPartitionError(SeglogError, ValueError):
    """A partition the source does not have (a ValueError too: an argument was wrong)."""

    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


HeaderPairs = list[tuple[str, bytes | None]]
"""A record's headers as (key, value) pairs, as Kafka clients hand them out."""

LostCallback = Callable[[str], None]
"""Told, in words, about offsets a read was asked for that the partition no longer holds
(or does not hold yet); it raises to stop the read or returns to go on without them."""


class StoredBatch(NamedTuple):
    """A v2 record batch as stored (``buffer[position:]`` starts with its header), and
    the range ``[start, until)`` the read was cut to.

    The first and the last batch of a read may hold records outside the
    range; they are not part of the read, and :meth:`records` leaves them out.
    """

    buffer: BytesLike
    position: int
    header: batch.BatchHeader
    start: int
    until: int

    def records(self) -> list[Record]:
        """The batch's records with offsets in ``[start, until)``."""
        decoded = record_codec.decode_records(self.buffer, self.position)
        if self.start <= self.header.base_offset and self.header.last_offset < self.until:
            return decoded
        return [r for r in decoded if self.start <= r.offset < self.until]


@dataclass(slots=True)
class Rows:
    """Decoded records as columns, in offset order, all inside the range a read asked for.

    ``headers`` holds None for a record without headers, and is left empty by
    a read that was told not to collect them.
    """

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[HeaderPairs | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def add_records(self, records: Iterable[Record], timestamp_type: int) -> None:
        """Append decoded records (all of one timestamp type) with their headers."""
        for rec in records:
            self.offsets.append(rec.offset)
            self.timestamps.append(rec.timestamp)
            self.timestamp_types.append(timestamp_type)
            self.keys.append(rec.key)
            self.values.append(rec.value)
            self.headers.append([(h.key, h.value) for h in rec.headers] or None)

    def records(self) -> list[Record]:
        """The rows as :class:`~seglog.records.record.Record` objects."""
        headers: Iterable[HeaderPairs | None] = self.headers or [None] * len(self.offsets)
        return [
            Record(
                offset,
                timestamp,
                key,
                value,
                tuple(Header(k, v) for k, v in pairs) if pairs else (),
            )
            for offset, timestamp, key, value, pairs in zip(
                self.offsets, self.timestamps, self.keys, self.values, headers, strict=True
            )
        ]


Chunk = StoredBatch | Rows
"""What a read yields: a stored v2 batch, or rows already decoded."""


def clip(
    tp: TopicPartition,
    start: int,
    until: int,
    earliest: int,
    latest: int,
    lost: LostCallback | None,
) -> tuple[int, int]:
    """``[start, until)`` cut to ``[earliest, latest)``, ``lost`` told about each cut."""
    if start < earliest:
        if lost is not None:
            lost(
                f"Cannot fetch offset {start} of {tp}: the earliest available offset is {earliest}"
            )
        start = earliest
    if until > latest:
        if lost is not None:
            lost(
                f"Cannot fetch offsets up to {until} of {tp}: the latest available offset is "
                f"{latest}"
            )
        until = latest
    return start, until


class TopicSource(ABC):
    """The partitions, offsets, records and committed group offsets of one cluster's
    topics; see the module docstring. ``description`` names the source in messages."""

    description: str

    # ----------------------------------------------------------------- layout

    @abstractmethod
    def partitions(self) -> list[TopicPartition]:
        """Every partition the source has now, internal topics' included, sorted."""

    @abstractmethod
    def topics(self) -> dict[str, TopicInfo]:
        """Every topic but the internal ones (as Kafka's ``listTopics`` answers by default),
        with its partition count and its config overrides, by name."""

    # ---------------------------------------------------------------- offsets

    @abstractmethod
    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, end) of a partition; the end is the last stable offset for a
        read_committed source, else the log end offset (high watermark)."""

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return {tp: self.bounds(*tp)[0] for tp in tps}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end of each partition (see :meth:`bounds`)."""
        return {tp: self.bounds(*tp)[1] for tp in tps}

    @abstractmethod
    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is at or after the given one (ms), or
        None where no record is."""

    # ---------------------------------------------------------------- records

    @abstractmethod
    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        until: int,
        *,
        headers: bool = True,
        lost: LostCallback | None = None,
    ) -> Iterator[Chunk]:
        """The records of ``[start, until)`` in offset order, as chunks.

        The range is first cut to the partition's bounds; ``lost`` (if given)
        is told about each part cut off, and about data that vanished while it
        was read (retention). Without ``headers`` :class:`Rows` carry none.
        """

    def records(self, topic: str, partition: int, start: int, until: int) -> Iterator[Record]:
        """The records of ``[start, until)``, in order, as Record objects."""
        for chunk in self.read(topic, partition, start, until):
            yield from chunk.records()

    # ----------------------------------------------------------------- groups

    @abstractmethod
    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The committed offsets of the groups whose whole id matches, by (topic, partition)."""

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the clients and files the source holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
