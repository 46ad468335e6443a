"""Lag figures with Spark's names, from a real query's progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from seglog.spark import offsets_behind_latest


def test_offsets_behind_latest_as_spark_computes_them() -> None:
    progress = {
        "sources": [
            {
                "endOffset": '{"t":{"0":10,"1":4}}',
                "latestOffset": {"t": {"0": 16, "1": 4}},
                "metrics": {},
            }
        ]
    }
    assert offsets_behind_latest(progress) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "3.0",
    }
    assert offsets_behind_latest({"sources": [{"endOffset": None, "latestOffset": None}]}) == {}


def test_lag_of_a_rate_limited_query(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"x", "partition": i % 2} for i in range(100)])
    query = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    first = next(p for p in query.recentProgress if p["numInputRows"])
    # 30 of 100 offsets read, 15 from each partition: 35 behind in each.
    assert offsets_behind_latest(first) == {
        "minOffsetsBehindLatest": "35",
        "maxOffsetsBehindLatest": "35",
        "avgOffsetsBehindLatest": "35.0",
    }
    assert offsets_behind_latest(query.lastProgress)["maxOffsetsBehindLatest"] == "0"
