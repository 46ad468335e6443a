"""Refusals surface where Spark's Kafka source raises them, as one line with Spark's text."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrameReader, SparkSession

from seglog import LogDir, SimpleRecord, build_batch
from seglog.spark.source import CUSTOM_SCHEMA_REFUSED
from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic


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


def test_a_read_without_a_subscription_fails_at_load(spark: SparkSession) -> None:
    expected = (
        "One of the following options must be specified for Kafka source: assign, subscribe, "
        "subscribePattern. See the docs for more details."
    )
    assert expected in _refusal(_read(spark).load)
    stream = spark.readStream.format("seglog").option("kafka.bootstrap.servers", "127.0.0.1:1")
    assert expected in _refusal(stream.load)


def test_batch_refusals_and_a_custom_schema_fail_before_any_task(
    spark: SparkSession, tmp_path: Path
) -> None:
    spark.sparkContext.setJobGroup("refused", "refused reads")
    try:
        latest = _read(spark).option("subscribe", "a").option("startingOffsets", "latest").load()
        assert "starting offset can't be latest for batch queries on Kafka" in _refusal(
            latest.collect
        )
        custom = _read(spark).schema("value string").option("subscribe", "a").load()
        assert CUSTOM_SCHEMA_REFUSED in _refusal(custom.collect)
        with LogDir.open(tmp_path) as logs:
            logs.create_topic("orders", partitions=1)
            logs.append("orders", 0, build_batch([SimpleRecord(value=b"v")] * 3))
        past_the_end = (
            spark.read.format("seglog")
            .option("subscribe", "orders")
            .option("startingOffsets", '{"orders":{"0":10}}')
            .load(str(tmp_path))
        )
        assert (
            "Beginning offset 10 is after the ending offset 3 for topic orders partition 0. "
            "You either provided an invalid fromOffset, or the Kafka topic has been damaged"
        ) in _refusal(past_the_end.collect)
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


def test_a_job_with_java_only_options_runs(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    java_only = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.security.providers": "com.example.ProviderCreator",
        "kafka.ssl.provider": "SunJSSE",
    }
    (
        spark.createDataFrame([("k", "v")], "key string, value string")
        .write.format("seglog")
        .options(**java_only)
        .option("kafka.key.deserializer", "org.apache.kafka.common.serialization.X")
        .option("topic", topic)
        .mode("append")
        .save()
    )
    rows = (
        spark.read.format("seglog")
        .options(**java_only)
        .option("kafka.partition.assignment.strategy", "com.example.MyAssignor")
        .option("subscribe", topic)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .collect()
    )
    assert [r.value for r in rows] == ["v"]


def test_a_read_from_a_broker_that_is_down_names_the_cause(spark: SparkSession) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    down = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", address)
        .option("kafka.request.timeout.ms", "1500")
        .option("subscribe", "orders")
        .load()
    )
    message = _refusal(down.collect)
    assert "within 1.5 s" in message, message
    assert f"Connect to ipv4#{address} failed: Connection refused" in message, message
