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
    assert "headers" not in SeglogDataSource({}).schema().fieldNames()
    read = {"kafka.bootstrap.servers": "x:1", "subscribe": "a", "includeheaders": "TRUE"}
    assert "headers" in SeglogDataSource(read).schema().fieldNames()


def test_register_sets_the_worker_environment(spark: SparkSession) -> None:
    seglog.spark.register(spark)  # registering twice is harmless
    assert os.environ["PYSPARK_PYTHON"]
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert seglog.spark.local_session() is spark  # getOrCreate: the running session
