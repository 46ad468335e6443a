"""Save and output modes of the sink, against Spark's Kafka sink and what PySpark allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from seglog.spark.source import OVERWRITE_REFUSED


def _count(spark: SparkSession, broker: BrokerProcess, topic: str) -> int:
    return (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )


def test_save_modes(spark: SparkSession, broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    df = spark.createDataFrame([("a",), ("b",)], "value string")

    def writer(mode: str | None) -> object:
        w = df.write.format("seglog").option("kafka.bootstrap.servers", broker.bootstrap)
        w = w.option("topic", topic)
        return w if mode is None else w.mode(mode)

    writer("append").save()  # type: ignore[attr-defined]
    assert _count(spark, broker, topic) == 2
    with pytest.raises(Exception) as refused:
        writer("overwrite").save()  # type: ignore[attr-defined]
    assert OVERWRITE_REFUSED in str(refused.value)
    assert str(refused.value).count("Save mode Overwrite not allowed for Kafka") == 1
    # PySpark refuses these for any Python data source before the source is asked; the
    # docs/spark.md quotes this message.
    for mode, name in ((None, "ErrorIfExists"), ("ignore", "Ignore")):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE") as info:
            writer(mode).save()  # type: ignore[attr-defined]
        assert f'cannot be written in the "{name}" mode' in str(info.value)
    assert _count(spark, broker, topic) == 2  # nothing was overwritten or appended


def test_streaming_update_mode_is_refused_by_pyspark(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    counts = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", "10")
        .load()
        .groupBy((F.col("value") % 3).alias("k"))
        .count()
        .selectExpr("cast(k as string) as key", "cast(count as string) as value")
    )
    query = (
        counts.writeStream.format("seglog")
        .outputMode("update")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    with pytest.raises(Exception, match="requirement failed: seglog does not support Update mode"):
        query.awaitTermination(60)
    query.stop()
