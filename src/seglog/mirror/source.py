"""Where a mirror reads from: a log directory on this machine, or a running broker.

Both sources answer the same four questions (:class:`Source`): which topics
exist, with how many partitions and which config overrides; where each
partition starts and ends; the records of a partition from an offset on, in
order, with their offsets; and the offsets consumer groups have committed.

:class:`LogDirSource` reads the files read-only through
:mod:`seglog.storage.reader` (the directory may belong to a running broker,
seglog's or Kafka's). Committed offsets come from the partitions of
``__consumer_offsets``, decoded with the record layout
:mod:`seglog.coordinator.offset_store` owns. :class:`BrokerSource` asks any
Kafka-protocol broker through confluent-kafka.

Control batches (transaction markers) are never records: their offsets are
gaps in what a source yields, like the offsets compaction removed. Both
sources read as a read_committed consumer does: a partition ends at its last
stable offset (the undecided data of an open transaction waits for its
marker) and the records of aborted transactions are left out. A broker does
so for librdkafka's default ``isolation.level``; a log directory through the
``.txnindex`` files and producer snapshots (:mod:`seglog.storage.reader`, as
Spark's files mode reads them). Committed offsets of a log directory count
those of a transaction only once it committed, as the group coordinator does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

# confluent-kafka re-exports these without ``as``, which mypy's strict mode does not
# count as an export; they are its documented public names all the same.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
)

from seglog.coordinator import offset_store
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import legacy
from seglog.records import record as record_codec
from seglog.records.record import Record
from seglog.storage import filenames, reader

__all__ = [
    "BrokerSource",
    "LogDirSource",
    "Source",
    "SourceTopic",
    "is_internal",
]

# Kafka's own topics and seglog's: never mirrored as data (group offsets are
# translated instead).
_INTERNAL_PREFIX = "__"


# What a broker or librdkafka answers for a topic or partition it does not know (yet).
_UNKNOWN = {
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
}


def is_internal(topic: str) -> bool:
    """True for internal topics (``__consumer_offsets`` and the like)."""
    return topic.startswith(_INTERNAL_PREFIX)


@dataclass(frozen=True)
class SourceTopic:
    """A topic to mirror: its partition count and its topic-level config overrides."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class Source(Protocol):
    """What a mirror needs of the cluster it copies from."""

    description: str

    def topics(self) -> dict[str, SourceTopic]:
        """Every non-internal topic."""
        ...

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of a partition."""
        ...

    def records(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """The records with offsets in ``[start, end)``, in order."""
        ...

    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The committed offsets of the groups whose id matches, by (topic, partition)."""
        ...

    def close(self) -> None:
        """Release what the source holds open."""
        ...


# ---------------------------------------------------------------- log directory


class LogDirSource:
    """A log directory read in place, read-only."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SeglogError(f"{self.root} is not a log directory")
        self.description = str(self.root)

    def topics(self) -> dict[str, SourceTopic]:
        """The partition directories, with seglog's topic definitions where it has them.

        A directory written by Kafka has no definitions file: the partition
        count is then the highest partition directory plus one, and the
        overrides are unknown (empty).
        """
        defined = reader.topic_definitions(self.root)
        seen: dict[str, int] = {}
        for topic, partition in reader.partition_dirs(self.root):
            seen[topic] = max(seen.get(topic, 0), partition + 1)
        out: dict[str, SourceTopic] = {}
        for name in sorted(set(seen) | set(defined)):
            if is_internal(name):
                continue
            spec = defined.get(name)
            count = max(seen.get(name, 0), spec.partitions if spec else 0)
            out[name] = SourceTopic(name, count, dict(spec.configs) if spec else {})
        return out

    def _partition(self, topic: str, partition: int) -> reader.PartitionReader:
        directory = self.root / filenames.partition_dir_name(topic, partition)
        try:
            return reader.PartitionReader(directory)
        except FileNotFoundError:
            raise SeglogError(f"{topic}-{partition} is not a partition of {self.root}") from None

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The first segment's base (raised to the log start checkpoint) and the last
        stable offset (the tail when no transaction is open)."""
        try:
            part = self._partition(topic, partition)
        except SeglogError:
            return 0, 0  # defined but never written
        end = reader.last_stable_offset(part, part.next_offset())
        first = part.bases[0] if part.bases else 0
        start = reader.log_start_offsets(self.root).get((topic, partition), 0)
        return min(max(first, start), end), end

    def records(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """The committed records of ``[start, end)``, segment by segment from the offset
        index's position; ``end`` is at most the last stable offset."""
        part = self._partition(topic, partition)
        end = min(end, reader.last_stable_offset(part, part.next_offset()))
        yield from _partition_records(part, start, end, reader.AbortedTransactions(part, start))

    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """The last commit of each (group, topic, partition) in ``__consumer_offsets``.

        A null value (a deleted offset or group) removes what came before it,
        as the coordinator does when it loads the topic.
        """
        out: dict[str, dict[tuple[str, int], int]] = {}
        dirs = reader.partition_dirs(self.root)
        for (topic, _), directory in sorted(dirs.items()):
            if topic != offset_store.TOPIC:
                continue
            part = reader.PartitionReader(directory)
            end = part.next_offset()
            # Offsets of an open transaction are not committed yet (the coordinator
            # holds them until the marker); those after it are.
            undecided = reader.open_transactions(part, end)
            aborted = reader.AbortedTransactions(part, 0)
            for rec in _partition_records(part, 0, end, aborted, undecided):
                if rec.key is None:
                    continue
                try:
                    key = offset_store.parse_key(rec.key)
                except CorruptRecordError:
                    continue  # a record kind this version does not know (KIP-848...)
                if isinstance(key, str):
                    if rec.value is None:
                        out.pop(key, None)  # the whole group was deleted
                    continue
                group, t, p = key
                if not groups.fullmatch(group):
                    continue
                if rec.value is None:
                    out.get(group, {}).pop((t, p), None)
                    continue
                try:
                    value = offset_store.parse_offset_value(rec.value)
                except CorruptRecordError:
                    continue
                out.setdefault(group, {})[(t, p)] = value.offset
        return {group: offsets for group, offsets in out.items() if offsets}

    def close(self) -> None:
        """Nothing is held open between calls."""


def _partition_records(
    part: reader.PartitionReader,
    start: int,
    end: int,
    aborted: reader.AbortedTransactions,
    undecided: dict[int, int] | None = None,
) -> Iterator[Record]:
    """The records of ``[start, end)`` but markers, aborted transactions' and those of
    ``undecided`` (open transactions: producer id → first offset)."""
    for base in part.segments_between(start, end):
        try:
            segment = part.open_segment(base)
        except FileNotFoundError:
            continue  # retention removed it since the listing: its records are gone
        with segment:
            position = segment.position_for(start) if base <= start else 0
            for entry in segment.read_entries(position):
                header = entry.header
                if header is not None:
                    if header.next_offset <= start:
                        continue
                    if header.base_offset >= end:
                        return
                    if header.is_control or aborted.holds(header):
                        continue
                    if (
                        undecided
                        and header.is_transactional
                        and header.base_offset >= undecided.get(header.producer_id, end)
                    ):
                        continue
                    decoded = record_codec.decode_records(entry.buffer, entry.start)
                else:
                    decoded = legacy.decode_legacy(entry.data)
                for rec in decoded:
                    if rec.offset >= end:
                        return
                    if rec.offset >= start:
                        yield rec


# ---------------------------------------------------------------------- broker


class BrokerSource:
    """Any Kafka-protocol broker, read with confluent-kafka (no consumer group)."""

    def __init__(self, config: dict[str, Any], timeout: float = 30.0) -> None:
        self.description = str(config.get("bootstrap.servers"))
        self.timeout = timeout
        self._config = config
        self._admin = AdminClient(config)
        self._consumer = Consumer(
            {
                **config,
                "group.id": "seglog-mirror-source",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )

    def topics(self) -> dict[str, SourceTopic]:
        """Topics from the metadata; overrides from DescribeConfigs (those set on the topic)."""
        metadata = self._admin.list_topics(timeout=self.timeout)
        names = sorted(t for t in metadata.topics if not is_internal(t))
        out = {n: SourceTopic(n, len(metadata.topics[n].partitions)) for n in names}
        if not names:
            return out
        futures = self._admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names],
            request_timeout=self.timeout,
        )
        for resource, future in futures.items():
            entries = future.result(timeout=self.timeout)
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

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The low and high watermarks.

        A partition just created (by the mirror itself) may be missing from
        the client's cached metadata: it is asked for again until the timeout.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.timeout
                )
                return int(low), int(high)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                unknown = isinstance(error, KafkaError) and error.code() in _UNKNOWN
                if not unknown or time.monotonic() >= deadline:
                    raise
                self._consumer.list_topics(topic, timeout=self.timeout)
                time.sleep(0.05)

    def records(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """Fetched from ``start`` until the first offset at or past ``end``."""
        if start >= end:
            return
        self._consumer.assign([TopicPartition(topic, partition, start)])
        try:
            idle_since = time.monotonic()
            while True:
                # consume() waits for its whole count or its timeout: short waits, so
                # that a partition's last few records are not held back.
                messages = self._consumer.consume(1000, timeout=0.05)
                if not messages:
                    if time.monotonic() - idle_since > self.timeout:
                        raise SeglogError(
                            f"no record of {topic}-{partition} arrived from {self.description} "
                            f"within {self.timeout:g}s"
                        )
                    continue
                idle_since = time.monotonic()
                for msg in messages:
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            return  # the rest of [start, end) is gone (compaction, markers)
                        raise SeglogError(f"cannot read {topic}-{partition}: {error.str()}")
                    offset = msg.offset()
                    if offset is None or offset >= end:
                        return
                    yield _from_message(msg, offset)
                    if offset + 1 >= end:
                        return
        finally:
            self._consumer.unassign()

    def committed(self, groups: re.Pattern[str]) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of the matching groups (ListGroups, then OffsetFetch each)."""
        listed = self._admin.list_consumer_groups(request_timeout=self.timeout).result(
            timeout=self.timeout
        )
        out: dict[str, dict[tuple[str, int], int]] = {}
        for listing in listed.valid:
            group = listing.group_id
            if not groups.fullmatch(group):
                continue
            futures = self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
            )
            result = futures[group].result(timeout=self.timeout)
            offsets = {
                (tp.topic, tp.partition): tp.offset
                for tp in result.topic_partitions
                if tp.offset >= 0 and tp.error is None
            }
            if offsets:
                out[group] = offsets
        return out

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()


def _from_message(msg: Any, offset: int) -> Record:
    headers = tuple(
        record_codec.Header(key, None if value is None else bytes(value))
        for key, value in (msg.headers() or [])
    )
    _, timestamp = msg.timestamp()
    return Record(offset, timestamp, msg.key(), msg.value(), headers)
