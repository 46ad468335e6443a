"""Registers ``format("seglog")`` in every SparkSession, with no import and no ``register()``.

PySpark 4.x, at a session's first data-source call, imports each top-level
module whose name starts with ``pyspark_`` and registers its ``DefaultSource``
under the name that class gives (``pyspark/sql/worker/lookup_data_sources.py``).
This module is that hook for seglog's data source, ``seglog.spark.source``.
"""

from __future__ import annotations

try:
    from seglog.spark.source import SeglogDataSource as DefaultSource
except ImportError:  # pragma: no cover - seglog installed without its "spark" extra
    # Without pyarrow there is no data source to offer; PySpark skips a module with no
    # DefaultSource rather than failing every other source's lookup.
    pass
else:
    __all__ = ["DefaultSource"]
