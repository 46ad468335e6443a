"""The row schema: Spark's Kafka schema, and the Arrow schema Spark derives from it."""

from __future__ import annotations

import pytest

from seglog.spark.schema import arrow_schema, spark_schema

pytest.importorskip("pyspark")

from pyspark.sql.pandas.types import to_arrow_schema


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_is_exactly_sparks(headers: bool) -> None:
    expected = to_arrow_schema(spark_schema(headers), timezone="UTC")
    assert arrow_schema(headers).equals(expected, check_metadata=True)
    assert str(arrow_schema(headers).field("timestamp").type) == "timestamp[us, tz=UTC]"


def test_spark_schema_matches_kafka_source() -> None:
    assert spark_schema(True).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert all(f.nullable for f in spark_schema(True).fields)
    assert [f.name for f in spark_schema(False).fields][-1] == "timestampType"
