"""A topic source over any Kafka-protocol broker, through confluent-kafka (librdkafka).

Why confluent-kafka: librdkafka is the most used non-JVM Kafka client, fetches
in a background thread with pre-fetch queues, and hands Python whole lists of
messages per ``consume()`` call; with ``assign()`` it reads partitions without
joining a consumer group, which is all a reader that keeps its own positions
needs (Spark, the mirror). Offsets by time are one ListOffsets round trip
(``offsets_for_times``), the bounds are the watermarks (the high one is the
last stable offset under ``isolation.level=read_committed``, librdkafka's
default: the broker applies the isolation level, to offsets and fetches).
Topic configs and committed group offsets come through the admin client
(DescribeConfigs; ListGroups and OffsetFetch).

The caller gives the consumer's settings (group id, isolation level, offset
reset, pass-through client options); this module adds only what its read loop
relies on: ``enable.partition.eof``, whose event ends a read at the log end
(the rest of the range was compacted away or is markers).

A lookup (metadata, watermarks, offsets by time) waits for the cluster as long
as its :class:`Timeout` says, then fails with :class:`ClusterUnreachableError`,
which carries librdkafka's last word on why (``Connect to
ipv4#127.0.0.1:9092 failed: Connection refused``): librdkafka reports that
through its error callback, not in the exception of the call that timed out.
A read with no message for its timeout fails with :class:`ReadTimeoutError`.
Each error names the setting that sets the time it waited.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

import confluent_kafka as ck

# confluent-kafka re-exports these without ``as``, which mypy's strict mode does not
# count as an export; they are its documented public names all the same.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
)

from seglog.errors import SeglogError
from seglog.records.legacy import NO_TIMESTAMP_TYPE
from seglog.storage.filenames import is_internal
from seglog.topic_source.base import (
    Chunk,
    LostCallback,
    Rows,
    TopicInfo,
    TopicPartition,
    TopicSource,
    clip,
)

__all__ = ["BrokerTopicSource", "ClusterUnreachableError", "ReadTimeoutError", "Timeout"]

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


class ReadTimeoutError(SeglogError, TimeoutError):
    """A read received no message for as long as its timeout allows."""

    kafka_error = "REQUEST_TIMED_OUT"


class Timeout(NamedTuple):
    """How long to wait, in seconds, and the setting that says so (named in errors)."""

    seconds: float
    setting: str


class BrokerTopicSource(TopicSource):
    """The topics of one cluster, through a consumer (created on first use, partitions
    assigned, never subscribed) and an admin client (for topic configs and groups)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        lookup_timeout: Timeout,
        read_timeout: Timeout,
    ) -> None:
        """``config`` holds the connection settings (bootstrap servers, security) the
        admin client uses; ``consumer_config`` every setting of the consumer."""
        self.config = dict(config)
        self.consumer_config = dict(consumer_config)
        self.description = str(self.consumer_config.get("bootstrap.servers"))
        self.lookup_timeout = lookup_timeout
        self.read_timeout = read_timeout
        self._consumer: ck.Consumer | None = None
        self._admin: AdminClient | None = None
        # librdkafka's latest error about a connection (see the module docstring).
        self._cause: str | None = None

    @property
    def consumer(self) -> ck.Consumer:
        """The consumer."""
        if self._consumer is None:
            config = {**self.consumer_config, "enable.partition.eof": True}
            config["error_cb"] = self._on_error
            self._consumer = ck.Consumer(config)
        return self._consumer

    @property
    def admin(self) -> AdminClient:
        """The admin client."""
        if self._admin is None:
            self._admin = AdminClient(self.config)
        return self._admin

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
                f"Could not {what}: no answer from the cluster at {self.description} within "
                f"{self.lookup_timeout.seconds:g} s ({self.lookup_timeout.setting}): {cause}"
            ) from None

    def close(self) -> None:
        """Close the consumer (it never committed anything); the admin client has nothing
        to close."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None

    # ----------------------------------------------------------------- layout

    def partitions(self) -> list[TopicPartition]:
        """The partitions of the cluster's metadata (of the topics without an error)."""
        consumer = self.consumer
        metadata = self._lookup(
            "list the topics",
            lambda: consumer.list_topics(timeout=self.lookup_timeout.seconds),
        )
        return sorted(
            TopicPartition(name, number)
            for name, topic in metadata.topics.items()
            if topic.error is None
            for number in topic.partitions
        )

    def topics(self) -> dict[str, TopicInfo]:
        """Topics from the metadata; overrides from DescribeConfigs (those set on the topic)."""
        timeout = self.lookup_timeout.seconds
        admin = self.admin
        metadata = self._lookup("list the topics", lambda: admin.list_topics(timeout=timeout))
        names = sorted(t for t in metadata.topics if not is_internal(t))
        out = {n: TopicInfo(n, len(metadata.topics[n].partitions)) for n in names}
        if not names:
            return out
        futures = admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names],
            request_timeout=timeout,
        )
        for resource, future in futures.items():
            entries = future.result(timeout=timeout)
            out[resource.name].configs.update(
                {
                    name: str(entry.value)
                    for name, entry in entries.items()
                    if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                    and entry.value is not None
                    and not entry.is_sensitive
                }
            )
        return out

    # ---------------------------------------------------------------- offsets

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The low and high watermarks, asked of the leader (never the cached ones)."""
        consumer = self.consumer
        low, high = self._lookup(
            f"look up the offsets of {TopicPartition(topic, partition)}",
            lambda: consumer.get_watermark_offsets(
                ck.TopicPartition(topic, partition),
                timeout=self.lookup_timeout.seconds,
                cached=False,
            ),
        )
        return int(low), int(high)

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
            lambda: consumer.offsets_for_times(request, timeout=self.lookup_timeout.seconds),
        )
        out: dict[TopicPartition, int | None] = {}
        for item in answer:
            if item.error is not None:
                raise ck.KafkaException(item.error)
            out[TopicPartition(item.topic, item.partition)] = (
                int(item.offset) if item.offset >= 0 else None
            )
        return out

    # ---------------------------------------------------------------- records

    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        until: int,
        *,
        headers: bool = True,
        lost: LostCallback | None = None,
    ) -> Iterator[Chunk]:
        """Fetch ``[start, until)`` with ``assign``; one :class:`Rows` per ``consume()``."""
        tp = TopicPartition(topic, partition)
        low, high = self.bounds(topic, partition)
        start, until = clip(tp, start, until, low, high, lost)
        if start >= until:
            return
        consumer = self.consumer
        consumer.assign([ck.TopicPartition(topic, partition, start)])
        try:
            yield from self._fetch(consumer, tp, start, until, headers)
        finally:
            consumer.unassign()

    def _fetch(
        self, consumer: ck.Consumer, tp: TopicPartition, start: int, until: int, headers: bool
    ) -> Iterator[Rows]:
        types = _TIMESTAMP_TYPES
        eof = ck.KafkaError._PARTITION_EOF
        seconds = self.read_timeout.seconds
        next_offset = start
        deadline = time.monotonic() + seconds
        while next_offset < until:
            # consume(n) waits until n messages or the timeout: ask for no more than the
            # range still needs, and poll briefly, so the end of a range costs no wait.
            messages = consumer.consume(min(_CONSUME_BATCH, until - next_offset), timeout=_POLL_S)
            if not messages:
                if time.monotonic() > deadline:
                    # consume() served the error callback: say why, when librdkafka said.
                    cause = f": {self._cause}" if self._cause else ""
                    raise ReadTimeoutError(
                        f"Timed out after {seconds:g} s reading {tp} at offset {next_offset} "
                        f"({self.read_timeout.setting}){cause}"
                    )
                continue
            deadline = time.monotonic() + seconds
            self._cause = None  # records came: an earlier connection error is over
            rows = Rows()
            offsets, timestamps, timestamp_types = (
                rows.offsets,
                rows.timestamps,
                rows.timestamp_types,
            )
            keys, values, header_lists = rows.keys, rows.values, rows.headers
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
                offsets.append(offset)
                timestamps.append(timestamp)
                timestamp_types.append(types.get(ts_type, NO_TIMESTAMP_TYPE))
                keys.append(message.key())
                values.append(message.value())
                if headers:
                    header_lists.append(message.headers() or None)  # type: ignore[arg-type]
                next_offset = offset + 1
            if len(rows):
                yield rows
            if done:
                break

    # ----------------------------------------------------------------- groups

    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of the matching groups (ListGroups, then OffsetFetch each)."""
        timeout = self.lookup_timeout.seconds
        listed = self.admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
        out: dict[str, dict[tuple[str, int], int]] = {}
        for listing in listed.valid:
            group = listing.group_id
            if not groups.fullmatch(group):
                continue
            futures = self.admin.list_consumer_group_offsets(
                [ck.ConsumerGroupTopicPartitions(group)], request_timeout=timeout
            )
            result = futures[group].result(timeout=timeout)
            offsets = {
                (tp.topic, tp.partition): tp.offset
                for tp in result.topic_partitions
                if tp.offset >= 0 and tp.error is None
            }
            if offsets:
                out[group] = offsets
        return out
