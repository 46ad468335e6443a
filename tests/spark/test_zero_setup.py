"""``format("seglog")`` after ``pip install`` alone: no import, no ``register()``, no
``PYSPARK_PYTHON``, in every session (``newSession()`` included)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]

# A user's script: nothing of seglog is imported in the driver.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .getOrCreate())
    for session in (spark, spark.newSession()):
        df = (session.read.format("seglog").option("kafka.bootstrap.servers", "127.0.0.1:1")
              .option("subscribe", "t").load())
        print(",".join(df.columns))
    assert "seglog" not in sys.modules, "the driver imported seglog"
    spark.stop()
    """
)


def test_the_distribution_ships_the_pyspark_module() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    find = config["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(where=str(ROOT / find["where"][0]), include=find["include"])
    assert {"pyspark_seglog", "seglog", "seglog.spark", "seglog.storage"} <= set(packages)

    from pyspark.sql.datasource import DataSource

    import pyspark_seglog

    assert issubclass(pyspark_seglog.DefaultSource, DataSource)
    assert pyspark_seglog.DefaultSource.name() == "seglog"


def test_format_seglog_works_in_any_session_with_no_setup(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    # An activated environment: its interpreter is the python3 first on the path, which
    # is what Spark starts its workers with when PYSPARK_PYTHON is unset.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # (a script, not a symlink: a venv's interpreter finds its pyvenv.cfg by the path it
    # was started with)
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    columns = "key,value,topic,partition,offset,timestamp,timestampType"
    assert result.stdout.split() == [columns, columns]


# A job run as `.venv/bin/python job.py`, the environment not activated: the python3 first
# on the path is another interpreter.
NOT_ACTIVATED = {
    "import first": textwrap.dedent(
        """
        import sys
        import seglog.spark
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        print(spark.read.format("seglog").option("subscribe", "orders").load(sys.argv[1]).count())
        spark.stop()
        """
    ),
    "register after": textwrap.dedent(
        """
        import sys
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        import seglog.spark
        seglog.spark.register(spark)
        print(spark.read.format("seglog").option("subscribe", "orders").load(sys.argv[1]).count())
        spark.stop()
        """
    ),
}


@pytest.mark.parametrize("script", NOT_ACTIVATED.values(), ids=NOT_ACTIVATED.keys())
def test_a_job_run_with_the_environments_python_without_activating_it(
    tmp_path: Path, script: str
) -> None:
    from seglog import LogDir, SimpleRecord, build_batch

    data = tmp_path / "data"
    with LogDir.open(data) as logs:
        logs.create_topic("orders", partitions=1)
        logs.append("orders", 0, build_batch([SimpleRecord(value=b"v")] * 3))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    # The python3 on the path: an interpreter without this environment's packages
    # (no pyarrow, no seglog data source), as the system's python3 is.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    other = bindir / "python3"
    other.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    other.chmod(0o755)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    result = subprocess.run(
        [sys.executable, "-c", script, str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["3"]
