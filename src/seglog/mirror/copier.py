"""Copy topics and translate group offsets from a source to a Kafka-protocol target.

Theory of operation, for each partition of each mirrored topic:

1. **Plan.** The topic is created on the target with the source's partition
   count and topic config overrides (but Kafka's ``internal.*`` test settings
   and replication throttles); an existing topic is used as it is, if it has
   at least as many partitions. Partitions added at the source later are
   added at the target.
2. **Resume.** The offset map (:mod:`seglog.mirror.offset_map`) says up to
   which target offset the records are known. Anything the target holds past
   that (what a killed run delivered after its last save, or a whole earlier
   run whose map was lost) is read back and matched, record by record and in
   order, against the source from the map's position on: each match is
   added to the map. So nothing already in the target is produced again, and
   the copy resumes right after the last record the target holds.
3. **Copy.** The source's records from the map's position to its current end
   go, in order, to the same partition number through one idempotent
   producer; each delivery report (which carries the target offset) extends
   the map, saved at most every ``save_interval`` seconds and at the end.
4. **Groups.** Each matching group's committed offsets are translated through
   the map and committed on the target, only while the target group has no
   members (a consumer already moved there owns its position), and never
   backwards (a target group already further on keeps its offset). A commit
   of a record that compaction removed from the source maps to the next
   record and is reported.

With ``follow`` steps 1 to 4 repeat until stopped, picking up new topics,
new records and new commits.

Two records match when key, value and headers are equal and, unless the
topic uses LogAppendTime (the target then sets its own), the timestamps too.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from seglog.errors import SeglogError
from seglog.mirror.offset_map import OffsetMap, PartitionMap
from seglog.mirror.source import Source, SourceTopic
from seglog.mirror.target import Target
from seglog.records.record import Record
from seglog.topic_source.broker import ClusterUnreachableError

__all__ = [
    "InexactTranslation",
    "LagRow",
    "Mirror",
    "MirrorReport",
    "Observer",
]

_TIMESTAMP_TYPE = "message.timestamp.type"
# Topic configs that are not carried over: Kafka's internal test settings (tiny
# segments) and replication throttles, which name the source's broker ids.
_NOT_COPIED = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_NOT_COPIED_PREFIX = "internal."
_LOG_APPEND_TIME = "LogAppendTime"
# Records between checks of the stop flag and of the save interval.
_CHECK_EVERY = 256


@dataclass(frozen=True)
class LagRow:
    """One partition's line of the lag table."""

    topic: str
    partition: int
    source_end: int
    target_end: int
    behind: int


@dataclass(frozen=True)
class InexactTranslation:
    """A committed offset whose record is not in the source: mapped to the next record."""

    group: str
    topic: str
    partition: int
    source: int
    target: int


@dataclass
class MirrorReport:
    """What a mirror run did."""

    topics: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    partitions: int = 0
    records: int = 0
    bytes: int = 0
    resumed: int = 0
    seconds: float = 0.0
    groups: dict[str, int] = field(default_factory=dict)
    skipped_groups: dict[str, str] = field(default_factory=dict)
    inexact: list[InexactTranslation] = field(default_factory=list)
    log_append_time: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Observer:
    """Hooks a user interface overrides to show progress; each does nothing here."""

    def partition_started(self, topic: str, partition: int, start: int, end: int) -> None:
        """The copy of ``[start, end)`` of a partition begins."""

    def copied(self, topic: str, partition: int, records: int, nbytes: int) -> None:
        """``records`` more records (``nbytes`` of keys, values and headers) were queued."""

    def partition_done(self, topic: str, partition: int) -> None:
        """The partition is copied up to the end seen when it started."""

    def lag(self, rows: list[LagRow]) -> None:
        """The lag of every partition, after each round of ``follow``."""

    def note(self, text: str) -> None:
        """Something the user should know (a skipped group, an inexact translation...)."""


def _record_bytes(rec: Record) -> int:
    size = len(rec.key or b"") + len(rec.value or b"")
    for header in rec.headers:
        size += len(header.key) + len(header.value or b"")
    return size


def _same(a: Record, b: Record, compare_time: bool) -> bool:
    return (
        a.key == b.key
        and a.value == b.value
        and a.headers == b.headers
        and (not compare_time or a.timestamp < 0 or a.timestamp == b.timestamp)
    )


class Mirror:
    """One mirror from ``source`` to ``target``, keeping ``offsets`` (its map) up to date."""

    def __init__(
        self,
        source: Source,
        target: Target,
        offsets: OffsetMap,
        *,
        topics: str = ".*",
        groups: str = ".*",
        max_rate: float | None = None,
        save_interval: float = 1.0,
        observer: Observer | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.source = source
        self.target = target
        self.offsets = offsets
        try:
            self.topic_pattern = re.compile(topics)
            self.group_pattern = re.compile(groups)
        except re.error as exc:
            raise SeglogError(f"bad regular expression: {exc}") from None
        self.max_rate = max_rate
        self.save_interval = save_interval
        self.observer = observer or Observer()
        self.stop = stop or threading.Event()
        self.report = MirrorReport()
        self._topics: dict[str, SourceTopic] = {}
        self._resumed: set[tuple[str, int]] = set()
        self._failed: set[str] = set()
        self._reported: set[tuple[str, str, int, int]] = set()
        self._last_save = time.monotonic()
        # Set when the first record is copied: the time spent starting (reading
        # the source's layout, reaching the target) is no credit for a burst.
        self._rate_start: float | None = None
        self._rate_count = 0

    # --------------------------------------------------------------- driving

    def run(self, *, follow: bool = False, interval: float = 1.0) -> MirrorReport:
        """Copy everything and translate the groups; with ``follow``, repeat until stopped."""
        started = time.monotonic()
        try:
            while True:
                try:
                    self.copy_once()
                    self.translate_groups()
                    if follow:
                        self.observer.lag(self.lag_rows())
                except (KafkaException, ClusterUnreachableError) as exc:
                    if not follow:
                        raise
                    # Following outlives a broker restart: what was queued is settled
                    # and every partition matched against the target again, so that
                    # nothing is produced twice, then the next round retries.
                    self.observer.note(f"round failed, retrying: {exc}")
                    self.target.flush()
                    self._resumed.clear()
                if not follow or self.stop.wait(interval):
                    break
        finally:
            self.offsets.save()
            self.report.seconds = time.monotonic() - started
        return self.report

    def copy_once(self) -> None:
        """Plan the topics, then copy every partition up to the source's current end."""
        for topic in self.plan():
            for partition in range(topic.partitions):
                if self.stop.is_set():
                    return
                try:
                    self._copy_partition(topic, partition)
                except ClusterUnreachableError:
                    raise  # not this partition's fault: the round fails (and is retried)
                except SeglogError as exc:
                    # Matched against the target again before a retry (--follow).
                    self._resumed.discard((topic.name, partition))
                    self._error(f"{topic.name}-{partition}: {exc}")

    def _fail(self, topic: str, message: str) -> None:
        """A topic that cannot be mirrored at all: left out from now on."""
        self._failed.add(topic)
        self._error(message)

    def _error(self, message: str) -> None:
        if message not in self.report.errors:  # a retry that fails again says nothing new
            self.report.errors.append(message)
            self.observer.note(f"error: {message}")

    # ---------------------------------------------------------------- topics

    def plan(self) -> list[SourceTopic]:
        """The source topics to mirror, each present on the target (created if missing)."""
        wanted = [
            t
            for name, t in self.source.topics().items()
            if self.topic_pattern.fullmatch(name) and name not in self._failed
        ]
        fresh = [t for t in wanted if t.name not in self._topics]
        known = self._topics
        grown = [t for t in wanted if t.name in known and t.partitions > known[t.name].partitions]
        for topic in grown:
            # Partitions added at the source while following: add them at the target too.
            try:
                self.target.add_partitions(topic.name, topic.partitions)
            except SeglogError as exc:
                self._fail(topic.name, str(exc))
                continue
            self._topics[topic.name] = topic
        if fresh:
            existing = self.target.partition_counts()
            for topic in fresh:
                count = existing.get(topic.name)
                if count is None:
                    configs = {
                        k: v
                        for k, v in topic.configs.items()
                        if k not in _NOT_COPIED and not k.startswith(_NOT_COPIED_PREFIX)
                    }
                    try:
                        self.target.create_topic(topic.name, topic.partitions, configs)
                    except SeglogError as exc:
                        self._fail(topic.name, str(exc))
                        continue
                    self.report.created.append(topic.name)
                elif count < topic.partitions:
                    self._fail(
                        topic.name,
                        f"topic {topic.name!r} has {count} partitions on the target but "
                        f"{topic.partitions} on the source: add partitions to it first",
                    )
                    continue
                if topic.configs.get(_TIMESTAMP_TYPE) == _LOG_APPEND_TIME:
                    self.report.log_append_time.append(topic.name)
                    self.observer.note(
                        f"{topic.name} uses LogAppendTime: the target sets the timestamps"
                    )
                self._topics[topic.name] = topic
                self.report.topics.append(topic.name)
        self.report.partitions = sum(t.partitions for t in self._topics.values())
        return [self._topics[t.name] for t in wanted if t.name in self._topics]

    # ---------------------------------------------------------------- resume

    def _resume(self, topic: SourceTopic, partition: int, pm: PartitionMap) -> None:
        """Match what the target holds past the map against the source (see step 2)."""
        name = topic.name
        low, high = self.target.bounds(name, partition)
        start = low if pm.target_next is None else pm.target_next
        if high < start:
            raise SeglogError(
                f"the target ends at offset {high} but the offset map says it holds records "
                f"up to {start - 1}: was the topic deleted or truncated there?"
            )
        if high > start:
            compare_time = topic.configs.get(_TIMESTAMP_TYPE) != _LOG_APPEND_TIME
            _, source_end = self.source.bounds(name, partition)
            source = _Lookahead(self.source.records(name, partition, pm.position, source_end))
            matched = unmatched = 0
            for held in self.target.records(name, partition, start, high):
                found = source.take_match(held, compare_time)
                if found is None:
                    unmatched += 1
                    continue
                pm.add(found.offset, held.offset)
                matched += 1
            if unmatched and not matched:
                raise SeglogError(
                    f"the target holds {unmatched} record(s) from offset {start} on that are "
                    "not in the source: is another producer writing to it?"
                )
            if unmatched:
                self.observer.note(
                    f"{name}-{partition}: {unmatched} record(s) of the target match no "
                    "source record (removed by compaction since they were copied?)"
                )
            self.report.resumed += matched
        if pm.target_next is None:
            pm.target_next = high

    # ------------------------------------------------------------------ copy

    def _copy_partition(self, topic: SourceTopic, partition: int) -> None:
        name = topic.name
        pm = self.offsets.partition(name, partition)
        source_start, source_end = self.source.bounds(name, partition)
        if pm.target_next is None and pm.position < source_start:
            pm.position = source_start  # a new partition map starts at the log start
        if (name, partition) not in self._resumed:
            self._resume(topic, partition, pm)
            self._resumed.add((name, partition))
        if pm.position < source_start:
            self.observer.note(
                f"{name}-{partition}: offsets {pm.position} to {source_start - 1} were deleted "
                "from the source before they were copied"
            )
            pm.position = source_start
        if pm.position >= source_end:
            return
        self.observer.partition_started(name, partition, pm.position, source_end)
        errors: list[str] = []

        def delivered(source_offset: int) -> Any:
            def callback(error: Any, msg: Any) -> None:
                if error is not None:
                    errors.append(error.str())
                elif not errors:
                    pm.add(source_offset, msg.offset())

            return callback

        records = nbytes = 0
        stopped = False
        if self._rate_start is None:
            self._rate_start = time.monotonic()
        for rec in self.source.records(name, partition, pm.position, source_end):
            self.target.produce(name, partition, rec, delivered(rec.offset))
            records += 1
            nbytes += _record_bytes(rec)
            if records % _CHECK_EVERY == 0:
                self.target.poll(0)
                self.observer.copied(name, partition, records, nbytes)
                self._account(records, nbytes)
                records = nbytes = 0
                if errors:
                    break
                self._throttle()
                self._save_if_due()
                if self.stop.is_set():
                    stopped = True
                    break
        self._account(records, nbytes)
        self.observer.copied(name, partition, records, nbytes)
        self.target.flush()
        if errors:
            self.offsets.save()
            raise SeglogError(f"the target refused a record: {errors[0]}")
        if not stopped:
            # Every record below the end is in the target, or was never there.
            pm.position = max(pm.position, source_end)
        self.offsets.save()
        self._last_save = time.monotonic()
        self.observer.partition_done(name, partition)

    def _account(self, records: int, nbytes: int) -> None:
        self.report.records += records
        self.report.bytes += nbytes
        self._rate_count += records

    def _throttle(self) -> None:
        if not self.max_rate or self._rate_start is None:
            return
        ahead = self._rate_count / self.max_rate - (time.monotonic() - self._rate_start)
        if ahead > 0:
            self.target.poll(ahead)  # serve delivery reports while waiting

    def _save_if_due(self) -> None:
        now = time.monotonic()
        if now - self._last_save >= self.save_interval:
            self.offsets.save()
            self._last_save = now

    # ---------------------------------------------------------------- groups

    def translate_groups(self) -> None:
        """Commit each matching group's translated offsets on the target (see step 4)."""
        committed = self.source.committed(self.group_pattern)
        for group, offsets in sorted(committed.items()):
            translated: dict[tuple[str, int], int] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                pm = self.offsets.partitions.get((topic, partition))
                if topic not in self._topics or pm is None:
                    continue
                found = pm.translate(offset)
                if found is None:
                    continue  # the copy has not reached it yet
                translated[(topic, partition)] = found.target
                if not found.exact and (group, topic, partition, offset) not in self._reported:
                    self._reported.add((group, topic, partition, offset))
                    inexact = InexactTranslation(group, topic, partition, offset, found.target)
                    self.report.inexact.append(inexact)
                    self.observer.note(
                        f"group {group}: {topic}-{partition} offset {offset} has no record in the "
                        f"source (compacted away); mapped to the next record, {found.target}"
                    )
            if not translated:
                continue
            members = self.target.group_members(group)
            if members:
                reason = f"{members} active member(s) on the target"
                if self.report.skipped_groups.get(group) != reason:
                    self.observer.note(f"group {group} not committed: {reason}")
                self.report.skipped_groups[group] = reason
                continue
            self.report.skipped_groups.pop(group, None)
            current = self.target.committed(group)
            forward = {tp: o for tp, o in translated.items() if current.get(tp, -1) < o}
            if forward:
                self.target.commit(group, forward)
            self.report.groups[group] = len(translated)

    # ------------------------------------------------------------------- lag

    def lag_rows(self) -> list[LagRow]:
        """Source end, target end and offsets not yet copied, per mirrored partition."""
        rows = []
        for name, topic in sorted(self._topics.items()):
            for partition in range(topic.partitions):
                _, source_end = self.source.bounds(name, partition)
                _, target_end = self.target.bounds(name, partition)
                pm = self.offsets.partitions.get((name, partition))
                position = pm.position if pm is not None else 0
                behind = max(0, source_end - position)
                rows.append(LagRow(name, partition, source_end, target_end, behind))
        return rows


class _Lookahead:
    """The source's records with the ones read but not yet matched kept aside."""

    def __init__(self, records: Iterator[Record]) -> None:
        self._records = records
        self._buffer: deque[Record] = deque()

    def take_match(self, held: Record, compare_time: bool) -> Record | None:
        """The first record matching ``held``, dropping those before it; None if none does
        (and then nothing is dropped)."""
        for i, rec in enumerate(self._buffer):
            if _same(rec, held, compare_time):
                for _ in range(i + 1):
                    self._buffer.popleft()
                return rec
        for rec in self._records:
            if _same(rec, held, compare_time):
                self._buffer.clear()
                return rec
            self._buffer.append(rec)
        return None
