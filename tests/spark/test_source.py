"""The data source class and its registration."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

import seglog.spark
from seglog.spark.source import SeglogDataSource


def test_name_and_schema_follow_include_headers() -> None:
    assert SeglogDataSource.name() == "seglog"
    read = {"kafka.bootstrap.servers": "x:1", "subscribe": "a"}
    assert "headers" not in SeglogDataSource(read).schema().fieldNames()
    with_headers = {**read, "includeheaders": "TRUE"}
    assert "headers" in SeglogDataSource(with_headers).schema().fieldNames()
    # schema() is asked for a read only, so a read's options are checked there.
    with pytest.raises(ValueError, match="One of the following options must be specified"):
        SeglogDataSource({"kafka.bootstrap.servers": "x:1"}).schema()


def test_register_sets_the_worker_environment(spark: SparkSession) -> None:
    seglog.spark.register(spark)  # registering twice is harmless
    assert os.environ["PYSPARK_PYTHON"]
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert seglog.spark.local_session() is spark  # getOrCreate: the running session
