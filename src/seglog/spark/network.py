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
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import confluent_kafka as ck
import pyarrow as pa  # type: ignore[import-untyped]

from seglog.spark.arrow import NO_TIMESTAMP_TYPE, ColumnBuilder
from seglog.spark.offsets import OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import SourceOptions, Strategy, select_partitions
from seglog.spark.transport import BATCH_ROWS, Transport, data_loss

__all__ = ["NetworkTransport", "consumer_config"]

# confluent-kafka's timestamp types → Kafka's TimestampType ids.
_TIMESTAMP_TYPES = {
    ck.TIMESTAMP_NOT_AVAILABLE: NO_TIMESTAMP_TYPE,
    ck.TIMESTAMP_CREATE_TIME: 0,
    ck.TIMESTAMP_LOG_APPEND_TIME: 1,
}
_CONSUME_BATCH = 10_000
_POLL_S = 0.2
_METADATA_TIMEOUT_S = 30.0


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

    @property
    def consumer(self) -> ck.Consumer:
        """The consumer (no group membership: partitions are assigned, never subscribed)."""
        if self._consumer is None:
            self._consumer = ck.Consumer(consumer_config(self.options))
        return self._consumer

    def close(self) -> None:
        """Close the consumer (it never committed anything)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ---------------------------------------------------------------- offsets

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """The partitions ``strategy`` covers, from the cluster's metadata."""
        metadata = self.consumer.list_topics(timeout=_METADATA_TIMEOUT_S)
        available = [
            TopicPartition(name, number)
            for name, topic in metadata.topics.items()
            if topic.error is None
            for number in topic.partitions
        ]
        return select_partitions(strategy, available)

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        low, high = self.consumer.get_watermark_offsets(
            ck.TopicPartition(tp.topic, tp.partition), timeout=self._timeout, cached=False
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
        answer = self.consumer.offsets_for_times(request, timeout=self._timeout)
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
                    raise TimeoutError(
                        f"Timed out after {self._timeout:g} s reading {rng.topic_partition} at "
                        f"offset {next_offset} (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + self._timeout
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
