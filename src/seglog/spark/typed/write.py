"""The sink's typed columns: struct (or any) ``key``/``value`` columns encoded into the wire
format before they are produced.

With ``valueFormat`` (or ``keyFormat``) ``avro``, ``json`` or ``protobuf``,
each row's value is encoded with the latest schema of the subject
``<topic>-value`` (Confluent's TopicNameStrategy), fetched once per topic and
task. A subject with no schema gets one derived from the column's Spark type
(an Avro record named after the topic, or a JSON Schema object) and
registered, as Confluent's serializers do with ``auto.register.schemas``
(default true; false makes a subject without schema an error). Protobuf
needs the subject to hold a schema: its first message is written. A null
value is written as null (a tombstone).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.types import DataType

from seglog.errors import SeglogError
from seglog.spark.options import TypedOptions
from seglog.spark.typed.avro_types import spark_to_avro
from seglog.spark.typed.codecs import FORMATS, codec_of
from seglog.spark.typed.json_types import spark_to_json_schema
from seglog.spark.typed.read import subject
from seglog.spark.typed.registry import RegisteredSchema, SchemaLookup, open_lookup

__all__ = ["TypedEncodeError", "TypedEncoder", "derived_schema"]


class TypedEncodeError(SeglogError):
    """A row whose typed column does not fit its subject's schema."""

    kafka_error = "INVALID_RECORD"


def derived_schema(fmt: str, data_type: DataType, topic: str) -> str:
    """The schema text the sink registers for a column of ``data_type`` written to ``topic``
    in ``fmt`` when the subject has none."""
    if fmt == "avro":
        return json.dumps(spark_to_avro(data_type, topic))
    if fmt == "json":
        return json.dumps(spark_to_json_schema(data_type, topic))
    raise TypedEncodeError(
        f"Subject '{subject(topic, 'value')}' has no schema: a Protobuf schema cannot be "
        "derived from the column; register one first"
    )


class TypedEncoder:
    """Encodes one task's typed columns (see the module docstring)."""

    def __init__(
        self,
        options: TypedOptions,
        column_types: Mapping[str, DataType],
        topic_option: str | None,
    ) -> None:
        self.options = options
        self.column_types = {
            name: data_type
            for name, data_type in column_types.items()
            if options.format_of(name) != "binary"
        }
        self.topic_option = topic_option
        self._lookup: SchemaLookup | None = None
        self._encoders: dict[tuple[str, str], Callable[[Any], bytes]] = {}

    @property
    def typed(self) -> bool:
        """Whether any column is encoded here."""
        return bool(self.column_types)

    @property
    def lookup(self) -> SchemaLookup:
        """The registry, opened on first use."""
        if self._lookup is None:
            self._lookup = open_lookup(self.options.registry, None)
        return self._lookup

    def _encoder(self, column: str, topic: str) -> Callable[[Any], bytes]:
        found = self._encoders.get((column, topic))
        if found is not None:
            return found
        fmt = self.options.format_of(column)
        name = subject(topic, column)
        data_type = self.column_types[column]
        latest = self.lookup.latest(name)
        if latest is None:
            if not self.options.auto_register:
                raise TypedEncodeError(
                    f"Subject '{name}' has no schema and auto.register.schemas is false"
                )
            text = derived_schema(fmt, data_type, topic)
            schema_id = self.lookup.register(name, FORMATS[fmt], text)
            latest = RegisteredSchema(schema_id, FORMATS[fmt], text)
        elif latest.schema_type.upper() != FORMATS[fmt]:
            raise TypedEncodeError(
                f"Subject '{name}' holds a {latest.schema_type} schema, not {FORMATS[fmt]} "
                f"({column}Format={fmt})"
            )
        encoder = codec_of(latest, self.options.message_of(column)).encoder(data_type)
        self._encoders[(column, topic)] = encoder
        return encoder

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its typed columns replaced by their wire-format bytes."""
        names = [f.name.lower() for f in batch.schema]
        topics: list[Any]
        if self.topic_option is not None:
            topics = [self.topic_option] * batch.num_rows
        else:
            topics = batch.column(names.index("topic")).to_pylist()
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for column in self.column_types:
            if column not in names:
                continue
            index = names.index(column)
            encoded: list[bytes | None] = []
            for row, value in enumerate(batch.column(index).to_pylist()):
                if value is None:
                    encoded.append(None)
                    continue
                topic = topics[row]
                if topic is None:
                    raise ValueError(
                        "null topic present in the data. Use the topic option for setting a "
                        "default topic."
                    )
                encoder = self._encoder(column, topic)
                try:
                    encoded.append(encoder(value))
                except Exception as exc:
                    raise TypedEncodeError(
                        f"The {column} of a row for topic {topic} does not fit the schema of "
                        f"subject '{subject(topic, column)}' ({type(exc).__name__}: {exc})"
                    ) from exc
            arrays[index] = pa.array(encoded, pa.binary())
            fields[index] = pa.field(fields[index].name, pa.binary())
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` encoded; the registry's connections closed at the end."""
        try:
            for batch in batches:
                yield self.encode(batch)
        finally:
            if self._lookup is not None:
                self._lookup.close()
                self._lookup = None
