"""The PySpark data source ``format("seglog")``: Spark's Kafka source and sink in Python.

``register(spark)`` makes the format available in a session; ``local_session()``
starts a local session set up the way the data source needs (this project's
interpreter for the workers, a loopback address) and registers it.

Requires the ``spark`` extra (pyspark, pyarrow) and Java 17+.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from seglog.spark.monitoring import offsets_behind_latest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session", "offsets_behind_latest", "register"]


def _worker_environment() -> None:
    # Workers run whatever python3 is first on PATH unless told; a local run
    # binds to the machine's outward address unless told.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def register(spark: SparkSession) -> None:
    """Register the ``seglog`` format with ``spark``."""
    _worker_environment()
    from seglog.spark.source import SeglogDataSource

    spark.dataSource.register(SeglogDataSource)


def local_session(master: str = "local[*]", app_name: str = "seglog", **conf: str) -> SparkSession:
    """A local SparkSession with the worker environment set and ``seglog`` registered.

    ``conf`` entries are Spark settings with dots written as underscores
    (``spark_sql_shuffle_partitions="4"``), or pass them via the builder yourself.
    """
    _worker_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key.replace("_", "."), value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
