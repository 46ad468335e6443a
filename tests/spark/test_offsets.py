"""Offsets JSON and the range planner: pure, no Spark."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.spark.offsets import (
    OffsetRange,
    TopicPartition,
    format_partition_offsets,
    from_json_dict,
    parse_assign,
    parse_partition_offsets,
    parse_partition_timestamps,
    plan_ranges,
    rate_limit,
    to_json_dict,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_partition_offsets_json() -> None:
    parsed = parse_partition_offsets('{"a":{"0":23,"1":-1},"b":{"0":-2}}')
    assert parsed == {A0: 23, A1: -1, B0: -2}
    assert format_partition_offsets(parsed) == '{"a":{"0":23,"1":-1},"b":{"0":-2}}'
    assert from_json_dict(to_json_dict(parsed)) == parsed


@pytest.mark.parametrize("bad", ["", "[1]", '{"a": 3}', '{"a": {"x": 1}}', '{"a": {"0": "1"}}'])
def test_partition_offsets_errors(bad: str) -> None:
    with pytest.raises(ValueError, match=r"Expected e\.g\. \{\"topicA\":\{\"0\":23"):
        parse_partition_offsets(bad)


def test_timestamps_and_assign_json() -> None:
    assert parse_partition_timestamps('{"a": {"1": 1700000000000}}') == {A1: 1_700_000_000_000}
    assert parse_assign('{"a": [0, 1], "b": [0]}') == [A0, A1, B0]
    with pytest.raises(ValueError, match=r"Expected e\.g\. \{\"topicA\":\[0,1\]"):
        parse_assign('{"a": 0}')


def test_topic_partition_prints_like_kafka() -> None:
    assert str(TopicPartition("orders", 3)) == "orders-3"


def r(tp: TopicPartition, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp.topic, tp.partition, start, end)


def test_one_task_per_non_empty_range() -> None:
    ranges = [r(A0, 0, 10), r(A1, 5, 5), r(B0, 3, 2)]
    assert plan_ranges(ranges) == [r(A0, 0, 10)]
    assert plan_ranges(ranges, min_partitions=1) == [r(A0, 0, 10)]


def test_min_partitions_splits_in_proportion() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite: minPartitions 3 over 1 + 2 + 7 offsets.
    ranges = [r(A0, 1, 2), r(A1, 1, 3), r(B0, 1, 8)]
    assert plan_ranges(ranges, min_partitions=3) == ranges
    # 4 parts: the small ranges stay whole, the large one takes the other two.
    assert plan_ranges(ranges, min_partitions=4) == [
        r(A0, 1, 2),
        r(A1, 1, 3),
        r(B0, 1, 4),
        r(B0, 4, 8),
    ]


def test_min_partitions_on_one_range() -> None:
    assert plan_ranges([r(A0, 0, 10)], min_partitions=3) == [
        r(A0, 0, 3),
        r(A0, 3, 6),
        r(A0, 6, 10),
    ]


def test_max_records_per_partition() -> None:
    assert plan_ranges([r(A0, 0, 10), r(A1, 0, 4)], max_records_per_partition=4) == [
        r(A0, 0, 3),
        r(A0, 3, 6),
        r(A0, 6, 10),
        r(A1, 0, 4),
    ]


@given(
    sizes=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    min_partitions=st.none() | st.integers(1, 64),
    max_records=st.none() | st.integers(1, 5_000),
)
def test_planning_covers_every_offset_once(
    sizes: list[int], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [r(TopicPartition("t", i), 100, 100 + size) for i, size in enumerate(sizes)]
    planned = plan_ranges(ranges, min_partitions, max_records)
    for i, size in enumerate(sizes):
        pieces = [p for p in planned if p.partition == i]
        assert sum(p.size for p in pieces) == size
        assert all(p.size > 0 for p in pieces)
        assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(pieces))
        if max_records is not None:
            assert all(p.size <= max_records for p in pieces)
    # Ranges are only ever split, never merged or dropped while non-empty.
    assert len(planned) >= sum(1 for s in sizes if s)


def test_rate_limit_shares_by_backlog() -> None:
    start = {A0: 0, A1: 100}
    until = {A0: 1000, A1: 110, B0: 50}
    limited = rate_limit(100, start, until, {B0: 0})
    # backlogs 1000, 10, 50 of 1060: shares 94.3 → 94, 0.94 → 1 (never starved), 4.7 → 4
    assert limited == {A0: 94, A1: 101, B0: 4}
    assert rate_limit(100, {A0: 5}, {A0: 5}, {}) == {A0: 5}
    assert rate_limit(10**6, start, until, {B0: 0}) == until
