"""Refusals surface where Spark's Kafka source raises them, as one line with Spark's text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrameReader, SparkSession

from seglog.spark.source import CUSTOM_SCHEMA_REFUSED


def _refusal(action: Callable[[], Any]) -> str:
    with pytest.raises(Exception) as info:
        action()
    message = str(info.value)
    assert "Traceback" not in message, message
    return message


def _read(spark: SparkSession) -> DataFrameReader:
    return spark.read.format("seglog").option("kafka.bootstrap.servers", "127.0.0.1:1")


def test_options_wrong_for_any_read_fail_at_load(spark: SparkSession) -> None:
    both = _read(spark).option("subscribe", "a").option("assign", '{"a":[0]}')
    assert (
        "Only one of the following options can be specified for Kafka source: assign, "
        "subscribe, subscribePattern. See the docs for more details."
    ) in _refusal(both.load)
    no_servers = spark.read.format("seglog").option("subscribe", "a")
    assert "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer" in (
        _refusal(no_servers.load)
    )
    refused = _read(spark).option("subscribe", "a").option("kafka.enable.auto.commit", "true")
    assert "Kafka option 'enable.auto.commit' is not supported" in _refusal(refused.load)
    stream = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "a")
        .option("minPartitions", "0")
    )
    assert "minPartitions must be positive" in _refusal(stream.load)


def test_batch_refusals_and_a_custom_schema_fail_before_any_task(spark: SparkSession) -> None:
    spark.sparkContext.setJobGroup("refused", "refused reads")
    try:
        latest = _read(spark).option("subscribe", "a").option("startingOffsets", "latest").load()
        assert "starting offset can't be latest for batch queries on Kafka" in _refusal(
            latest.collect
        )
        custom = _read(spark).schema("value string").option("subscribe", "a").load()
        assert CUSTOM_SCHEMA_REFUSED in _refusal(custom.collect)
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("refused") == []
    finally:
        spark.sparkContext.setJobGroup("", "")


def test_stream_refusals_name_the_cause(spark: SparkSession, tmp_path: Path) -> None:
    for i, (reader, expected) in enumerate(
        (
            (
                spark.readStream.format("seglog").option("endingOffsets", "latest"),
                "ending offset not valid in streaming queries",
            ),
            (spark.readStream.format("seglog").schema("value string"), CUSTOM_SCHEMA_REFUSED),
        )
    ):
        query = (
            reader.option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("subscribe", "a")
            .load()
            .writeStream.format("console")
            .option("checkpointLocation", str(tmp_path / str(i)))
            .start()
        )
        try:
            assert expected in _refusal(lambda q=query: q.awaitTermination(60))  # type: ignore[misc]
        finally:
            query.stop()
