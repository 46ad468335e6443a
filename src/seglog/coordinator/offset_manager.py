"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, deletion and expiry.

:class:`OffsetManager` validates the partitions of a commit and stores them
in memory and in ``__consumer_offsets``, answers fetches, makes the offsets
of committed transactions visible, tombstones deleted groups and offsets, and
expires offsets past ``offsets.retention.minutes`` on the retention timer
(for an empty group counted from when it became empty; for a group without
group management from the commit; for a consumer group from the commit when
no member subscribes to the topic any more), deleting empty groups left
without offsets.

Whether the committer may commit is not decided here: the coordinator facade
(:mod:`seglog.coordinator.group_coordinator`) asks the membership manager of
the group's protocol first. A group id's offsets live on its classic group
record (:class:`~seglog.coordinator.group.Group`), whichever protocol its
members speak, as ``__consumer_offsets`` keys them by group id alone; this
class reaches those records through :class:`GroupTable`, the narrow
interface :class:`~seglog.coordinator.classic_group_manager.ClassicGroupManager`
implements, and asks ``in_use`` whether a KIP-848 group with members holds an
id (its offsets do not expire).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from seglog.coordinator.group import DEAD, EMPTY, STABLE, Group
from seglog.coordinator.offset_store import (
    CommittedOffset,
    group_key,
    offset_key,
    offset_value,
)
from seglog.coordinator.requests import (
    NONE,
    Cancellable,
    CommitOutcome,
    CoordinatorConfig,
    OffsetCommitEntry,
)
from seglog.coordinator.runtime import CoordinatorRuntime, logger
from seglog.errors import SeglogError


class GroupTable(Protocol):
    """The group records the offset manager reads and writes offsets on."""

    def get(self, group_id: str) -> Group | None:
        """The group of ``group_id``, if there is one."""
        ...

    def get_or_create(self, group_id: str) -> Group:
        """The group of ``group_id``, created Empty if there is none."""
        ...

    def remove(self, group: Group) -> None:
        """Forget ``group``, whose tombstones are written."""
        ...

    def all(self) -> list[Group]:
        """Every group."""
        ...


class OffsetManager:
    """Every group's committed offsets."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        config: CoordinatorConfig,
        groups: GroupTable,
        *,
        partition_exists: Callable[[str, int], bool],
        in_use: Callable[[str], bool],
    ) -> None:
        self._runtime = runtime
        self._config = config
        self._groups = groups
        self._partition_exists = partition_exists
        self._in_use = in_use
        self._retention_timer: Cancellable | None = None

    def commit(
        self, group: Group, entries: list[OffsetCommitEntry], retention_ms: int = -1
    ) -> CommitOutcome:
        """Store every acceptable partition of an OffsetCommit whose committer is accepted.

        ``retention_ms`` >= 0 gives the offsets an explicit expiry (OffsetCommit v2-v4).
        """
        group_id = group.group_id
        now = self._runtime.now_ms()
        errors: dict[tuple[str, int], str] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for entry in entries:
            key = (entry.topic, entry.partition)
            metadata = entry.metadata or ""
            if not self._partition_exists(entry.topic, entry.partition):
                errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                errors[key] = "OFFSET_METADATA_TOO_LARGE"
            else:
                expire = now + retention_ms if retention_ms >= 0 else None
                accepted[key] = CommittedOffset(
                    entry.offset, metadata, now, entry.leader_epoch, expire
                )
                errors[key] = NONE
        if not accepted:
            return CommitOutcome(errors)
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, t, p), offset_value(c)) for (t, p), c in accepted.items()
        ]
        try:
            flush = self._runtime.append(group_id, records)
        except SeglogError as exc:
            logger.error("cannot store offsets of group %s: %s", group_id, exc)
            return CommitOutcome(dict.fromkeys(errors, "COORDINATOR_NOT_AVAILABLE"))
        group.offsets.update(accepted)
        return CommitOutcome(errors, flush)

    def apply_txn_offsets(self, committed: Mapping[str, Mapping[tuple[str, int], Any]]) -> None:
        """Make the offsets of a committed transaction visible (they are stored already)."""
        for group_id, offsets in committed.items():
            self._groups.get_or_create(group_id).offsets.update(offsets)

    # ---------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[str, list[tuple[str, int, CommittedOffset | None]]]:
        """OffsetFetch: (group error, [(topic, partition, committed or None)]).

        ``partitions`` None asks for every partition the group has an offset for.
        """
        error = self._runtime.unavailable(group_id)
        if error is not None:
            return error, [(t, p, None) for t, p in partitions or []]
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return NONE, [(t, p, c) for (t, p), c in sorted(offsets.items())]
        return NONE, [(t, p, offsets.get((t, p))) for t, p in partitions]

    # ----------------------------------------------------------- deletion

    def delete_group(self, group: Group) -> str:
        """Tombstone ``group``'s offsets and metadata and forget it (DeleteGroups)."""
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((group_key(group.group_id), None))
        try:
            self._runtime.append(group.group_id, records)
        except SeglogError as exc:
            logger.error("cannot delete group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        self._groups.remove(group)
        logger.info("group %s deleted", group.group_id)
        return NONE

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[str, dict[tuple[str, int], str]]:
        """OffsetDelete: (group error, per-partition errors)."""
        error = self._runtime.unavailable(group_id)
        group = self._groups.get(group_id)
        if error is None and (group is None or group.is_in(DEAD)):
            error = "GROUP_ID_NOT_FOUND"
        if error is not None:
            return error, {}
        assert group is not None
        subscribed: set[str] = set()
        if not group.is_in(EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return "NON_EMPTY_GROUP", {}
            subscribed = topics
        errors: dict[tuple[str, int], str] = {}
        doomed = []
        for topic, partition in partitions:
            if topic in subscribed:
                errors[(topic, partition)] = "GROUP_SUBSCRIBED_TO_TOPIC"
            elif not self._partition_exists(topic, partition):
                errors[(topic, partition)] = "UNKNOWN_TOPIC_OR_PARTITION"
            else:
                errors[(topic, partition)] = NONE
                if (topic, partition) in group.offsets:
                    doomed.append((topic, partition))
        if doomed:
            try:
                self._runtime.append(
                    group_id, [(offset_key(group_id, t, p), None) for t, p in doomed]
                )
            except SeglogError as exc:
                logger.error("cannot delete offsets of group %s: %s", group_id, exc)
                return "COORDINATOR_NOT_AVAILABLE", {}
            for key in doomed:
                del group.offsets[key]
        return NONE, errors

    # ------------------------------------------------------------ retention

    def start_retention(self) -> None:
        """Run :meth:`expire_offsets` every ``offsets.retention.check.interval.ms``."""
        self._schedule_retention()

    def shutdown(self) -> None:
        """Stop the retention timer."""
        self._runtime.cancel(self._retention_timer)

    def _schedule_retention(self) -> None:
        def run() -> None:
            self.expire_offsets()
            self._schedule_retention()

        self._retention_timer = self._runtime.schedule(
            self._config.offsets_retention_check_interval_ms, run
        )

    def expire_offsets(self) -> int:
        """Delete offsets past ``offsets.retention.minutes``; returns how many."""
        if self._runtime.loading:
            return 0
        now = self._runtime.now_ms()
        retention = self._config.offsets_retention_ms
        removed = 0
        for group in self._groups.all():
            if self._in_use(group.group_id):
                continue  # offsets of a KIP-848 group in use do not expire
            subscribed = group.subscribed_topics() if group.is_in(STABLE) else None
            expired = []
            for (topic, partition), committed in group.offsets.items():
                if committed.expire_timestamp is not None:
                    if now >= committed.expire_timestamp:
                        expired.append((topic, partition))
                    continue
                if group.is_in(EMPTY):
                    base = (
                        group.state_timestamp_ms
                        if group.protocol_type is not None and group.state_timestamp_ms >= 0
                        else committed.commit_timestamp
                    )
                elif subscribed is not None and topic not in subscribed:
                    base = committed.commit_timestamp
                else:
                    continue
                if now - base >= retention:
                    expired.append((topic, partition))
            drop_group = group.is_in(EMPTY) and len(expired) == len(group.offsets)
            drop_group = drop_group and not group.pending_members
            records: list[tuple[bytes, bytes | None]] = [
                (offset_key(group.group_id, t, p), None) for t, p in expired
            ]
            if drop_group:
                records.append((group_key(group.group_id), None))
            if not records:
                continue
            try:
                self._runtime.append(group.group_id, records)
            except SeglogError as exc:
                logger.error("cannot expire offsets of group %s: %s", group.group_id, exc)
                continue
            for key in expired:
                del group.offsets[key]
            removed += len(expired)
            if drop_group:
                self._groups.remove(group)
                logger.info("group %s expired", group.group_id)
        if removed:
            logger.info("expired %d committed offsets", removed)
        return removed
