"""Typed ``key``/``value`` columns of a read: planned on the driver, decoded in the tasks.

Planning (:func:`plan_typed`, when the DataFrame's schema is asked): for each
typed column, the latest schema of the subject ``<topic>-value`` (or
``-key``) of every topic the read covers then; its Spark type is the
column's. Topics whose latest schemas have different Spark types are refused
(one DataFrame column has one type); equal types are read together, each
topic against its own planned schema.

Reading (:class:`TypedBatches`, in a task): each Arrow batch of Spark's
Kafka columns has its typed columns replaced. Per record: the wire format's
header (:func:`seglog.schemas.wire.split`), the schema of its id (fetched once
per task), the format's decoder into the planned schema's shape; then one
``pyarrow.array`` call per column and batch. A null key or value stays null.
A record that is not in the wire format, names an unknown id or does not
decode fails the task with an error naming topic, partition and offset, or
reads as null under ``mode=PERMISSIVE``. Under ``schemaEvolution=fail`` a
record written with another schema id than the planned one fails the task
whatever the mode.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import DataType, StructField, StructType

from seglog.errors import SeglogError
from seglog.schemas.wire import HEADER_SIZE, MAGIC_BYTE, WireFormatError, split
from seglog.spark.options import SourceOptions, Subscribe, TypedOptions
from seglog.spark.refusal import refusing
from seglog.spark.schema import spark_schema
from seglog.spark.typed.codecs import FORMATS, SchemaCodec, codec_of
from seglog.spark.typed.registry import SchemaLookup, open_lookup

__all__ = [
    "TypedBatches",
    "TypedColumn",
    "TypedPlan",
    "TypedReadError",
    "plan_typed",
    "subject",
    "typed_spark_schema",
]


_SCHEMA_ID = struct.Struct(">I")


class TypedReadError(SeglogError):
    """A record that cannot be read into its typed column."""

    kafka_error = "CORRUPT_MESSAGE"


def subject(topic: str, column: str) -> str:
    """The subject of ``topic``'s key or value (Confluent's TopicNameStrategy)."""
    return f"{topic}-{column}"


@dataclass(frozen=True)
class TypedColumn:
    """One typed column: its format, the schema id planned per topic, its Spark type."""

    name: str
    format: str
    planned: Mapping[str, int]
    data_type: DataType


@dataclass(frozen=True)
class TypedPlan:
    """The typed columns of a read, with the options that say how to read them."""

    columns: tuple[TypedColumn, ...]
    options: TypedOptions
    path: str | None


def _topics(options: SourceOptions) -> list[str]:
    if isinstance(options.strategy, Subscribe):
        return sorted(set(options.strategy.topics))
    from seglog.spark.transport import open_transport

    with open_transport(options) as transport:
        return sorted({tp.topic for tp in transport.partitions(options.strategy)})


def plan_typed(options: SourceOptions) -> TypedPlan | None:
    """The typed columns of a read by ``options`` (None when nothing is typed); see the module
    docstring. Raises ValueError with a one-line reason when a column cannot be typed."""
    typed = options.typed
    if not typed.typed:
        return None
    topics = _topics(options)
    if not topics:
        raise ValueError(
            "No topic to take a schema from: a typed format needs the subscription to cover "
            "at least one topic when the query starts"
        )
    lookup = open_lookup(typed.registry, options.path)
    try:
        columns = _plan_columns(typed, topics, lookup)
    finally:
        lookup.close()
    return TypedPlan(tuple(columns), typed, options.path)


def _plan_columns(
    typed: TypedOptions, topics: list[str], lookup: SchemaLookup
) -> list[TypedColumn]:
    columns = []
    for column in ("key", "value"):
        fmt = typed.format_of(column)
        if fmt == "binary":
            continue
        planned: dict[str, int] = {}
        data_type: DataType | None = None
        first = ""
        for topic in topics:
            name = subject(topic, column)
            latest = lookup.latest(name)
            if latest is None:
                raise ValueError(
                    f"Subject '{name}' has no schema in the registry: {column}Format={fmt} "
                    f"needs one to type the {column} column"
                )
            if latest.schema_type.upper() != FORMATS[fmt]:
                raise ValueError(
                    f"Subject '{name}' holds a {latest.schema_type} schema, not "
                    f"{FORMATS[fmt]} ({column}Format={fmt})"
                )
            this_type = codec_of(latest, typed.message_of(column)).spark_type()
            if data_type is None:
                data_type, first = this_type, topic
            elif this_type != data_type:
                raise ValueError(
                    f"The latest schemas of subjects '{subject(first, column)}' and '{name}' "
                    f"give the {column} column different types ({data_type.simpleString()} "
                    f"and {this_type.simpleString()}): read these topics separately"
                )
            planned[topic] = latest.id
        assert data_type is not None
        columns.append(TypedColumn(column, fmt, planned, data_type))
    return columns


def typed_spark_schema(include_headers: bool, plan: TypedPlan | None) -> StructType:
    """Spark's Kafka row schema with the typed columns' types."""
    base = spark_schema(include_headers)
    if plan is None:
        return base
    types = {c.name: c.data_type for c in plan.columns}
    return StructType([StructField(f.name, types.get(f.name, f.dataType)) for f in base.fields])


class _ColumnDecoder:
    """Decodes one typed column of one task's batches."""

    def __init__(self, column: TypedColumn, plan: TypedPlan, lookup: _Lookup) -> None:
        self.column = column
        self.plan = plan
        self.lookup = lookup
        self.arrow_type = to_arrow_type(column.data_type, timezone="UTC")
        self.fail_other_ids = plan.options.schema_evolution == "fail"
        self.permissive = plan.options.permissive
        self.message = plan.options.message_of(column.name)
        self._decoders: dict[tuple[str, int], Any] = {}

    def _planned_id(self, topic: str) -> int:
        planned = self.column.planned.get(topic)
        if planned is None:
            # A topic that appeared after planning (a pattern): its latest schema, if it types
            # the column as planned.
            name = subject(topic, self.column.name)
            latest = self.lookup.latest(name)
            if latest is None:
                raise TypedReadError(f"Subject '{name}' has no schema in the registry")
            if self.lookup.codec(latest.id, self.message).spark_type() != self.column.data_type:
                raise TypedReadError(
                    f"The latest schema of subject '{name}' (id {latest.id}) gives the "
                    f"{self.column.name} column another type than the query's"
                )
            planned = latest.id
        return planned

    def _decoder(self, topic: str, schema_id: int) -> Any:
        key = (topic, schema_id)
        decoder = self._decoders.get(key)
        if decoder is None:
            writer = self.lookup.codec(schema_id, self.message)
            planned = self.lookup.codec(self._planned_id(topic), self.message)
            if writer.registered.schema_type != planned.registered.schema_type:
                raise ValueError(
                    f"schema id {schema_id} is a {writer.registered.schema_type} schema, "
                    f"not {planned.registered.schema_type}"
                )
            decoder = writer.decoder(planned)
            self._decoders[key] = decoder
        return decoder

    def decode(
        self, raw: list[bytes | None], topic: str, partition: int, offsets: list[int]
    ) -> pa.Array:
        """The column's values decoded, as one Arrow array."""
        out: list[Any] = []
        append = out.append
        planned = self._planned_id(topic) if self.fail_other_ids else -1
        decoders = self._decoders
        schema_id_at = _SCHEMA_ID.unpack_from
        # The header is checked inline (the hot loop); split() says what is wrong with one.
        for i, value in enumerate(raw):
            if value is None:
                append(None)
                continue
            try:
                if len(value) < HEADER_SIZE or value[0] != MAGIC_BYTE:
                    split(value)  # raises WireFormatError naming the problem
                (schema_id,) = schema_id_at(value, 1)
                if self.fail_other_ids and schema_id != planned:
                    raise TypedReadError(
                        f"Record at topic {topic} partition {partition} offset {offsets[i]} was "
                        f"written with schema id {schema_id}, not {planned} as planned for the "
                        f"{self.column.name} column (schemaEvolution=fail)"
                    )
                decoder = decoders.get((topic, schema_id)) or self._decoder(topic, schema_id)
                append(decoder(value))
            except TypedReadError:
                raise
            except Exception as exc:
                if self.permissive:
                    append(None)
                    continue
                raise TypedReadError(self._bad(topic, partition, offsets[i], exc)) from exc
        try:
            return pa.array(out, type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            return self._one_by_one(out, topic, partition, offsets, exc)

    def _one_by_one(
        self, values: list[Any], topic: str, partition: int, offsets: list[int], first: Exception
    ) -> pa.Array:
        """The batch's values that Arrow takes, the others null (PERMISSIVE) or named in the
        error (FAILFAST): found one by one, only after the whole batch was refused."""
        kept: list[Any] = []
        for i, value in enumerate(values):
            try:
                pa.array([value], type=self.arrow_type)
                kept.append(value)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                if not self.permissive:
                    raise TypedReadError(self._bad(topic, partition, offsets[i], exc)) from exc
                kept.append(None)
        try:
            return pa.array(kept, type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypedReadError(
                f"{self.column.name} column of {topic}-{partition}: {first}"
            ) from exc

    def _bad(self, topic: str, partition: int, offset: int, exc: Exception) -> str:
        column = self.column.name
        if isinstance(exc, WireFormatError):
            what = f"is not in the schema registry's wire format ({exc})"
        elif isinstance(exc, _UnknownSchema):
            what = f"names schema id {exc.schema_id}, which the registry does not have"
        else:
            what = f"does not decode as {self.column.format} ({type(exc).__name__}: {exc})"
        return (
            f"The {column} of the record at topic {topic} partition {partition} offset {offset} "
            f"{what}; option mode=PERMISSIVE reads such records as null"
        )


class _UnknownSchema(LookupError):
    def __init__(self, schema_id: int) -> None:
        super().__init__(f"unknown schema id {schema_id}")
        self.schema_id = schema_id


class _Lookup:
    """A task's schemas: fetched once each, parsed once each."""

    def __init__(self, plan: TypedPlan) -> None:
        self.plan = plan
        self._lookup: SchemaLookup | None = None
        self._codecs: dict[tuple[int, str | None], SchemaCodec] = {}

    @property
    def source(self) -> SchemaLookup:
        if self._lookup is None:
            self._lookup = open_lookup(self.plan.options.registry, self.plan.path)
        return self._lookup

    def codec(self, schema_id: int, message: str | None) -> SchemaCodec:
        codec = self._codecs.get((schema_id, message))
        if codec is None:
            registered = self.source.by_id(schema_id)
            if registered is None:
                raise _UnknownSchema(schema_id)
            codec = codec_of(registered, message)
            self._codecs[(schema_id, message)] = codec
        return codec

    def latest(self, name: str) -> Any:
        return self.source.latest(name)

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


class TypedBatches:
    """Arrow batches of Spark's Kafka columns with the typed ones decoded (one per task)."""

    def __init__(self, plan: TypedPlan, include_headers: bool) -> None:
        self.lookup = _Lookup(plan)
        self.decoders = [_ColumnDecoder(c, plan, self.lookup) for c in plan.columns]
        self.schema = to_arrow_schema(typed_spark_schema(include_headers, plan), timezone="UTC")

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its typed columns decoded."""
        if batch.num_rows == 0:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        topic = batch.column(batch.schema.get_field_index("topic"))[0].as_py()
        partition = batch.column(batch.schema.get_field_index("partition"))[0].as_py()
        offsets = batch.column(batch.schema.get_field_index("offset")).to_pylist()
        columns = list(batch.columns)
        for decoder in self.decoders:
            index = batch.schema.get_field_index(decoder.column.name)
            raw = batch.column(index).to_pylist()
            columns[index] = decoder.decode(raw, topic, partition, offsets)
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` converted; the registry's connections closed at the end."""
        try:
            for batch in batches:
                # A record that cannot be read is the user's to see in one line.
                yield refusing(functools.partial(self.convert, batch))
        finally:
            self.lookup.close()
