"""Lag figures of a streaming query, as Spark's Kafka source reports them.

Spark's source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` in ``lastProgress["sources"][0]["metrics"]``: per
partition, the latest offset seen when the micro-batch was planned minus the
offset the batch read up to. PySpark's Python stream reader API has no hook for
source metrics (its ``metrics`` stay ``{}``), but the same two offsets are in
the progress: ``endOffset`` and ``latestOffset`` (which the reader reports
through ``reportLatestOffset``). :func:`offsets_behind_latest` computes the
figures from them, with Spark's names and string values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["offsets_behind_latest"]


def _offsets(value: Any) -> dict[tuple[str, str], int]:
    if value is None:
        return {}
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        return {}
    return {
        (topic, str(partition)): int(offset)
        for topic, parts in data.items()
        if isinstance(parts, Mapping)
        for partition, offset in parts.items()
    }


def offsets_behind_latest(progress: Mapping[str, Any], source: int = 0) -> dict[str, str]:
    """Spark's Kafka lag metrics for one source of a query progress (``query.lastProgress``).

    Empty when the progress has no latest offsets yet (as Spark's are).
    """
    sources = progress.get("sources") or []
    if source >= len(sources):
        return {}
    entry = sources[source]
    latest = _offsets(entry.get("latestOffset"))
    consumed = _offsets(entry.get("endOffset"))
    # A "latest" start not yet planned is a sentinel (-1/-2), not an offset.
    behind = [end - consumed[tp] for tp, end in latest.items() if consumed.get(tp, -1) >= 0]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }
