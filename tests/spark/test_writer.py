"""Writes, batch and streaming, read back through the source; errors before any task runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession


def _read_back(spark: SparkSession, broker: BrokerProcess, topic: str) -> DataFrame:
    return (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )


def test_batch_write_then_read_back(spark: SparkSession, broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    rows = [
        (
            f"k{i}" if i % 3 else None,
            f"value {i}",
            i % 2,
            [("h", f"{i}".encode())] if i % 4 else None,
        )
        for i in range(50)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value string, partition int, "
        "headers array<struct<key: string, value: binary>>",
    )
    (
        df.write.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    back = _read_back(spark, broker, topic).collect()
    got = sorted(
        (
            r["value"],
            r["key"],
            r["partition"],
            [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else None,
        )
        for r in back
    )
    expected = sorted(
        (v.encode(), k.encode() if k else None, p, [(hk, bytes(hv)) for hk, hv in h] if h else None)
        for k, v, p, h in rows
    )
    assert got == expected


def test_stream_write_between_topics(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink)
    produced = produce(
        broker.bootstrap,
        source,
        [
            {"key": f"k{i}".encode(), "value": f"{i}".encode(), "partition": i % 2}
            for i in range(60)
        ],
    )
    query = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value", f"'{sink}' as topic")
        .writeStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = sorted((r["value"], r["key"]) for r in _read_back(spark, broker, sink).collect())
    assert got == sorted((p.value.upper(), p.key) for p in produced if p.value)


def test_bad_writes_fail_before_any_task(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    no_value = spark.createDataFrame([("k",)], "key string")
    bad_key = spark.createDataFrame([(1, "v")], "key int, value string")
    spark.sparkContext.setJobGroup("bad-writes", "bad writes")
    try:
        writer = no_value.write.format("seglog").mode("append")
        with pytest.raises(Exception, match="Required attribute 'value' not found"):
            writer.option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save()
        with pytest.raises(Exception, match="topic option required"):
            bad_key.selectExpr("value").write.format("seglog").mode("append").option(
                "kafka.bootstrap.servers", broker.bootstrap
            ).save()
        with pytest.raises(Exception, match="Key attribute type must be a StringType or Binary"):
            bad_key.write.format("seglog").mode("append").option(
                "kafka.bootstrap.servers", broker.bootstrap
            ).option("topic", topic).save()
        with pytest.raises(Exception, match="must be specified for configuring Kafka producer"):
            bad_key.selectExpr("value").write.format("seglog").mode("append").option(
                "topic", topic
            ).save()
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("bad-writes") == []
    finally:
        spark.sparkContext.setJobGroup("", "")


def test_broker_errors_fail_the_task_with_a_clear_message(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    df = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match=r"Writing to Kafka failed: .*\[7\]"):
        (
            df.write.format("seglog")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("kafka.message.timeout.ms", "3000")
            .mode("append")
            .save()
        )
