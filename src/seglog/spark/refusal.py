"""Refusals as one line: a ValueError with Spark's message, reported without a traceback.

PySpark reports an exception a data source raises in its worker with the
worker's traceback; a refusal (options Spark would refuse, a range Spark would
refuse) or one of seglog's own errors (a cluster that cannot be reached, data
lost) is a message for the user, who should read it alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from seglog.errors import SeglogError

__all__ = ["refusing"]

T = TypeVar("T")


def _in_spark_worker() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec is not None and str(spec.name).startswith("pyspark.")


def refusing(check: Callable[[], T]) -> T:
    """Run ``check``; a ValueError (a refusal with Spark's message) or a SeglogError leaves
    the PySpark worker without its traceback, so the user reads the message alone."""
    try:
        return check()
    except (ValueError, SeglogError):
        if _in_spark_worker():
            # The worker reports this exception and exits; PySpark reads this at reporting.
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
        raise
