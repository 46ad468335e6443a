"""The network transport: any Kafka-protocol broker through confluent-kafka (librdkafka).

Why confluent-kafka: librdkafka is the most used non-JVM Kafka client, fetches
in a background thread with pre-fetch queues, and hands Python whole lists of
messages per ``consume()`` call; with ``assign()`` it reads partitions without
joining a consumer group, which is all Spark's source needs (Spark tracks the
offsets itself). Offsets by time are one ListOffsets round trip
(``offsets_for_times``), earliest and latest are the watermarks.

The consumer is configured as Spark configures its own: no auto commit, no
auto offset reset (out-of-range reads are data loss, not silent jumps),
``read_uncommitted``; every ``kafka.*`` option is passed through to
librdkafka, which knows most Java client names (``security.protocol``,
``sasl.*``, ``ssl.*`` ...).

A lookup (metadata, watermarks, offsets by time) waits for the cluster as long
as the Java client would (``kafka.default.api.timeout.ms`` or
``kafka.request.timeout.ms``, see :attr:`SourceOptions.broker_timeout_ms`) and
then fails with :class:`ClusterUnreachableError`, which carries librdkafka's
last word on why (``Connect to ipv4#127.0.0.1:9092 failed: Connection
refused``): librdkafka reports that through its error callback, not in the
exception of the call that timed out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import confluent_kafka as ck
import pyarrow as pa  # type: ignore[import-untyped]

from seglog.errors import SeglogError
from seglog.spark.arrow import NO_TIMESTAMP_TYPE, ColumnBuilder
from seglog.spark.offsets import OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import SourceOptions, Strategy, select_partitions
from seglog.spark.transport import BATCH_ROWS, Transport, data_loss

__all__ = ["ClusterUnreachableError", "NetworkTransport", "consumer_config"]

T = TypeVar("T")

# confluent-kafka's timestamp types → Kafka's TimestampType ids.
_TIMESTAMP_TYPES = {
    ck.TIMESTAMP_NOT_AVAILABLE: NO_TIMESTAMP_TYPE,
    ck.TIMESTAMP_CREATE_TIME: 0,
    ck.TIMESTAMP_LOG_APPEND_TIME: 1,
}
_CONSUME_BATCH = 10_000
_POLL_S = 0.2
# librdkafka's errors of a call that could not reach the cluster in time.
_UNREACHABLE = frozenset(
    {
        ck.KafkaError._TRANSPORT,
        ck.KafkaError._ALL_BROKERS_DOWN,
        ck.KafkaError._TIMED_OUT,
        ck.KafkaError._RESOLVE,
        ck.KafkaError._SSL,
        ck.KafkaError._AUTHENTICATION,
    }
)


class ClusterUnreachableError(SeglogError):
    """A lookup found no broker to answer it in time; the message says why."""

    kafka_error = "NETWORK_EXCEPTION"


def consumer_config(options: SourceOptions) -> dict[str, Any]:
    """librdkafka settings for reading ``options``' partitions by assignment only."""
    config: dict[str, Any] = {
        "group.id": f"{options.group_id_prefix}-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "isolation.level": "read_uncommitted",
        "fetch.max.bytes": 52_428_800,
        "queued.max.messages.kbytes": 262_144,
        "allow.auto.create.topics": False,
    }
    config.update(options.kafka_params)
    return config


class NetworkTransport(Transport):
    """Offsets and records through one confluent-kafka consumer, created on first use."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: ck.Consumer | None = None
        self._timeout = options.poll_timeout_ms / 1000
        self._lookup_timeout = options.broker_timeout_ms / 1000
        # librdkafka's latest error about a connection (see the module docstring).
        self._cause: str | None = None

    @property
    def consumer(self) -> ck.Consumer:
        """The consumer (no group membership: partitions are assigned, never subscribed)."""
        if self._consumer is None:
            config = consumer_config(self.options)
            config["error_cb"] = self._on_error
            self._consumer = ck.Consumer(config)
        return self._consumer

    def _on_error(self, error: ck.KafkaError) -> None:
        # "1/1 brokers are down" follows the error that says why; keep the reason.
        if error.code() != ck.KafkaError._ALL_BROKERS_DOWN or self._cause is None:
            self._cause = error.str()

    def _lookup(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, with a failure to reach the cluster reported as
        :class:`ClusterUnreachableError` naming its cause."""
        try:
            return call()
        except ck.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not isinstance(error, ck.KafkaError) or error.code() not in _UNREACHABLE:
                raise
            if self._consumer is not None:
                self._consumer.poll(0)  # serves the error callback, which holds the cause
            cause = self._cause or error.str()
            raise ClusterUnreachableError(
                f"Could not {what}: no answer from the cluster at "
                f"{self.options.bootstrap_servers} within {self._lookup_timeout:g} s "
                f"(kafka.default.api.timeout.ms / kafka.request.timeout.ms): {cause}"
            ) from None

    def close(self) -> None:
        """Close the consumer (it never committed anything)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ---------------------------------------------------------------- offsets

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions ``strategy`` covers, from the cluster's metadata."""
        consumer = self.consumer
        metadata = self._lookup(
            "list the topics", lambda: consumer.list_topics(timeout=self._lookup_timeout)
        )
        available = [
            TopicPartition(name, number)
            for name, topic in metadata.topics.items()
            if topic.error is None
            for number in topic.partitions
        ]
        return select_partitions(strategy, available)

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        consumer = self.consumer
        low, high = self._lookup(
            f"look up the offsets of {tp}",
            lambda: consumer.get_watermark_offsets(
                ck.TopicPartition(tp.topic, tp.partition),
                timeout=self._lookup_timeout,
                cached=False,
            ),
        )
        return int(low), int(high)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The low watermark of each partition."""
        return {tp: self._watermarks(tp)[0] for tp in tps}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The high watermark of each partition."""
        return {tp: self._watermarks(tp)[1] for tp in tps}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets by timestamp; None where no record is at or after the time."""
        if not timestamps:
            return {}
        request = [ck.TopicPartition(tp.topic, tp.partition, ts) for tp, ts in timestamps.items()]
        consumer = self.consumer
        answer = self._lookup(
            "look up offsets by time",
            lambda: consumer.offsets_for_times(request, timeout=self._lookup_timeout),
        )
        out: dict[TopicPartition, int | None] = {}
        for item in answer:
            if item.error is not None:
                raise ck.KafkaException(item.error)
            out[TopicPartition(item.topic, item.partition)] = (
                int(item.offset) if item.offset >= 0 else None
            )
        return out

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit for a group without members, so lag tools see a pipeline's progress."""
        if not offsets:
            return
        config = consumer_config(self.options)
        config["group.id"] = group
        committer = ck.Consumer(config)
        try:
            committer.commit(
                offsets=[
                    ck.TopicPartition(tp.topic, tp.partition, offset)
                    for tp, offset in sorted(offsets.items())
                ],
                asynchronous=False,
            )
        finally:
            committer.close()

    # ---------------------------------------------------------------- records

    def read(
        self, rng: OffsetRange, include_headers: bool, fail_on_data_loss: bool
    ) -> Iterator[pa.RecordBatch]:
        """Fetch ``rng`` with ``assign``; one Arrow batch per ``consume()`` round or so."""
        tp = rng.topic_partition
        start, until = rng.from_offset, rng.until_offset
        low, high = self._watermarks(tp)
        if start < low:
            data_loss(
                f"Cannot fetch offset {start} of {tp}: the earliest available offset is {low}",
                fail_on_data_loss,
            )
            start = low
        if until > high:
            data_loss(
                f"Cannot fetch offsets up to {until} of {tp}: the latest available offset is "
                f"{high}",
                fail_on_data_loss,
            )
            until = high
        if start >= until:
            return
        consumer = self.consumer
        consumer.assign([ck.TopicPartition(tp.topic, tp.partition, start)])
        try:
            yield from self._fetch(consumer, rng, start, until, include_headers)
        finally:
            consumer.unassign()

    def _fetch(
        self,
        consumer: ck.Consumer,
        rng: OffsetRange,
        start: int,
        until: int,
        include_headers: bool,
    ) -> Iterator[pa.RecordBatch]:
        builder = ColumnBuilder(rng.topic, rng.partition, include_headers)
        add = builder.add
        types = _TIMESTAMP_TYPES
        eof = ck.KafkaError._PARTITION_EOF
        next_offset = start
        deadline = time.monotonic() + self._timeout
        while next_offset < until:
            # consume(n) waits until n messages or the timeout: ask for no more than the
            # range still needs, and poll briefly, so the end of a range costs no wait.
            messages = consumer.consume(min(_CONSUME_BATCH, until - next_offset), timeout=_POLL_S)
            if not messages:
                if time.monotonic() > deadline:
                    # consume() served the error callback: say why, when librdkafka said.
                    cause = f": {self._cause}" if self._cause else ""
                    raise TimeoutError(
                        f"Timed out after {self._timeout:g} s reading {rng.topic_partition} at "
                        f"offset {next_offset} (kafkaConsumer.pollTimeoutMs){cause}"
                    )
                continue
            deadline = time.monotonic() + self._timeout
            self._cause = None  # records came: an earlier connection error is over
            done = False
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == eof:
                        # End of the log before `until`: the rest was compacted away.
                        done = True
                        break
                    raise ck.KafkaException(error)
                offset: int = message.offset()  # type: ignore[assignment]  # set on records
                if offset >= until:
                    done = True
                    break
                ts_type, timestamp = message.timestamp()
                add(
                    offset,
                    timestamp,
                    types.get(ts_type, NO_TIMESTAMP_TYPE),
                    message.key(),
                    message.value(),
                    message.headers() if include_headers else None,  # type: ignore[arg-type]
                )
                next_offset = offset + 1
            if len(builder) >= BATCH_ROWS or (done and len(builder)):
                yield builder.build()
            if done:
                break
        if len(builder):
            yield builder.build()
