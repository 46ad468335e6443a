"""The ``DataSource`` named ``seglog``: schema and factories, nothing else.

Where errors surface
--------------------
Spark's Kafka source checks its options at ``load()`` (and a stream's at
``start()``) with one-line messages. PySpark builds a Python data source at
``load()`` without saying whether it is for a read or a write, or for a batch
or a stream; given a user's ``.schema(...)`` it runs nothing of the source at
``load()`` and later builds it without calling ``schema()``. So:

* at ``load()``, options that can only be a read's (a subscription, a path,
  offsets, ...) are checked; what is wrong for both a batch and a stream
  fails there, with Spark's message. ``schema()`` runs only for a read (a
  write hands PySpark the DataFrame's schema, so PySpark does not ask), so
  there every read option is checked, a missing subscription included;
* nothing PySpark hands a data source at ``load()`` tells a batch from a
  stream (the same options, the same worker, the same calls), so what is
  wrong for one kind only (``startingOffsets=latest`` in a batch,
  ``endingOffsets`` in a stream) cannot fail there;
* ``reader()`` (batch, at planning on the driver, before any task) and
  ``streamReader()`` (when the query starts its source) check the rest, and
  refuse a user-specified schema with Spark's message (at the first action, the
  earliest point PySpark runs any of the source);
* ``writer()``/``streamWriter()`` check write options and columns before any
  task runs.

PySpark reports a data source's exception with its traceback; for these
refusals the worker (which exits after reporting) is told to send only the
message, so the user reads one line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from seglog.spark.batch_reader import BatchReader, FilteringBatchReader, building_for_pushdown
from seglog.spark.options import SourceOptions, parse_source_options, parse_write_options
from seglog.spark.refusal import refusing
from seglog.spark.stream_reader import StreamReader
from seglog.spark.typed.read import TypedPlan, plan_typed, typed_spark_schema
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

CUSTOM_SCHEMA_REFUSED = "Kafka source has a fixed schema and cannot be set with a custom one"
"""Spark's ``KafkaSourceProvider`` requirement, word for word."""

# Options only a read has: their presence at load() says the data source is being read.
_READ_ONLY_OPTIONS = frozenset(
    {
        "subscribe",
        "subscribepattern",
        "assign",
        "path",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "endingtimestamp",
        "startingoffsetsbytimestamp",
        "endingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "failondataloss",
        "minpartitions",
        "maxrecordsperpartition",
        "maxoffsetspertrigger",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "groupidprefix",
        "includeheaders",
        "commitoffsetstogroup",
        "kafkaconsumer.polltimeoutms",
    }
)


def check_read_options_at_load(
    options: Mapping[str, str], *, read: bool = False
) -> SourceOptions | None:
    """Raise what is wrong with read options for a batch and a stream alike (see the module
    docstring); unless ``read`` (the options are known to be a read's), options that may be a
    write's are left to the factories. The options parsed (as a stream's when they can be),
    None when they were left."""
    keys = {key.lower() for key in options}
    if not read and not keys & _READ_ONLY_OPTIONS:
        return None
    try:
        return parse_source_options(options, streaming=True)
    except ValueError:
        return parse_source_options(options, streaming=False)


class RefusedStreamReader(DataSourceStreamReader):
    """A stream reader whose options were refused: every call raises the refusal."""

    def __init__(self, message: str) -> None:
        self.message = message

    def _refuse(self) -> NoReturn:
        def fail() -> NoReturn:
            raise ValueError(self.message)

        refusing(fail)
        raise AssertionError("unreachable")

    def initialOffset(self) -> dict[str, Any]:
        """Raise the refusal."""
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Raise the refusal."""
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Raise the refusal."""
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Raise the refusal."""
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Raise the refusal."""
        self._refuse()


class SeglogDataSource(DataSource):
    """``format("seglog")``: Spark's Kafka source and sink over a broker or a log directory."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Set by schema(); PySpark skips schema() when the user gave one.
        self.fixed_schema = False
        # The typed columns planned by schema(): PySpark hands this instance, as schema()
        # left it, to the reader factories.
        self.typed_plan: TypedPlan | None = None
        refusing(lambda: check_read_options_at_load(self.options))

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "seglog"

    def _refuse_custom_schema(self) -> None:
        if not self.fixed_schema:
            raise ValueError(CUSTOM_SCHEMA_REFUSED)

    def schema(self) -> StructType:
        """Spark's Kafka row schema, with ``headers`` when ``includeHeaders`` is true, and the
        key/value typed from the registry when ``keyFormat``/``valueFormat`` say so.

        PySpark asks only when reading, so the options are checked as a read's here.
        """
        options = refusing(lambda: check_read_options_at_load(self.options, read=True))
        assert options is not None
        self.fixed_schema = True
        self.typed_plan = refusing(lambda: plan_typed(options))
        return typed_spark_schema(options.include_headers, self.typed_plan)

    def reader(self, schema: StructType) -> BatchReader:
        """A batch reader; options are validated as for a batch query."""
        return refusing(lambda: self._batchreader(schema))

    def _batchreader(self, schema: StructType) -> BatchReader:
        self._refuse_custom_schema()
        options = parse_source_options(self.options, streaming=False)
        if building_for_pushdown():
            return FilteringBatchReader(options, schema, self.typed_plan)
        return BatchReader(options, schema, self.typed_plan)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A streaming reader; options are validated as for a streaming query.

        A refusal is raised from the reader's first call rather than from here:
        PySpark's stream runner cannot report an exception raised while it builds
        the reader (it fails stopping a reader it does not have, and that error
        hides this one).
        """
        try:
            self._refuse_custom_schema()
            options = parse_source_options(self.options, streaming=True)
            return StreamReader(options, schema, self.typed_plan)
        except ValueError as exc:
            return RefusedStreamReader(str(exc))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        """A batch writer; options and columns are validated here.

        Spark's Kafka sink allows Append and ErrorIfExists and refuses Overwrite and
        Ignore. PySpark itself refuses ErrorIfExists and Ignore for every Python data
        source before this is called, so Append is the one mode that reaches here and
        Overwrite is refused with Spark's message.
        """
        return refusing(lambda: self._batch_writer(schema, overwrite))

    def _batch_writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if overwrite:
            raise ValueError(OVERWRITE_REFUSED)
        return BatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        """A streaming writer; options and columns are validated here."""
        return refusing(lambda: StreamWriter(parse_write_options(self.options), schema))
