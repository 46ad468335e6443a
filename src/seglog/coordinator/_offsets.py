"""Committed offsets: OffsetCommit, OffsetFetch, deletion, expiry, and loading them back.

:class:`GroupOffsets` keeps each group's committed offsets in memory and in
``__consumer_offsets`` (through
:class:`~seglog.coordinator.offset_store.OffsetStore`): it validates and
stores commits, answers fetches, tombstones deleted groups and offsets,
expires offsets past ``offsets.retention.minutes`` on the retention timer,
and at start installs the groups read back from ``__consumer_offsets``
(offsets, and the metadata and members of groups stored with members).
A commit from a member is a sign of life, so this part calls into the
membership part (:mod:`._membership`) for the member's session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from seglog.coordinator._base import CoordinatorBase, logger
from seglog.coordinator.group import (
    COMPLETING,
    DEAD,
    EMPTY,
    STABLE,
    Event,
    Group,
    Member,
)
from seglog.coordinator.offset_store import (
    CommittedOffset,
    LoadedGroup,
    group_key,
    offset_key,
    offset_value,
)
from seglog.coordinator.requests import NONE, CommitOutcome, OffsetCommitEntry
from seglog.errors import SeglogError


class GroupOffsets(CoordinatorBase):
    """Every group's committed offsets."""

    if TYPE_CHECKING:
        # Provided by GroupMembership, which GroupCoordinator also derives from.
        def _touch(self, group: Group, member: Member) -> None: ...

        # Provided by ConsumerGroupProtocol (KIP-848 groups).
        consumer_groups: dict[str, Any]

        def _consumer_group_in_use(self, group_id: str) -> bool: ...
        def _validate_consumer_commit(
            self, group_id: str, member_id: str, member_epoch: int
        ) -> str | None: ...

    # ------------------------------------------------------------- loading

    def load(self) -> dict[str, LoadedGroup]:
        """Read ``__consumer_offsets`` (blocking; run it off the event loop).

        Partitions that cannot be read are left out and recorded in
        :attr:`failed_partitions`: only their groups are refused.
        """
        loaded = self.store.load()
        self.failed_partitions = dict(self.store.failed_partitions)
        return loaded

    def finish_loading(self, loaded: Mapping[str, LoadedGroup]) -> None:
        """Install what :meth:`load` read and start serving group requests."""
        now = self.now_ms()
        for group_id, found in loaded.items():
            group = Group(group_id, state_timestamp_ms=now)
            group.offsets = dict(found.offsets)
            record = found.metadata
            if record is not None:
                group.generation_id = record.generation
                group.protocol_type = record.protocol_type or None
                group.protocol_name = record.protocol
                if record.current_state_timestamp >= 0:
                    group.state_timestamp_ms = record.current_state_timestamp
                for stored in record.members:
                    member = Member(
                        stored.member_id,
                        stored.group_instance_id,
                        stored.client_id,
                        stored.client_host,
                        stored.session_timeout_ms,
                        stored.rebalance_timeout_ms,
                        record.protocol_type,
                        [(record.protocol or "", stored.subscription)],
                        stored.assignment,
                    )
                    group.add(member)
                    self._touch(group, member)
                group.protocol_type = record.protocol_type or None
                if record.leader in group.members:
                    group.leader_id = record.leader
                if group.members:
                    group.state = STABLE
            self.groups[group_id] = group
        self.loading = False
        logger.info("loaded %d consumer groups from %s", len(loaded), "__consumer_offsets")
        self._schedule_retention()

    # --------------------------------------------------------- OffsetCommit

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: list[OffsetCommitEntry],
        *,
        retention_ms: int = -1,
    ) -> CommitOutcome:
        """OffsetCommit: validate the committer, then store every acceptable partition."""
        error = self._unavailable(group_id) or ("INVALID_GROUP_ID" if not group_id else None)
        group = self.groups.get(group_id)
        if error is None and group_id in self.consumer_groups:
            # A KIP-848 group: generation_id is the member epoch.
            error = self._validate_consumer_commit(group_id, member_id, generation_id)
        elif error is None:
            if group is None:
                if generation_id >= 0:
                    error = "ILLEGAL_GENERATION"  # from a generation this broker does not know
            else:
                error = self._validate_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return CommitOutcome({(e.topic, e.partition): error for e in entries})
        if group is None:
            # A group that only stores offsets (assign() users, tools).
            group = Group(group_id, state_timestamp_ms=self.now_ms())
            self.groups[group_id] = group
        now = self.now_ms()
        errors: dict[tuple[str, int], str] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for entry in entries:
            key = (entry.topic, entry.partition)
            metadata = entry.metadata or ""
            if not self._partition_exists(entry.topic, entry.partition):
                errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif len(metadata.encode()) > self.config.offset_metadata_max_bytes:
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
            flush = self._append(group_id, records)
        except SeglogError as exc:
            logger.error("cannot store offsets of group %s: %s", group_id, exc)
            return CommitOutcome(dict.fromkeys(errors, "COORDINATOR_NOT_AVAILABLE"))
        group.offsets.update(accepted)
        return CommitOutcome(errors, flush)

    def _validate_commit(
        self, group: Group, generation_id: int, member_id: str, instance: str | None
    ) -> str | None:
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if generation_id < 0 and not member_id and instance is None and group.is_in(EMPTY):
            return None  # a commit without group management
        if self._fenced(group, member_id, instance):
            return "FENCED_INSTANCE_ID"
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        if group.is_in(COMPLETING):
            return "REBALANCE_IN_PROGRESS"
        self._touch(group, member)
        return None

    def validate_txn_offset_commit(
        self, group_id: str, generation_id: int, member_id: str, instance: str | None
    ) -> str | None:
        """TxnOffsetCommit's group checks (v3+): None if accepted, else the error.

        Kafka's coordinator checks the member of a transactional commit only
        when one is named: generation -1 with no member id and no instance id
        (every request below v3, and producers given no consumer group
        metadata) is accepted whatever the group's state. A group this broker
        does not know takes only such a commit. A KIP-848 group's member epoch
        stands for the generation, a stale one answered ILLEGAL_GENERATION.
        """
        error = self._unavailable(group_id)
        if error is not None:
            return error
        anonymous = generation_id < 0 and not member_id and instance is None
        if group_id in self.consumer_groups:
            if anonymous:
                return None
            error = self._validate_consumer_commit(group_id, member_id, generation_id)
            return "ILLEGAL_GENERATION" if error == "STALE_MEMBER_EPOCH" else error
        group = self.groups.get(group_id)
        if group is None:
            return None if generation_id < 0 else "ILLEGAL_GENERATION"
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if anonymous or (generation_id < 0 and group.is_in(EMPTY)):
            return None
        if instance is not None:
            known = group.static_members.get(instance)
            if known is None:
                return "UNKNOWN_MEMBER_ID"
            if known != member_id:
                return "FENCED_INSTANCE_ID"
        elif member_id not in group.members:
            return "UNKNOWN_MEMBER_ID"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        return None

    def apply_txn_offsets(self, committed: Mapping[str, Mapping[tuple[str, int], Any]]) -> None:
        """Make the offsets of a committed transaction visible (they are stored already)."""
        for group_id, offsets in committed.items():
            group = self.groups.get(group_id)
            if group is None:
                group = Group(group_id, state_timestamp_ms=self.now_ms())
                self.groups[group_id] = group
            group.offsets.update(offsets)

    # ---------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[str, list[tuple[str, int, CommittedOffset | None]]]:
        """OffsetFetch: (group error, [(topic, partition, committed or None)]).

        ``partitions`` None asks for every partition the group has an offset for.
        """
        error = self._unavailable(group_id)
        if error is not None:
            return error, [(t, p, None) for t, p in partitions or []]
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return NONE, [(t, p, c) for (t, p), c in sorted(offsets.items())]
        return NONE, [(t, p, offsets.get((t, p))) for t, p in partitions]

    # ----------------------------------------------------------- deletion

    def delete_groups(self, group_ids: list[str]) -> dict[str, str]:
        """DeleteGroups: each empty group's offsets and metadata are tombstoned."""
        results: dict[str, str] = {}
        for group_id in group_ids:
            error = self._unavailable(group_id)
            group = self.groups.get(group_id)
            if error is None:
                if not group_id:
                    error = "INVALID_GROUP_ID"
                elif self._consumer_group_in_use(group_id):
                    error = "NON_EMPTY_GROUP"
                elif group is None and group_id in self.consumer_groups:
                    del self.consumer_groups[group_id]  # empty, without offsets
                    error = NONE
                elif group is None or group.is_in(DEAD):
                    error = "GROUP_ID_NOT_FOUND"
                elif not group.is_in(EMPTY):
                    error = "NON_EMPTY_GROUP"
            if error is None:
                assert group is not None
                error = self._delete_group(group)
                if error == NONE:
                    self.consumer_groups.pop(group_id, None)
            results[group_id] = error
        return results

    def _delete_group(self, group: Group) -> str:
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((group_key(group.group_id), None))
        try:
            self._append(group.group_id, records)
        except SeglogError as exc:
            logger.error("cannot delete group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        for timer in group.pending_members.values():
            self._cancel(timer)
        group.transition(Event.DELETE, self.now_ms())
        del self.groups[group.group_id]
        logger.info("group %s deleted", group.group_id)
        return NONE

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[str, dict[tuple[str, int], str]]:
        """OffsetDelete: (group error, per-partition errors)."""
        error = self._unavailable(group_id)
        group = self.groups.get(group_id)
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
                self._append(group_id, [(offset_key(group_id, t, p), None) for t, p in doomed])
            except SeglogError as exc:
                logger.error("cannot delete offsets of group %s: %s", group_id, exc)
                return "COORDINATOR_NOT_AVAILABLE", {}
            for key in doomed:
                del group.offsets[key]
        return NONE, errors

    # ------------------------------------------------------------ retention

    def _schedule_retention(self) -> None:
        def run() -> None:
            self.expire_offsets()
            self._schedule_retention()

        self._retention_timer = self._later(self.config.offsets_retention_check_interval_ms, run)

    def expire_offsets(self) -> int:
        """Delete offsets past ``offsets.retention.minutes``; returns how many."""
        if self.loading:
            return 0
        now = self.now_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if self._consumer_group_in_use(group.group_id):
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
                self._append(group.group_id, records)
            except SeglogError as exc:
                logger.error("cannot expire offsets of group %s: %s", group.group_id, exc)
                continue
            for key in expired:
                del group.offsets[key]
            removed += len(expired)
            if drop_group:
                group.transition(Event.DELETE, now)
                del self.groups[group.group_id]
                logger.info("group %s expired", group.group_id)
        if removed:
            logger.info("expired %d committed offsets", removed)
        return removed
