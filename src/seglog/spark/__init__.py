"""The PySpark data source ``format("seglog")``: Spark's Kafka source and sink in Python.

``register(spark)`` makes the format available in a session; ``local_session()``
starts a local session set up the way the data source needs (this project's
interpreter for the workers, a loopback address) and registers it.

Which Python the workers run
----------------------------
Spark starts its Python workers (the one that finds data sources, the ones
that plan and read) with ``PYSPARK_PYTHON``, else with the ``python3`` first
on the path, which is not this interpreter when a job is run as
``.venv/bin/python job.py`` without activating the environment; such a worker
cannot import seglog (``DATA_SOURCE_NOT_FOUND``). PySpark reads
``PYSPARK_PYTHON`` when a session's context starts, so importing this package
before that sets it to this interpreter when it is unset (in a driver that
starts its own JVM; under ``spark-submit`` the interpreters are the
submitter's choice), and :func:`register` points an already running local
context's workers at this interpreter.

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


# What PySpark's context runs its workers with when PYSPARK_PYTHON was unset at its start.
_PYSPARK_DEFAULT_PYTHON = "python3"


def _default_worker_python() -> None:
    """Set ``PYSPARK_PYTHON`` to this interpreter when unset, in a driver that starts its own
    JVM (see the module docstring)."""
    chosen = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT")
    if not any(name in os.environ for name in chosen):
        os.environ["PYSPARK_PYTHON"] = sys.executable


_default_worker_python()


def _local_workers_run_this_python(spark: SparkSession) -> None:
    """Point a local context that started without ``PYSPARK_PYTHON`` at this interpreter.

    PySpark fixed the workers' interpreter (``SparkContext.pythonExec``) when
    the context started, to the ``python3`` on the path when nothing was set;
    the data source's functions are registered with it. On a local master the
    workers are this machine, where this interpreter is the one with seglog
    (and the one PySpark wants: a worker must run the driver's Python version).
    """
    from pyspark.errors import PySparkNotImplementedError

    try:
        context = spark.sparkContext
    except PySparkNotImplementedError:  # Spark Connect: the server chooses its workers' Python
        return
    if (
        context.pythonExec == _PYSPARK_DEFAULT_PYTHON
        and context.getConf().get("spark.pyspark.python") is None
        and (context.master or "").startswith("local")
    ):
        context.pythonExec = sys.executable


def register(spark: SparkSession) -> None:
    """Register the ``seglog`` format with ``spark`` (and, on a local master started without
    ``PYSPARK_PYTHON``, have its workers run this interpreter)."""
    _local_workers_run_this_python(spark)
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
