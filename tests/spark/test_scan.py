"""Files mode as a scan engine: tasks by segment, filters pushed down and used to prune."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import confluent_kafka as ck
import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

from seglog.spark.batch_reader import FilteringBatchReader, RangePartition
from seglog.spark.files import FilesTransport
from seglog.spark.offsets import OffsetRange
from seglog.spark.options import parse_source_options
from seglog.storage import reader as storage

T0 = 1_700_000_000_000


@pytest.fixture
def timed_topic(broker: BrokerProcess, topic: str) -> str:
    """Two partitions of 2,000 records each, a second apart, over many 64 KiB segments."""
    create_topic(broker.bootstrap, topic, partitions=2)
    # Batches well under the broker's 64 KiB segments.
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 16384})
    for i in range(2000):
        for p in (0, 1):
            producer.produce(topic, b"x" * 100, partition=p, timestamp=T0 + i * 1000)
        producer.poll(0)
    assert producer.flush(30) == 0
    return topic


def _ranges(broker: BrokerProcess, topic: str, *filters: object) -> list[OffsetRange]:
    options = parse_source_options({"subscribe": topic, "path": str(broker.data)}, streaming=False)
    reader = FilteringBatchReader(options)
    remaining = list(reader.pushFilters(list(filters)))  # type: ignore[arg-type]
    assert all(f.attribute == ("timestamp",) for f in remaining)  # type: ignore[attr-defined]
    parts = reader.partitions()
    return [p.range for p in parts if isinstance(p, RangePartition)]


def test_one_task_per_segment(broker: BrokerProcess, timed_topic: str) -> None:
    transport = FilesTransport(broker.data)
    bases = storage.segment_bases(broker.data / f"{timed_topic}-0")
    assert len(bases) > 3
    pieces = transport.split_by_segments(OffsetRange(timed_topic, 0, 0, 2000), max_bytes=1)
    assert [p.from_offset for p in pieces] == bases
    assert [p.until_offset for p in pieces] == [*bases[1:], 2000]
    # Small segments are packed up to the task size: here all of them in one task.
    assert len(_ranges(broker, timed_topic)) == 2


def test_filters_prune_partitions_offsets_and_segments(
    broker: BrokerProcess, timed_topic: str
) -> None:
    only_1 = _ranges(broker, timed_topic, EqualTo(("partition",), 1))
    assert [(r.partition, r.from_offset, r.until_offset) for r in only_1] == [(1, 0, 2000)]
    window = _ranges(
        broker,
        timed_topic,
        In(("partition",), (0,)),
        GreaterThanOrEqual(("offset",), 100),
        LessThan(("offset",), 250),
    )
    assert [(r.partition, r.from_offset, r.until_offset) for r in window] == [(0, 100, 250)]
    # The last 1% of the time: the scan starts at the first record that recent.
    since = dt.datetime.fromtimestamp((T0 + 1980 * 1000) / 1000)  # naive local, as PySpark gives
    recent = _ranges(broker, timed_topic, GreaterThanOrEqual(("timestamp",), since))
    assert [(r.partition, r.from_offset, r.until_offset) for r in recent] == [
        (0, 1980, 2000),
        (1, 1980, 2000),
    ]


@pytest.fixture
def pushdown(spark: SparkSession) -> Iterator[None]:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_filtered_scan_returns_what_a_full_scan_does(
    spark: SparkSession, broker: BrokerProcess, timed_topic: str, pushdown: None
) -> None:
    df = spark.read.format("seglog").option("subscribe", timed_topic).load(str(broker.data))
    since = dt.datetime.fromtimestamp((T0 + 1500 * 1000) / 1000, tz=dt.UTC)
    query = f"partition = 1 AND offset < 1900 AND timestamp >= '{since.isoformat()}'"
    got = sorted(r["offset"] for r in df.where(query).select("offset").collect())
    assert got == list(range(1500, 1900))
