"""The ``DataSource`` named ``seglog``: schema and factories, nothing else.

Options are parsed in the factories, which Spark calls on the driver, so a
bad option fails the query before any task runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from seglog.spark.batch_reader import BatchReader
from seglog.spark.options import parse_source_options, parse_write_options
from seglog.spark.schema import spark_schema
from seglog.spark.stream_reader import StreamReader
from seglog.spark.writer import BatchWriter, StreamWriter

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["OVERWRITE_REFUSED", "SeglogDataSource"]

OVERWRITE_REFUSED = (
    "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
    "ErrorIfExists (default). (PySpark passes only Append to a Python data source: use "
    '.mode("append").)'
)
"""Spark's refusal of Overwrite (``_LEGACY_ERROR_TEMP_3081``), and what to do in PySpark."""


class SeglogDataSource(DataSource):
    """``format("seglog")``: Spark's Kafka source and sink over a broker or a log directory."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "seglog"

    def schema(self) -> StructType:
        """Spark's Kafka row schema, with ``headers`` when ``includeHeaders`` is true."""
        include = {k.lower(): str(v) for k, v in self.options.items()}.get("includeheaders", "")
        return spark_schema(include.strip().lower() == "true")

    def reader(self, schema: StructType) -> BatchReader:
        """A batch reader; options are validated as for a batch query."""
        return BatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> StreamReader:
        """A streaming reader; options are validated as for a streaming query."""
        return StreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        """A batch writer; options and columns are validated here.

        Spark's Kafka sink allows Append and ErrorIfExists and refuses Overwrite and
        Ignore. PySpark itself refuses ErrorIfExists and Ignore for every Python data
        source before this is called, so Append is the one mode that reaches here and
        Overwrite is refused with Spark's message.
        """
        if overwrite:
            raise ValueError(OVERWRITE_REFUSED)
        return BatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        """A streaming writer; options and columns are validated here."""
        return StreamWriter(parse_write_options(self.options), schema)
