"""The cluster a mirror copies into, through confluent-kafka (librdkafka).

Records go through one idempotent producer (``enable.idempotence``,
``acks=all``): librdkafka numbers each partition's batches, the broker drops
a batch it already has, and retries keep the order, so the target holds the
records of one run exactly once and in the order they were produced. What a
run killed mid-copy had in flight is found again by reading the target's
tail (:mod:`seglog.mirror.copier`); nothing is produced twice because of it.

Group offsets are written with the admin API (OffsetCommit under the group's
id), which a broker accepts only while the group has no members; the mirror
checks the group's state first so that it can report why it skipped one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

# Re-exported without ``as`` (mypy strict does not count it); a documented public name.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
    NewTopic,
)

from seglog.errors import SeglogError
from seglog.mirror.source import BrokerSource
from seglog.records.record import Record

__all__ = ["Target", "producer_defaults"]

DeliveryCallback = Callable[[Any, Any], None]

_UNKNOWN_PARTITION = KafkaError._UNKNOWN_PARTITION
# What a broker or librdkafka answers for a topic or partition it does not know (yet).
_UNKNOWN = {
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
}


def producer_defaults() -> dict[str, Any]:
    """The producer settings a mirror needs: idempotence, and the order kept on retries."""
    return {
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5,
        "message.timeout.ms": 300_000,
        # Any record the source holds: librdkafka's own 1 MB limit would refuse one that a
        # topic with a larger max.message.bytes (the registry's _schemas: 32 MiB) took;
        # the target broker's limit is the one that decides.
        "message.max.bytes": 1_000_000_000,
    }


class Target:
    """Topics, records and group offsets of the target cluster."""

    def __init__(self, config: Mapping[str, Any], timeout: float = 30.0) -> None:
        self.config = dict(config)
        self.description = str(self.config.get("bootstrap.servers"))
        self.timeout = timeout
        self._admin = AdminClient(self.config)
        self._reader = BrokerSource(self.config, timeout)
        self._producer = Producer({**producer_defaults(), **self.config})

    # ------------------------------------------------------------- topics

    def partition_counts(self) -> dict[str, int]:
        """The partition count of every topic the target has."""
        metadata = self._admin.list_topics(timeout=self.timeout)
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """CreateTopics with the broker's default replication; an existing topic is fine."""
        new = NewTopic(name, num_partitions=partitions, config=dict(configs))
        future = self._admin.create_topics([new], request_timeout=self.timeout)[name]
        try:
            future.result(timeout=self.timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            where = f"topic {name!r} on {self.description}"
            raise SeglogError(f"cannot create {where}: {exc}") from None

    def add_partitions(self, name: str, total: int) -> None:
        """CreatePartitions up to ``total``; nothing when the topic has that many already."""
        if self.partition_counts().get(name, 0) >= total:
            return
        future = self._admin.create_partitions(
            [NewPartitions(name, total)], request_timeout=self.timeout
        )[name]
        try:
            future.result(timeout=self.timeout)
        except KafkaException as exc:
            where = f"partitions of {name!r} on {self.description}"
            raise SeglogError(f"cannot add {where}: {exc}") from None

    # ------------------------------------------------------------ records

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The low and high watermarks of a partition.

        A partition just created (by the mirror itself) may be missing from
        the client's cached metadata: it is asked for again until the timeout.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._reader.bounds(topic, partition)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                unknown = isinstance(error, KafkaError) and error.code() in _UNKNOWN
                if not unknown or time.monotonic() >= deadline:
                    raise
                self._reader.consumer.list_topics(topic, timeout=self.timeout)
                time.sleep(0.05)

    def records(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """The records the target holds in ``[start, end)``."""
        return self._reader.records(topic, partition, start, end)

    def produce(
        self, topic: str, partition: int, rec: Record, on_delivery: DeliveryCallback
    ) -> None:
        """Queue one record for its partition, with its key, value, headers and timestamp.

        A full local queue is drained by serving delivery reports until there is room.
        """
        headers: list[tuple[str, str | bytes | None]] | None = [
            (h.key, h.value) for h in rec.headers
        ] or None
        # A record without a timestamp (magic 0) gets the target's clock, as Kafka does.
        timestamp = rec.timestamp if rec.timestamp >= 0 else 0
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._producer.produce(
                    topic,
                    value=rec.value,
                    key=rec.key,
                    partition=partition,
                    timestamp=timestamp,
                    headers=headers,
                    on_delivery=on_delivery,
                )
                return
            except BufferError:
                self._producer.poll(0.1)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                unknown = isinstance(error, KafkaError) and error.code() == _UNKNOWN_PARTITION
                if not unknown or time.monotonic() >= deadline:
                    raise
                # A partition the mirror just added: not yet in the producer's metadata.
                self._wait_for_partition(topic, partition)

    def _wait_for_partition(self, topic: str, partition: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            metadata = self._producer.list_topics(topic, timeout=self.timeout)
            described = metadata.topics.get(topic)
            if described is not None and partition in described.partitions:
                return
            time.sleep(0.05)
        raise SeglogError(f"partition {partition} of {topic!r} is not in the target's metadata")

    def poll(self, timeout: float = 0.0) -> None:
        """Serve the delivery reports that have arrived."""
        self._producer.poll(timeout)

    def flush(self) -> None:
        """Wait until every queued record is delivered or has failed."""
        while self._producer.flush(self.timeout) > 0:
            pass

    # ------------------------------------------------------------- groups

    def group_members(self, group: str) -> int:
        """How many members the group has on the target (0 for an unknown or empty group)."""
        future = self._admin.describe_consumer_groups([group], request_timeout=self.timeout)[group]
        description = future.result(timeout=self.timeout)
        if description.state in (ConsumerGroupState.DEAD, ConsumerGroupState.EMPTY):
            return 0
        return len(description.members)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets on the target."""
        request = [ConsumerGroupTopicPartitions(group)]
        future = self._admin.list_consumer_group_offsets(request, request_timeout=self.timeout)
        result = future[group].result(timeout=self.timeout)
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions
            if tp.offset >= 0 and tp.error is None
        }

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` for ``group`` (refused by the broker if it has members)."""
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        futures = self._admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        result = futures[group].result(timeout=self.timeout)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise SeglogError(
                f"cannot commit offsets of group {group!r}: "
                + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )

    def close(self) -> None:
        """Deliver what is queued and close the clients."""
        try:
            self.flush()
        finally:
            # Closed now, not when collected: a producer left to the garbage
            # collector keeps reconnecting to a target that has gone away.
            self._producer.close()
            self._reader.close()
