"""The row schema of Spark's Kafka source, as a Spark ``StructType`` and as a pyarrow schema.

Spark declares (``KafkaRecordToRowConverter``)::

    key            binary     nullable
    value          binary     nullable
    topic          string     nullable
    partition      int        nullable
    offset         long       nullable
    timestamp      timestamp  nullable
    timestampType  int        nullable     -1 none, 0 CreateTime, 1 LogAppendTime
    headers        array<struct<key: string, value: binary>>   only with includeHeaders;
                   null (not empty) for a record without headers

Every field is nullable because Spark builds them with ``StructField``'s
default. A Python data source that yields Arrow batches must match the schema
Spark derives from the ``StructType`` exactly (``to_arrow_schema`` with UTC:
``timestamp[us, tz=UTC]``, list items named ``element``); the test suite pins
that equality.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "ARROW_HEADERS_TYPE",
    "arrow_schema",
    "arrow_write_value_types",
    "spark_schema",
]

ARROW_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_HEADERS_TYPE = pa.list_(pa.field("element", ARROW_HEADER_STRUCT))
"""The Arrow type of the ``headers`` column."""
ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", ARROW_TIMESTAMP),
    pa.field("timestampType", pa.int32()),
]
_ARROW = pa.schema(_BASE_FIELDS)
_ARROW_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", ARROW_HEADERS_TYPE)])


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The pyarrow schema of the rows, equal to Spark's Arrow form of :func:`spark_schema`."""
    return _ARROW_WITH_HEADERS if include_headers else _ARROW


def spark_schema(include_headers: bool) -> StructType:
    """The Spark schema of the rows of Spark's Kafka source."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_write_value_types() -> dict[str, tuple[str, ...]]:
    """Spark type names each write column accepts (Spark's ``KafkaWriter`` rules)."""
    return {
        "value": ("string", "binary"),
        "key": ("string", "binary"),
        "topic": ("string",),
        "partition": ("int",),
        "headers": ("array<struct<key:string,value:binary>>",),
    }
