"""Offsets as Spark's Kafka source writes them, and the planning of offset ranges into tasks.

JSON forms (Spark's ``JsonUtils``)::

    partition offsets     {"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}
                          (-2 = earliest, -1 = latest; the streaming checkpoint uses the
                          same form with real offsets only)
    partition timestamps  {"topicA": {"0": 1700000000000}}
    assign                {"topicA": [0, 1], "topicB": [0]}

A range is ``[from_offset, until_offset)`` of one topic-partition. The planner
reproduces Spark's ``KafkaOffsetRangeCalculator``: without ``minPartitions``
and ``maxRecordsPerPartition`` one task per non-empty range; with
``maxRecordsPerPartition`` every range is first cut into
``ceil(size / maxRecords)`` equal parts; then, if there are still fewer ranges
than ``minPartitions``, ranges whose share of the total would round to one
part stay whole and the rest are cut in proportion to their size.

Everything here is pure: no I/O, no Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The topic source owns the type; Spark's modules keep importing it from here.
from seglog.topic_source.base import TopicPartition as TopicPartition

EARLIEST = -2
"""The JSON sentinel for the earliest offset of a partition."""
LATEST = -1
"""The JSON sentinel for the latest offset of a partition."""

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = (
    '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'
)
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_MAX_LONG = 2**63 - 1


PartitionOffsets = dict[TopicPartition, int]
"""Offsets (or timestamps) by topic-partition."""


def _load(text: str, example: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_nested(text: str, example: str) -> PartitionOffsets:
    data = _load(text, example)
    if not isinstance(data, dict):
        raise ValueError(f"Expected e.g. {example}, got {text}")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {example}, got {text}")
        for partition, value in parts.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(f"Expected e.g. {example}, got {text}") from None
            if not _is_int(value):
                raise ValueError(f"Expected e.g. {example}, got {text}")
            out[TopicPartition(topic, number)] = value
    return out


def parse_partition_offsets(text: str) -> PartitionOffsets:
    """``{"topic": {"0": 42}}`` → {TopicPartition: offset}; -2/-1 stay as sentinels."""
    return _parse_nested(text, _OFFSETS_EXAMPLE)


def parse_partition_timestamps(text: str) -> PartitionOffsets:
    """``{"topic": {"0": 1700000000000}}`` → {TopicPartition: timestamp in ms}."""
    return _parse_nested(text, _TIMESTAMPS_EXAMPLE)


def parse_assign(text: str) -> list[TopicPartition]:
    """``{"topic": [0, 1]}`` → the topic-partitions to assign."""
    data = _load(text, _ASSIGN_EXAMPLE)
    if not isinstance(data, dict):
        raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
    out: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(_is_int(p) for p in parts):
            raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        out.extend(TopicPartition(topic, p) for p in parts)
    return out


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The streaming offset form ``{"topic": {"partition": offset}}``, sorted for stable JSON."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json_dict(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The inverse of :func:`to_json_dict` (also accepts what Spark read back from a checkpoint)."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, parts in data.items()
        for partition, offset in parts.items()
    }


def format_partition_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """Offsets as Spark's JSON string."""
    return json.dumps(to_json_dict(offsets), separators=(",", ":"))


# ------------------------------------------------------------------- planning


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        """The range's topic-partition."""
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets in the range (an estimate of records: compaction leaves gaps)."""
        return self.until_offset - self.from_offset


def _java_round(value: float) -> int:
    # Java's Math.round: half up, not half to even.
    return math.floor(value + 0.5)


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(_java_round(size / total * min_parts), 1)


def _divide(parts: int, rng: OffsetRange) -> list[OffsetRange]:
    """Cut ``rng`` into ``parts`` near-equal ranges; the last takes the rounding."""
    remaining = rng.size
    start = rng.from_offset
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, rng.until_offset)
        if end > start:
            out.append(OffsetRange(rng.topic, rng.partition, start, end))
        start = end
    return out


def plan_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: empty ranges dropped, large ones split."""
    offset_ranges = [r for r in ranges if r.size > 0]
    if (
        min_partitions is None or len(offset_ranges) >= min_partitions
    ) and max_records_per_partition is None:
        return offset_ranges
    if max_records_per_partition is not None:
        divided = [
            piece
            for r in offset_ranges
            for piece in _divide(math.ceil(r.size / max_records_per_partition), r)
        ]
    else:
        divided = offset_ranges
    if min_partitions is None or min_partitions <= len(divided):
        return divided
    total = sum(r.size for r in divided)
    unsplit = [r for r in divided if _part_count(r.size, total, min_partitions) == 1]
    unsplit_total = sum(r.size for r in unsplit)
    split_total = total - unsplit_total
    unsplit_tps = {r.topic_partition for r in unsplit}
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in divided:
        parts = (
            1 if r.topic_partition in unsplit_tps else _part_count(r.size, split_total, split_min)
        )
        out.extend(_divide(parts, r))
    return out


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    until: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Spark's ``rateLimit``: share ``limit`` offsets between partitions by their backlog.

    Partitions absent from ``start`` (new ones) begin at ``earliest_of_new``.
    A partition's share is rounded down, but never to zero, so a small
    partition is not starved.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in until.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    out: PartitionOffsets = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        share = limit * (sizes[tp] / total)
        share_long = math.ceil(share) if share < 1 else math.floor(share)
        off = _MAX_LONG if share_long > _MAX_LONG - begin else begin + share_long
        out[tp] = min(end, off)
    return out
