"""Batch and streaming writes: ``df.write.format("seglog")`` and ``writeStream``.

Columns as in Spark's Kafka sink: ``value`` (required, string or binary),
``key`` (string or binary), ``topic`` (string; the ``topic`` option wins over
it), ``partition`` (int; the producer's partitioner when null or absent) and
``headers`` (``array<struct<key string, value binary>>``). The columns are
checked in ``writer()``/``streamWriter()``, which Spark calls on the driver,
so a bad DataFrame or option fails before any task runs.

Rows without a ``partition`` are placed as the Java producer behind Spark's
sink places them: a keyed row by murmur2 of its key (``toPositive(murmur2(key))
% partitions``, librdkafka's ``murmur2_random``), so keys land where JVM
producers and Kafka Streams expect them; null keys stick to one partition
while a batch fills, then move on (librdkafka's sticky partitioning, which
applies to null keys under every partitioner). librdkafka's own default,
``consistent_random``, hashes keys with CRC32 and would put most keys elsewhere.

Delivery is at-least-once, like Spark's sink: each task produces its rows
with a confluent-kafka producer tuned for throughput (``linger.ms``, large
batches; every ``kafka.*`` option overrides these), flushes, and fails with
the broker's error if any record was not acknowledged. A retried task may
write its rows again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck
import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from seglog.spark.options import THROUGHPUT_DEFAULTS, WriteOptions

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["BatchWriter", "StreamWriter", "WriteResult", "check_write_schema", "produce_batches"]

_FLUSH_TIMEOUT_S = 120.0
_METADATA_TIMEOUT_S = 60.0


class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    def __init__(self, records: int) -> None:
        self.records = records


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Spark's ``KafkaWriter.validateQuery``: raise ValueError for columns the sink cannot write."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if options.topic is None:
        if "topic" not in fields:
            raise ValueError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise ValueError(
                f"Topic type must be a StringType, not {fields['topic'].simpleString()}"
            )
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise ValueError(
                f"{name.capitalize()} attribute type must be a StringType or BinaryType, "
                f"not {fields[name].simpleString()}"
            )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(
            "Partition attribute type must be an IntegerType, not "
            f"{fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        headers = fields["headers"]
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
            == [("key", StringType), ("value", BinaryType)]
        )
        if not ok:
            raise ValueError(
                "Headers attribute type must be an ArrayType(StructType(key string, value "
                f"binary)), not {headers.simpleString()}"
            )


JAVA_PARTITIONER = "murmur2_random"
"""librdkafka's partitioner that places keyed records as the Java producer's default does."""


def producer_config(options: WriteOptions) -> dict[str, Any]:
    """librdkafka producer settings: Java's partitioner and throughput defaults, then the
    user's ``kafka.*``."""
    config: dict[str, Any] = {"partitioner": JAVA_PARTITIONER, **THROUGHPUT_DEFAULTS}
    config.update(options.kafka_params)
    return config


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        # Spark matches column names case-insensitively.
        for i, field in enumerate(batch.schema):
            if field.name.lower() == name:
                index = i
                break
        else:
            return None
    column: list[Any] = batch.column(index).to_pylist()
    return column


def produce_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns the count, raises if any delivery failed."""
    producer = ck.Producer(producer_config(options))
    errors: list[str] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None and len(errors) < 5:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    known: set[str] = set()
    count = 0
    for batch in batches:
        values = _column(batch, "value") or []
        keys = _column(batch, "key")
        topics = None if options.topic is not None else _column(batch, "topic")
        partitions = _column(batch, "partition")
        headers = _column(batch, "headers")
        for i, value in enumerate(values):
            topic = options.topic if topics is None else topics[i]
            if topic is None:
                raise ValueError(
                    "null topic present in the data. Use the topic option for setting a "
                    "default topic."
                )
            if topic not in known:
                # As the Java producer's send() does, learn the partitions before the first
                # record: records queued before it are spread at random, not sticky.
                producer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
                known.add(topic)
            kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if partitions is not None and partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)  # the local queue is full: let deliveries drain it
                except ck.KafkaException as exc:  # refused before sending (e.g. no such partition)
                    where = f"{topic}[{kwargs.get('partition', '')}]"
                    raise RuntimeError(
                        f"Writing to Kafka failed: {where}: {exc.args[0].str()}"
                    ) from None
            count += 1
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if errors:
        raise RuntimeError("Writing to Kafka failed: " + "; ".join(errors))
    if remaining:
        raise RuntimeError(
            f"Writing to Kafka failed: {remaining} records were not acknowledged within "
            f"{_FLUSH_TIMEOUT_S:g} s"
        )
    return count


class BatchWriter(DataSourceArrowWriter):
    """``DataSourceArrowWriter``: each task produces its rows and flushes."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        """Produce the task's rows."""
        return WriteResult(produce_batches(self.options, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    """``DataSourceStreamArrowWriter``: as :class:`BatchWriter`, per micro-batch."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        """Produce the task's rows of one micro-batch."""
        return WriteResult(produce_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task flushed before it returned."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: Kafka has no transactions here (at-least-once)."""
