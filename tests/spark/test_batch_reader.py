"""Batch reads through Spark over the network and from files, against a real broker."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import Produced, create_topic, produce

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession

BASE_TS = 1_700_000_000_000


def _records(n: int, partitions: int = 1) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append(
            {
                "key": None if i % 7 == 3 else f"k{i}".encode(),
                "value": None if i % 11 == 5 else f"value-{i}".encode() * (1 + i % 3),
                "partition": i % partitions,
                "timestamp": BASE_TS + i * 10,
                "headers": [("h", f"{i}".encode()), ("n", None)] if i % 4 == 0 else None,
            }
        )
    return out


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            r["timestamp"],
            r["timestampType"],
            [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] is not None else None,
            r["topic"],
        )
        for r in df.collect()
    )


def _expected(topic: str, produced: list[Produced]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            p.partition,
            p.offset,
            p.key,
            p.value,
            dt.datetime.fromtimestamp(p.timestamp / 1000, dt.UTC).replace(tzinfo=None),
            0,
            p.headers or None,
            topic,
        )
        for p in produced
    )


def _read(spark: SparkSession, broker: BrokerProcess, topic: str, **options: str) -> DataFrame:
    reader = spark.read.format("seglog").option("kafka.bootstrap.servers", broker.bootstrap)
    reader = reader.option("subscribe", topic).option("includeHeaders", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_read_returns_exactly_the_produced_rows(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    produced = produce(broker.bootstrap, topic, _records(300, partitions=3))
    df = _read(spark, broker, topic)
    assert _rows(df) == _expected(topic, produced)
    # Files mode reads the broker's own directory, while it runs, and agrees.
    files = (
        spark.read.format("seglog")
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load(str(broker.data))
    )
    assert _rows(files) == _rows(df)


def test_ranges_by_offset_and_by_timestamp(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    produced = produce(broker.bootstrap, topic, _records(200, partitions=2))
    by_offset = _read(
        spark,
        broker,
        topic,
        startingOffsets=f'{{"{topic}":{{"0":10,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":20,"1":-1}}}}',
    )
    expected = [p for p in produced if (p.partition == 1 or 10 <= p.offset < 20)]
    assert _rows(by_offset) == _expected(topic, expected)

    # Record i has timestamp BASE_TS + 10 i: [i=50, i=150) by time, in both partitions.
    by_time = _read(
        spark,
        broker,
        topic,
        startingTimestamp=str(BASE_TS + 500),
        endingOffsetsByTimestamp=f'{{"{topic}":{{"0":{BASE_TS + 1500},"1":{BASE_TS + 1500}}}}}',
    )
    expected = [p for p in produced if BASE_TS + 500 <= p.timestamp < BASE_TS + 1500]
    assert _rows(by_time) == _expected(topic, expected)
    files = (
        spark.read.format("seglog")
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingTimestamp", str(BASE_TS + 500))
        .option("endingTimestamp", str(BASE_TS + 1500))
        .load(str(broker.data))
    )
    assert _rows(files) == _rows(by_time)


def test_min_partitions_and_max_records_split_the_ranges(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=1)
    produced = produce(broker.bootstrap, topic, _records(100))
    split = _read(spark, broker, topic, minPartitions="4")
    assert split.rdd.getNumPartitions() == 4
    assert _rows(split) == _expected(topic, produced)
    capped = _read(spark, broker, topic, maxRecordsPerPartition="30")
    assert capped.rdd.getNumPartitions() == 4  # ceil(100 / 30)
    assert _rows(capped) == _expected(topic, produced)


def test_bad_options_fail_before_any_task(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    spark.sparkContext.setJobGroup("bad-options", "bad options")
    try:
        with pytest.raises(Exception, match="starting offset can't be latest"):
            _read(spark, broker, topic, startingOffsets="latest").collect()
        with pytest.raises(Exception, match="you must specify all TopicPartitions"):
            _read(spark, broker, topic, startingOffsets='{"other":{"0":1}}').collect()
        with pytest.raises(Exception, match="must be specified for Kafka source"):
            spark.read.format("seglog").option("kafka.bootstrap.servers", "x:1").load().collect()
        tracker = spark.sparkContext.statusTracker()
        assert tracker.getJobIdsForGroup("bad-options") == []
    finally:
        spark.sparkContext.setJobGroup("", "")


def test_timestamps_without_headers_and_empty_topic(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    empty = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
    )
    assert empty.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    assert empty.count() == 0
