"""The share-partitions this node leads: created on first use, fed from the log, persisted.

A share-partition (:class:`seglog.share.partition.SharePartition`) is one
share group's view of one partition. This module gives each its start (the
state the share coordinator kept, or the group's ``share.auto.offset.reset``
for a partition the group has never read), reads batch headers from the log
for it to acquire from — never the records: the client gets the batches'
bytes straight from the segment file and the acquired offset ranges beside
them — and writes what changed to ``__share_group_state`` before a request
that changed it is answered.

It runs on the broker's event loop, as the group coordinator does; lock
expiries come back on it through ``call_later``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from seglog.broker.share.persister import Persister
from seglog.config import duration_ms
from seglog.coordinator.requests import Cancellable
from seglog.errors import NotLeaderOrFollowerError, SeglogError, UnknownTopicOrPartitionError
from seglog.records.batch import BatchHeader
from seglog.share.partition import (
    AckBatch,
    AcquiredRange,
    ArchivedRange,
    FetchedBatch,
    SharePartition,
    ShareSettings,
)
from seglog.share.state import PersistedState, SharePartitionKey
from seglog.storage.log_dir import LogDir
from seglog.storage.region import FileRegion, region_batches, sub_region
from seglog.storage.txn_index import AbortedTxn

logger = logging.getLogger(__name__)

Key = tuple[str, int]
"""A partition by name: (topic, partition index)."""


@dataclass(frozen=True, slots=True)
class GroupShareSettings:
    """A share group's settings, its own over the broker's (group configs)."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    auto_offset_reset: str
    read_committed: bool
    dead_letter_topic: str
    dead_letter_copy_record: bool

    @property
    def partition(self) -> ShareSettings:
        """What a share-partition needs of them."""
        return ShareSettings(
            record_lock_duration_ms=self.record_lock_duration_ms,
            delivery_count_limit=self.delivery_count_limit,
            max_record_locks=self.max_record_locks,
        )


@dataclass(frozen=True, slots=True)
class Acquired:
    """What one partition gives a share fetch: the batches' bytes and the acquired ranges."""

    records: FileRegion | None
    ranges: list[AcquiredRange]


class SharePartitions:
    """Every share-partition of this node, by (group, topic, partition)."""

    def __init__(
        self,
        log_dir: LogDir,
        persister: Persister,
        *,
        settings: Callable[[str], GroupShareSettings],
        now_ms: Callable[[], int],
        call_later: Callable[[float, Callable[[], None]], Cancellable],
        wake: Callable[[list[Key]], None],
        dead_letter: Callable[[SharePartition, GroupShareSettings, list[ArchivedRange]], None]
        | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.persister = persister
        self._locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._settings = settings
        self._now_ms = now_ms
        self._call_later = call_later
        self._wake = wake
        self._dead_letter = dead_letter
        self._partitions: dict[tuple[str, str, int], SharePartition] = {}
        #: The counters of share-partitions no longer in memory, so that totals never fall.
        self.retired_counters: dict[str, int] = {}

    # ------------------------------------------------------------ lookup

    def partitions(self) -> list[SharePartition]:
        """Every share-partition in memory."""
        return list(self._partitions.values())

    def of_group(self, group_id: str) -> list[SharePartition]:
        """The share-partitions of ``group_id`` in memory."""
        return [sp for (group, _, _), sp in self._partitions.items() if group == group_id]

    def settings(self, group_id: str) -> GroupShareSettings:
        """``group_id``'s share settings now."""
        return self._settings(group_id)

    async def get(self, group_id: str, topic: str, partition: int) -> SharePartition:
        """The share-partition, loaded or initialized on first use.

        Raises UnknownTopicOrPartitionError for a partition the log directory
        does not have, StorageError when its state cannot be read or written.
        """
        found = self._partitions.get((group_id, topic, partition))
        info = self.log_dir.topic(topic)
        if found is not None:
            if info is not None and found.key.topic_id == info.topic_id:
                return found
            # Its topic was deleted (and perhaps made again: a new id, a new start).
            self._remove((group_id, topic, partition))
        if info is None or not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        if not self.log_dir.serves_partition(topic, partition):
            # Another node leads it (nodes mode): its share-partition lives there only.
            raise NotLeaderOrFollowerError(f"{topic}-{partition} is led by another node")
        key = SharePartitionKey(group_id, info.topic_id, partition)
        async with self._lock_of(key):
            found = self._partitions.get((group_id, topic, partition))
            if found is not None:
                return found  # made by another request while this one waited
            state = await self.persister.read(key)
            if state is None or state.start_offset < 0:
                start = self._reset_offset(group_id, topic, partition)
                state = await self.persister.initialize(key, start)
            share_partition = self._create(key, topic, state)
        log_start = self.log_dir.log(topic, partition).log_start_offset
        if share_partition.start_offset < log_start:
            share_partition.archive_below(log_start)
            await self.persist(share_partition)
        return share_partition

    async def initialize(self, group_id: str, partitions: Iterable[Key]) -> None:
        """Give ``group_id`` a start in each of ``partitions`` it has none in yet.

        Called when partitions enter a share group's assignment, so that
        ``latest`` means the end of the log when the group took the partition,
        not when a member first fetched from it.
        """
        for topic, partition in partitions:
            try:
                await self.get(group_id, topic, partition)
            except SeglogError as exc:
                logger.warning(
                    "cannot initialize share group %s on %s-%d: %s", group_id, topic, partition, exc
                )

    def _lock_of(self, key: SharePartitionKey) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _create(self, key: SharePartitionKey, topic: str, state: PersistedState) -> SharePartition:
        holder: list[SharePartition] = []

        def changed() -> None:
            if holder:
                self._on_change(holder[0])

        def schedule(delay_ms: int, callback: Callable[[], None]) -> Cancellable:
            return self._call_later(max(delay_ms, 0) / 1000, callback)

        group_id = key.group_id
        share_partition = SharePartition(
            key,
            topic,
            state,
            settings=lambda: self._settings(group_id).partition,
            now_ms=self._now_ms,
            schedule=schedule,
            on_change=changed,
        )
        holder.append(share_partition)
        self._partitions[(key.group_id, topic, key.partition)] = share_partition
        return share_partition

    def _reset_offset(self, group_id: str, topic: str, partition: int) -> int:
        """Where ``share.auto.offset.reset`` starts ``group_id`` in a partition it never read."""
        log = self.log_dir.log(topic, partition)
        reset = self._settings(group_id).auto_offset_reset.strip().lower()
        if reset == "earliest":
            return log.log_start_offset
        if reset.startswith("by_duration:"):
            span = duration_ms(reset.removeprefix("by_duration:").strip()) or 0
            found = log.find_offset_by_timestamp(self._now_ms() - span)
            return found.offset if found is not None else log.high_watermark
        return log.high_watermark

    # ------------------------------------------------------------ reading

    def acquire(
        self,
        share_partition: SharePartition,
        member_id: str,
        *,
        max_bytes: int,
        max_records: int,
    ) -> Acquired:
        """Acquire records of ``share_partition`` for ``member_id``: their batches and ranges."""
        topic, partition = share_partition.topic, share_partition.key.partition
        log = self.log_dir.log(topic, partition)
        if share_partition.start_offset < log.log_start_offset:
            share_partition.archive_below(log.log_start_offset)
        if not share_partition.can_acquire():
            return Acquired(None, [])
        settings = self._settings(share_partition.key.group_id)
        read_committed = settings.read_committed
        offset = share_partition.next_fetch_offset()
        end = log.last_stable_offset if read_committed else log.high_watermark
        if offset >= end:
            return Acquired(None, [])
        result = log.read(
            offset,
            max_bytes,
            max_offset=end if read_committed else None,
            min_one_message=True,
        )
        if result.data is None or result.data.region.length == 0:
            return Acquired(None, [])
        region = result.data.region
        try:
            # New batches are acquired only while the in-flight window is smaller than
            # max_record_locks, and the available records lie inside the window: the
            # first batch starting at or past both bounds is the last one acquire()
            # could take (after a hole). The headers beyond it are never read.
            stop = max(
                share_partition.end_offset,
                share_partition.start_offset + settings.max_record_locks,
            )
            headers = region_batches(region, stop)
            aborted = (
                _aborted_spans(log.aborted_transactions(offset, end)) if read_committed else {}
            )
            batches = [
                FetchedBatch(
                    header.base_offset,
                    header.last_offset,
                    header.is_control or (header.is_transactional and _in_spans(aborted, header)),
                )
                for _, header in headers
                if header.last_offset >= offset
            ]
            ranges = share_partition.acquire(member_id, batches, max_records)
            if not ranges:
                return Acquired(None, [])
            first, last = ranges[0].first_offset, ranges[-1].last_offset
            used = [
                (position, header)
                for position, header in headers
                if header.last_offset >= first and header.base_offset <= last
            ]
            start = used[0][0]
            stop = used[-1][0] + used[-1][1].size
            return Acquired(sub_region(region, start, stop), ranges)
        finally:
            region.release()

    # ------------------------------------------------------------ changes

    def acknowledge(
        self, share_partition: SharePartition, member_id: str, batches: list[AckBatch]
    ) -> str | None:
        """Apply ``member_id``'s acknowledgements; the error name, or None. Not yet persisted."""
        return share_partition.acknowledge(member_id, batches)

    def release_member(self, group_id: str, member_id: str, keys: Iterable[Key]) -> None:
        """Release what ``member_id`` holds in ``keys`` (its share session closed), at once;
        the state is written in the background."""
        keys = list(keys)
        for topic, partition in keys:
            share_partition = self._partitions.get((group_id, topic, partition))
            if share_partition is None:
                continue
            share_partition.release_member(member_id)
            self._in_background(share_partition, "a release")
        self._wake(keys)

    def _in_background(self, share_partition: SharePartition, why: str) -> None:
        """Persist ``share_partition`` from a task of its own (after a timer or a release)."""

        async def run() -> None:
            try:
                await self.persist(share_partition)
            except SeglogError as exc:
                logger.warning("cannot persist %s after %s: %s", share_partition.key, why, exc)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def persist(self, share_partition: SharePartition) -> None:
        """Write what changed in ``share_partition`` (raises StorageError), then dead letters.

        One write at a time per share-partition, in the order the changes were made.
        """
        async with self._lock_of(share_partition.key):
            update = share_partition.take_update()
            if update is not None:
                await self.persister.write(share_partition.key, update)
        archived = share_partition.take_archived()
        if archived and self._dead_letter is not None:
            settings = self._settings(share_partition.key.group_id)
            if settings.dead_letter_topic:
                try:
                    self._dead_letter(share_partition, settings, archived)
                except Exception:
                    logger.exception("cannot dead-letter records of %s", share_partition.key)

    def _on_change(self, share_partition: SharePartition) -> None:
        """A lock expired: wake the fetches that may now acquire; persist in the background."""
        self._in_background(share_partition, "a lock expired")
        self._wake([(share_partition.topic, share_partition.key.partition)])

    async def reset(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """Start ``group_id`` over at ``start_offset`` in the partition (AlterShareGroupOffsets)."""
        share_partition = await self.get(group_id, topic, partition)
        async with self._lock_of(share_partition.key):
            share_partition.reset(start_offset)
            # A fresh state, not an update: a folded update never moves the start back.
            share_partition.take_update()
            await self.persister.initialize(share_partition.key, start_offset)

    async def forget_group(self, group_id: str) -> None:
        """Drop ``group_id``'s share-partitions and delete their state (DeleteGroups)."""
        self.drop(group_id, None)
        for key in await self.persister.keys_of(group_id):
            await self.persister.delete(key)

    async def forget_topic_of_group(self, group_id: str, topic: str) -> None:
        """Drop ``group_id``'s share-partitions of ``topic`` and delete their state."""
        self.drop(group_id, topic)
        info = self.log_dir.topic(topic)
        for key in await self.persister.keys_of(group_id):
            if info is not None and key.topic_id == info.topic_id:
                await self.persister.delete(key)

    def drop(self, group_id: str, topic: str | None) -> None:
        """Forget ``group_id``'s share-partitions (of ``topic``, or all) in memory only."""
        for group, name, partition in list(self._partitions):
            if group == group_id and topic in (None, name):
                self._remove((group, name, partition))

    def forget_partitions(self, keys: Iterable[Key]) -> None:
        """Drop every group's share-partitions of ``keys`` (no longer served here: deleted).

        Their state stays in ``__share_group_state`` under the old topic id; a topic
        made again under the same name has a new id, so a new start.
        """
        closed = set(keys)
        for entry in list(self._partitions):
            if entry[1:] in closed:
                self._remove(entry)

    def _remove(self, entry: tuple[str, str, int]) -> None:
        share_partition = self._partitions.pop(entry)
        share_partition.close()
        self._locks.pop(share_partition.key, None)
        for event, count in share_partition.counters.items():
            self.retired_counters[event] = self.retired_counters.get(event, 0) + count

    def close(self) -> None:
        """Cancel every lock timer (shutdown)."""
        for share_partition in self._partitions.values():
            share_partition.close()
        self._partitions.clear()


def _aborted_spans(aborted: Iterable[AbortedTxn]) -> dict[int, list[tuple[int, int]]]:
    """Aborted transactions by producer: the offset spans of their data."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for entry in aborted:
        spans.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
    return spans


def _in_spans(spans: dict[int, list[tuple[int, int]]], header: BatchHeader) -> bool:
    """Whether ``header``'s transactional batch lies in one of its producer's aborted spans."""
    found = spans.get(header.producer_id)
    base = header.base_offset
    return found is not None and any(first <= base <= last for first, last in found)
