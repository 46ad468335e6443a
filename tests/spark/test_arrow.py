"""Arrow batches from record batches: columns, nulls, timestamp types, control batches."""

from __future__ import annotations

import datetime as dt

from seglog import SimpleRecord, build_batch
from seglog.records import batch
from seglog.records.compression import Codec
from seglog.spark.arrow import ColumnBuilder
from seglog.spark.schema import arrow_schema

TS = 1_700_000_000_000


def test_v2_batch_columns_and_range_filter() -> None:
    data = build_batch(
        [
            SimpleRecord(value=b"a", key=b"k", timestamp=TS, headers=[("x", b"1"), ("y", None)]),
            SimpleRecord(value=None, key=None, timestamp=TS + 1),
            SimpleRecord(value=b"c" * 300, key=b"", timestamp=TS - 5),
        ],
        base_offset=100,
        codec=Codec.ZSTD,
    )
    builder = ColumnBuilder("t", 3, include_headers=True)
    builder.add_v2_batch(data, 0, batch.read_header(data, 0), 100, 103)
    rb = builder.build()
    assert rb.schema.equals(arrow_schema(True))
    assert len(builder) == 0
    rows = rb.to_pylist()
    assert [r["offset"] for r in rows] == [100, 101, 102]
    assert [(r["key"], r["value"]) for r in rows] == [(b"k", b"a"), (None, None), (b"", b"c" * 300)]
    assert rows[0]["headers"] == [{"key": "x", "value": b"1"}, {"key": "y", "value": None}]
    assert rows[1]["headers"] is None  # Spark gives null, not [], for no headers
    assert rows[2]["timestamp"] == dt.datetime.fromtimestamp((TS - 5) / 1000, dt.UTC)
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {("t", 3, 0)}

    builder.add_v2_batch(data, 0, batch.read_header(data, 0), 101, 102)
    assert builder.build().column("offset").to_pylist() == [101]


def test_log_append_time_and_control_batches() -> None:
    data = build_batch(
        [SimpleRecord(value=b"a", timestamp=TS), SimpleRecord(value=b"b", timestamp=TS + 9)],
        timestamp_type=batch.LOG_APPEND_TIME,
        max_timestamp=TS + 1000,
    )
    builder = ColumnBuilder("t", 0, include_headers=False)
    builder.add_v2_batch(data, 0, batch.read_header(data, 0), 0, 10)
    rows = builder.build().to_pylist()
    assert {r["timestampType"] for r in rows} == {1}
    assert {r["timestamp"].timestamp() * 1000 for r in rows} == {TS + 1000}

    control = build_batch([SimpleRecord(value=b"\0\0\0\0", key=b"\0\0\0\0")], is_control=True)
    builder.add_v2_batch(control, 0, batch.read_header(control, 0), 0, 10)
    assert len(builder) == 0
    assert builder.build().num_rows == 0
