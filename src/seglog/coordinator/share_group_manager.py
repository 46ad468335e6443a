"""Share groups (KIP-932): ShareGroupHeartbeat, the target assignment, records, timers.

:class:`ShareGroupManager` owns every share group of the coordinator and
answers ShareGroupHeartbeat (the protocol is described in
:mod:`seglog.coordinator.share_group`): it validates the member and its
epoch, bumps the group epoch, recomputes the target assignment with the
simple assignor, hands each member its target at once (there is no
revocation), and runs the session timers.

Every change is written to ``__consumer_offsets`` as Kafka's share group
records (:mod:`seglog.coordinator.share_group_records`): the manager keeps,
per group, the records as last written, and after each change writes the
ones whose value differs (tombstones for those gone), so the log holds the
group as the memory does. At start the groups are rebuilt from those records
(:meth:`ShareGroupManager.restore`); their members' sessions start afresh, so
members that do not come back are removed after their session timeout, as
Kafka's are. A write that fails is answered COORDINATOR_NOT_AVAILABLE; the
change stays in memory and is written with the next one.

Two hooks reach the broker's share-partition side: ``assigned(group,
partitions)`` when partitions enter a group's target assignment for the first
time (and for all of a group's partitions after a load), so that their share
state is initialized; the facade calls its deletion hook itself.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping

from seglog.coordinator import share_group_records as rec
from seglog.coordinator.assignor import TopicPartition
from seglog.coordinator.offset_store import LoadedGroup
from seglog.coordinator.requests import NONE, CoordinatorConfig
from seglog.coordinator.runtime import CoordinatorRuntime, logger
from seglog.coordinator.sessions import touch_session
from seglog.coordinator.share_group import (
    LEAVE_EPOCH,
    MEMBER_STATE_STABLE,
    ShareGroup,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    ShareMember,
    simple_assign,
)
from seglog.errors import SeglogError


def metadata_hash(partition_counts: Mapping[str, int]) -> int:
    """A signed 64-bit hash of the subscribed topics' partition counts (see the records)."""
    text = ";".join(f"{t}:{n}" for t, n in sorted(partition_counts.items()))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ShareGroupManager:
    """Every share group of this coordinator."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        config: CoordinatorConfig,
        *,
        topic_partitions: Callable[[str], int],
        topic_ids: Callable[[], Mapping[str, uuid.UUID]],
        assigned: Callable[[str, list[TopicPartition]], None],
    ) -> None:
        self._runtime = runtime
        self._config = config
        self._topic_partitions = topic_partitions
        self._topic_ids = topic_ids
        self._assigned = assigned
        #: Every share group, by id.
        self.groups: dict[str, ShareGroup] = {}
        #: Groups' own settings (group configs), by group id, over ``config``'s.
        self.overrides: dict[str, dict[str, int]] = {}

    # ------------------------------------------------ what the facade asks

    def get(self, group_id: str) -> ShareGroup | None:
        """The share group of ``group_id``, if there is one (empty or not)."""
        return self.groups.get(group_id)

    def in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group with members."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def summary(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return sorted((g.group_id, g.state.value) for g in self.groups.values())

    def shutdown(self) -> None:
        """Cancel every member's timer."""
        for group in self.groups.values():
            for member in group.members.values():
                self._runtime.cancel(member.session_timer)
                member.session_timer = None

    def delete(self, group_id: str) -> str:
        """DeleteGroups of an existing share group: NON_EMPTY_GROUP with members, else
        its records are tombstoned and it is forgotten."""
        group = self.groups[group_id]
        if group.members:
            return "NON_EMPTY_GROUP"
        tombstones: list[tuple[bytes, bytes | None]] = [(k, None) for k in group.written]
        if tombstones:
            try:
                self._runtime.append(group_id, tombstones)
            except SeglogError as exc:
                logger.error("cannot delete share group %s: %s", group_id, exc)
                return "COORDINATOR_NOT_AVAILABLE"
        del self.groups[group_id]
        logger.info("share group %s deleted", group_id)
        return NONE

    # --------------------------------------------------------------- heartbeat

    def refuse(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult | None:
        """The answer to a ShareGroupHeartbeat that cannot be served at all, or None."""
        error = self._runtime.unavailable(request.group_id or None)
        if error is not None:
            return ShareHeartbeatResult(error=error)
        invalid = self._invalid_heartbeat(request)
        if invalid is not None:
            return ShareHeartbeatResult(error="INVALID_REQUEST", error_message=invalid)
        return None

    @staticmethod
    def _invalid_heartbeat(request: ShareHeartbeatRequest) -> str | None:
        # In Kafka's order (GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid).
        if not request.member_id:
            return "MemberId can't be empty."
        if not request.group_id:
            return "GroupId can't be empty."
        if request.rack_id is not None and not request.rack_id:
            return "RackId can't be empty."
        if request.member_epoch == 0:
            if not request.subscribed_topic_names:
                return "SubscribedTopicNames must be set in first request."
        elif request.member_epoch < LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        return None

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat, once :meth:`refuse` and the facade let it through."""
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request)
        group = self.groups.get(request.group_id)
        joining = request.member_epoch == 0
        if group is None:
            if not joining:
                return ShareHeartbeatResult(
                    error="GROUP_ID_NOT_FOUND",
                    error_message=f"Share group {request.group_id} not found.",
                )
            group = ShareGroup(request.group_id)
        limit = self._config.share_max_size
        if len(group.members) >= limit and request.member_id not in group.members:
            return ShareHeartbeatResult(
                error="GROUP_MAX_SIZE_REACHED",
                error_message="The share group has reached its maximum capacity of "
                f"{limit} members.",
            )
        member = group.members.get(request.member_id)
        if member is None:
            if not joining:
                return ShareHeartbeatResult(
                    error="UNKNOWN_MEMBER_ID",
                    error_message=f"Member {request.member_id} is not a member of group "
                    f"{request.group_id}.",
                )
            member = ShareMember(request.member_id)
        fenced = self._epoch_error(member, request.member_epoch)
        if fenced is not None:
            return ShareHeartbeatResult(error="FENCED_MEMBER_EPOCH", error_message=fenced)
        self.groups.setdefault(group.group_id, group)
        new = member.member_id not in group.members
        if new:
            group.members[member.member_id] = member
            logger.info("member %s joins share group %s", member.member_id, group.group_id)
        changed = new
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            subscribed = tuple(sorted(set(request.subscribed_topic_names)))
            changed = changed or subscribed != member.subscribed
            member.subscribed = subscribed
        member.client_id = request.client_id or member.client_id
        member.client_host = request.client_host or member.client_host
        self._refresh(group, changed=changed)
        self._maybe_compute_target(group)
        before = member.assigned
        self._reconcile(group, member)
        self._touch(group, member)
        error = self._write(group)
        if error is not None:
            return ShareHeartbeatResult(error=error)
        full = joining or request.subscribed_topic_names is not None
        return ShareHeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
            assignment=sorted(member.assigned) if full or member.assigned != before else None,
        )

    @staticmethod
    def _epoch_error(member: ShareMember, received: int) -> str | None:
        """Kafka's ``throwIfShareGroupMemberEpochIsInvalid``: the member's epoch, or its
        previous one (the answer that bumped it may have been lost)."""
        if received > member.member_epoch:
            return (
                f"The share group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member "
                "must abandon all its partitions and rejoin."
            )
        if received < member.member_epoch and received != member.previous_member_epoch:
            return (
                f"The share group member has a smaller member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}), and it does "
                f"not match the previous member epoch ({member.previous_member_epoch}). "
                "The member must abandon all its partitions and rejoin."
            )
        return None

    def _leave(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            return ShareHeartbeatResult(
                error="GROUP_ID_NOT_FOUND", error_message=f"Group {request.group_id} not found."
            )
        member = group.members.get(request.member_id)
        if member is None:
            return ShareHeartbeatResult(
                error="UNKNOWN_MEMBER_ID",
                error_message=f"Member {request.member_id} is not a member of group "
                f"{request.group_id}.",
            )
        self._remove(group, member, "left the share group")
        error = self._write(group)
        return ShareHeartbeatResult(
            error=error or NONE,
            member_id=member.member_id,
            member_epoch=LEAVE_EPOCH,
            heartbeat_interval_ms=0,
        )

    def _remove(self, group: ShareGroup, member: ShareMember, reason: str) -> None:
        if group.members.get(member.member_id) is not member:
            return
        del group.members[member.member_id]
        self._runtime.cancel(member.session_timer)
        member.session_timer = None
        group.target.pop(member.member_id, None)
        # The subscribed topics without the member's (their counts as last seen, so that
        # a count that changed meanwhile still bumps the epoch at the next heartbeat),
        # and one epoch bump for it all, as Kafka's shareGroupFenceMember.
        topics = group.subscribed_topics()
        group.partition_counts = {t: n for t, n in group.partition_counts.items() if t in topics}
        group.group_epoch += 1
        logger.info(
            "member %s of share group %s %s (group epoch %d)",
            member.member_id,
            group.group_id,
            reason,
            group.group_epoch,
        )

    # ---------------------------------------------------------------- target

    def _refresh(self, group: ShareGroup, *, changed: bool) -> None:
        """Bump the group epoch if the membership or subscriptions (``changed``) or the
        subscribed topics' partition counts changed."""
        counts = {t: self._topic_partitions(t) for t in sorted(group.subscribed_topics())}
        if changed or counts != group.partition_counts:
            group.partition_counts = counts
            group.group_epoch += 1
            logger.info(
                "share group %s: %d members, subscribed partitions %s (group epoch %d)",
                group.group_id,
                len(group.members),
                counts,
                group.group_epoch,
            )

    def _maybe_compute_target(self, group: ShareGroup) -> None:
        if group.assignment_epoch >= group.group_epoch:
            return
        group.target = simple_assign(
            {m.member_id: m.subscribed for m in group.members.values()},
            group.partition_counts,
            group.target,
        )
        group.assignment_epoch = group.group_epoch
        logger.info(
            "share group %s: target assignment of epoch %d: %s",
            group.group_id,
            group.assignment_epoch,
            {m: sorted(tps) for m, tps in group.target.items()},
        )
        fresh: list[TopicPartition] = sorted(
            {
                tp
                for tps in group.target.values()
                for tp in tps
                if tp[1] not in group.initialized.get(tp[0], frozenset())
            }
        )
        if fresh:
            for topic, partition in fresh:
                group.initialized[topic] = group.initialized.get(topic, frozenset()) | {partition}
            self._call_assigned(group.group_id, fresh)

    def _call_assigned(self, group_id: str, partitions: list[TopicPartition]) -> None:
        try:
            self._assigned(group_id, partitions)
        except Exception:
            # The broker's side failing must not undo the membership change.
            logger.exception("initializing the share state of %s failed", group_id)

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareMember) -> None:
        """No revocation in share groups: the member takes its target at once."""
        target = group.target.get(member.member_id, frozenset())
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assigned = target

    # ----------------------------------------------------------------- timers

    def _session_timeout_ms(self, group_id: str) -> int:
        own = self.overrides.get(group_id, {})
        return own.get("share.session.timeout.ms", self._config.share_session_timeout_ms)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        own = self.overrides.get(group_id, {})
        return own.get("share.heartbeat.interval.ms", self._config.share_heartbeat_interval_ms)

    def _touch(self, group: ShareGroup, member: ShareMember) -> None:
        def expire() -> None:
            timeout = self._session_timeout_ms(group.group_id)
            self._remove(group, member, f"expired (session timeout {timeout} ms)")
            self._write(group)

        touch_session(
            self._runtime,
            member,
            self._session_timeout_ms(group.group_id),
            alive=lambda: group.members.get(member.member_id) is member,
            expire=expire,
        )

    # ---------------------------------------------------------------- records

    def _records(self, group: ShareGroup) -> dict[bytes, bytes]:
        """The group's records as they should stand now: key → value."""
        ids = self._topic_ids()
        gid = group.group_id

        def by_id(partitions: frozenset[TopicPartition]) -> rec.TopicIds:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            return [(ids[t], sorted(ps)) for t, ps in sorted(by_topic.items()) if t in ids]

        out = {
            rec.key(rec.GROUP_METADATA, gid): rec.group_metadata_value(
                group.group_epoch, metadata_hash(group.partition_counts)
            ),
            rec.key(rec.TARGET_METADATA, gid): rec.target_metadata_value(group.assignment_epoch),
        }
        for member in group.members.values():
            mid = member.member_id
            out[rec.key(rec.MEMBER_METADATA, gid, mid)] = rec.member_metadata_value(
                rec.MemberMetadata(
                    member.rack_id, member.client_id, member.client_host, member.subscribed
                )
            )
            out[rec.key(rec.TARGET_MEMBER, gid, mid)] = rec.target_member_value(
                by_id(group.target.get(mid, frozenset()))
            )
            out[rec.key(rec.CURRENT_MEMBER, gid, mid)] = rec.current_member_value(
                rec.CurrentAssignment(
                    member.member_epoch,
                    member.previous_member_epoch,
                    MEMBER_STATE_STABLE,
                    by_id(member.assigned),
                )
            )
        if group.initialized:
            out[rec.key(rec.STATE_PARTITIONS, gid)] = rec.state_partitions_value(
                rec.TopicPartitionsInfo(ids[t], t, tuple(sorted(ps)))
                for t, ps in sorted(group.initialized.items())
                if t in ids
            )
        return out

    def _write(self, group: ShareGroup) -> str | None:
        """Write what changed in ``group`` since the last write; the error, or None."""
        wanted = self._records(group)
        changes: list[tuple[bytes, bytes | None]] = [
            (k, None) for k in group.written if k not in wanted
        ]
        changes.extend((k, v) for k, v in wanted.items() if group.written.get(k) != v)
        if not changes:
            return None
        try:
            self._runtime.append(group.group_id, changes)
        except SeglogError as exc:
            logger.error("cannot store share group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        group.written = wanted
        return None

    # ---------------------------------------------------------------- loading

    def restore(self, loaded: Mapping[str, LoadedGroup]) -> None:
        """Rebuild the share groups read from ``__consumer_offsets``.

        Members come back with their epochs and assignments, and their
        sessions start now. Partitions of topics that no longer exist (by
        id) are dropped. Every partition with initialized share state is
        handed to the ``assigned`` hook again, for the broker to load it.
        """
        names = {topic_id: name for name, topic_id in self._topic_ids().items()}

        def by_name(partitions: rec.TopicIds) -> frozenset[TopicPartition]:
            return frozenset(
                (names[topic_id], p) for topic_id, ps in partitions if topic_id in names for p in ps
            )

        for group_id, found in loaded.items():
            share = found.share
            if share is None or not share.exists or share.epoch is None:
                continue
            group = ShareGroup(
                group_id, group_epoch=share.epoch, assignment_epoch=share.assignment_epoch
            )
            for member_id, meta in share.members.items():
                member = ShareMember(
                    member_id,
                    rack_id=meta.rack_id,
                    client_id=meta.client_id,
                    client_host=meta.client_host,
                    subscribed=tuple(sorted(meta.subscribed)),
                )
                current = share.current.get(member_id)
                if current is not None:
                    member.member_epoch = current.member_epoch
                    member.previous_member_epoch = current.previous_member_epoch
                    member.assigned = by_name(current.partitions)
                group.members[member_id] = member
                group.target[member_id] = by_name(share.targets.get(member_id, []))
            counts = {t: self._topic_partitions(t) for t in sorted(group.subscribed_topics())}
            # Unchanged topics keep the epoch; changed ones bump it on the next heartbeat.
            group.partition_counts = counts if metadata_hash(counts) == share.metadata_hash else {}
            for info in share.initialized:
                name = names.get(info.topic_id)
                if name is not None:
                    group.initialized[name] = frozenset(info.partitions)
            group.written = dict(share.records)
            self.groups[group_id] = group
            for member in group.members.values():
                self._touch(group, member)
        for group_id, group in sorted(self.groups.items()):
            partitions = sorted((t, p) for t, ps in group.initialized.items() for p in ps)
            if partitions:
                self._call_assigned(group_id, partitions)
        if self.groups:
            logger.info("loaded %d share groups", len(self.groups))
