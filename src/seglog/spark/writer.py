"""Batch and streaming writes: ``df.write.format("seglog")`` and ``writeStream``.

Columns as in Spark's Kafka sink: ``value`` (required, string or binary;
with ``valueFormat`` avro/json/protobuf any type, a struct most often, encoded
with the subject's schema by :mod:`seglog.spark.typed.write`), ``key`` (the
same, with ``keyFormat``), ``topic`` (string; the ``topic`` option wins over
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

Delivery is at-least-once by default, like Spark's sink: each task produces
its rows with a confluent-kafka producer tuned for throughput (``linger.ms``,
large batches; every ``kafka.*`` option overrides these), flushes, and fails
with the broker's error if any record was not acknowledged. A retried task may
write its rows again.

Exactly-once (``exactlyOnce=true``, streaming writes only)
----------------------------------------------------------
Each task writes its partition of a micro-batch in one Kafka transaction. The
transactional id is ``seglog-spark-<query id>-<partition id>``: Spark keeps the
query id in the checkpoint, so a restarted query, a retried task and a replayed
batch all reuse the id of the task they repeat. Inside the same transaction the
task commits an offset for the consumer group of the same name: ``batch id +
1`` on partition 0 of the first topic it writes to. Before writing, a task

1. calls ``init_transactions``, which fences any earlier holder of the id (a
   zombie attempt) and aborts its open transaction (a task killed mid-batch),
   or waits for its commit to complete;
2. reads the group's committed offset; if it already records this batch, the
   partition's rows are in the log and the task writes nothing.

So a batch replayed after a crash (Spark replays the same offsets, so the
same rows in the same partitions) is written once, whichever of its tasks had
committed. Readers must use ``isolation.level=read_committed`` to skip the
aborted attempts. The batch and query ids come from the task's local
properties Spark sets for streaming queries (``streaming.sql.batchId``,
``sql.streaming.queryId``).
"""

from __future__ import annotations

import contextlib
import itertools
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
from seglog.spark.typed.write import TypedEncoder

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = [
    "BatchWriter",
    "StreamWriter",
    "WriteResult",
    "check_write_schema",
    "produce_batches",
    "produce_exactly_once",
    "transactional_id",
]

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
        if options.typed.format_of(name) != "binary":
            continue  # encoded with the subject's schema (seglog.spark.typed.write)
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


def _produce_rows(
    producer: ck.Producer,
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    errors: list[str],
) -> int:
    """Queue every row of ``batches`` on ``producer``; stops early once a delivery failed."""

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
    return count


def typed_columns(schema: StructType, options: WriteOptions) -> dict[str, Any]:
    """The Spark types of the ``key``/``value`` columns a typed format encodes."""
    return {
        f.name.lower(): f.dataType
        for f in schema.fields
        if f.name.lower() in ("key", "value")
        and options.typed.format_of(f.name.lower()) != "binary"
    }


def encoded(
    options: WriteOptions, columns: dict[str, Any], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches`` with their typed columns encoded (as they are when none is typed)."""
    if not columns:
        return batches
    return TypedEncoder(options.typed, columns, options.topic)(batches)


def produce_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns the count, raises if any delivery failed."""
    producer = ck.Producer(producer_config(options))
    errors: list[str] = []
    count = _produce_rows(producer, options, batches, errors)
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if errors:
        raise RuntimeError("Writing to Kafka failed: " + "; ".join(errors))
    if remaining:
        raise RuntimeError(
            f"Writing to Kafka failed: {remaining} records were not acknowledged within "
            f"{_FLUSH_TIMEOUT_S:g} s"
        )
    return count


def transactional_id(query_id: str, partition_id: int) -> str:
    """The transactional id (and marker group) of one partition of a streaming query."""
    return f"seglog-spark-{query_id}-{partition_id}"


def _first_topic(options: WriteOptions, batch: pa.RecordBatch) -> str | None:
    if options.topic is not None:
        return options.topic
    topics = _column(batch, "topic") or []
    return next((t for t in topics if t is not None), None)


def produce_exactly_once(
    options: WriteOptions,
    query_id: str,
    batch_id: int,
    partition_id: int,
    batches: Iterator[pa.RecordBatch],
) -> int:
    """Write one partition of micro-batch ``batch_id`` in a transaction, at most once.

    Returns the number of records written: 0 when a committed transaction already
    recorded (query, batch, partition). See the module's docstring.
    """
    rows = iter(batches)
    first = next((b for b in rows if b.num_rows), None)
    if first is None:
        return 0  # nothing to write, nothing to record: a replay has nothing either
    marker_topic = _first_topic(options, first)
    if marker_topic is None:
        raise ValueError(
            "null topic present in the data. Use the topic option for setting a default topic."
        )
    txn_id = transactional_id(query_id, partition_id)
    config = producer_config(options)
    config["transactional.id"] = txn_id
    producer = ck.Producer(config)
    # A read_committed member-less consumer of the marker group: reads the marker and
    # supplies the group metadata send_offsets_to_transaction needs.
    consumer_config: dict[str, Any] = {
        k: v for k, v in options.kafka_params.items() if k in _SHARED_CLIENT_KEYS
    }
    consumer_config.update(
        {
            "bootstrap.servers": options.bootstrap_servers,
            "group.id": txn_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer = ck.Consumer(consumer_config)
    try:
        # Fences an earlier attempt with this id and aborts (or completes) its transaction.
        producer.init_transactions(_METADATA_TIMEOUT_S)
        marker = ck.TopicPartition(marker_topic, 0)
        (done,) = consumer.committed([marker], timeout=_METADATA_TIMEOUT_S)
        if done.error is not None:
            raise RuntimeError(f"Reading the sink's progress failed: {done.error.str()}")
        if done.offset > batch_id:
            return 0  # this partition of the batch is already in the log
        producer.begin_transaction()
        errors: list[str] = []
        try:
            count = _produce_rows(producer, options, itertools.chain([first], rows), errors)
            producer.flush(_FLUSH_TIMEOUT_S)
            if errors:
                raise RuntimeError("Writing to Kafka failed: " + "; ".join(errors))
        except Exception:
            # Abort now rather than leave the partitions' read_committed end held until a
            # retry initialises the id or the transaction times out.
            with contextlib.suppress(ck.KafkaException):
                producer.abort_transaction(_FLUSH_TIMEOUT_S)
            raise
        producer.send_offsets_to_transaction(
            [ck.TopicPartition(marker_topic, 0, batch_id + 1)],
            consumer.consumer_group_metadata(),
            _METADATA_TIMEOUT_S,
        )
        producer.commit_transaction(_FLUSH_TIMEOUT_S)
        return count
    finally:
        consumer.close()


# Client settings (security, addressing) the marker consumer shares with the producer.
_SHARED_CLIENT_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "client.id",
        "socket.timeout.ms",
    }
)


class BatchWriter(DataSourceArrowWriter):
    """``DataSourceArrowWriter``: each task produces its rows and flushes."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        if options.exactly_once:
            # A batch write has no batch id to replay against: Spark reruns the whole job.
            raise ValueError("Option 'exactlyOnce' applies to streaming writes only")
        check_write_schema(schema, options)
        self.options = options
        self.typed_columns = typed_columns(schema, options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        """Produce the task's rows."""
        rows = encoded(self.options, self.typed_columns, iterator)
        return WriteResult(produce_batches(self.options, rows))


class StreamWriter(DataSourceStreamArrowWriter):
    """``DataSourceStreamArrowWriter``: as :class:`BatchWriter`, per micro-batch."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options
        self.typed_columns = typed_columns(schema, options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        """Produce the task's rows of one micro-batch (in a transaction if exactly-once)."""
        iterator = encoded(self.options, self.typed_columns, iterator)
        if not self.options.exactly_once:
            return WriteResult(produce_batches(self.options, iterator))
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = context.getLocalProperty(_QUERY_ID_KEY) if context else None
        batch_id = context.getLocalProperty(_BATCH_ID_KEY) if context else None
        if context is None or query_id is None or batch_id is None:
            raise RuntimeError("exactlyOnce: the task carries no streaming query or batch id")
        return WriteResult(
            produce_exactly_once(
                self.options, query_id, int(batch_id), context.partitionId(), iterator
            )
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task flushed (or committed its transaction) before it returned."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: at-least-once writes stay; exactly-once tasks that did not
        commit are aborted when the batch's replay initialises the same transactional ids."""


# Local properties Spark's MicroBatchExecution sets for every task of a micro-batch.
_QUERY_ID_KEY = "sql.streaming.queryId"
_BATCH_ID_KEY = "streaming.sql.batchId"
