"""The rounds of the classic group protocol: sessions, join and sync rounds, their timers.

:class:`ClassicRebalance` moves a classic group through its rebalance (the
state table is in :mod:`seglog.coordinator.group`): it keeps each member's
session alive or expires it, starts a join round when the membership
changes (after ``group.initial.rebalance.delay.ms`` for an empty group's first
one), ends it when every member has rejoined or the rebalance timeout passes,
ends the sync round when members do not send SyncGroup in time, and writes
the group's metadata to ``__consumer_offsets``. The timers are described in
:mod:`seglog.coordinator.group_coordinator`.

:class:`~seglog.coordinator.classic_group_manager.ClassicGroupManager`
answers the requests and calls in here; this class is given only the runtime,
the configuration, and a way to tell whether a group is still the registered
one of its id (a timer of a deleted or replaced group does nothing).
"""

from __future__ import annotations

from collections.abc import Callable

from seglog.coordinator.group import COMPLETING, EMPTY, PREPARING, STABLE, Event, Group, Member
from seglog.coordinator.offset_store import GroupRecord, MemberRecord, group_key, group_value
from seglog.coordinator.requests import NONE, CoordinatorConfig, JoinResult, SyncResult
from seglog.coordinator.runtime import CoordinatorRuntime, logger
from seglog.errors import SeglogError


class ClassicRebalance:
    """Sessions and rebalance rounds of classic groups."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        config: CoordinatorConfig,
        is_current: Callable[[Group], bool],
    ) -> None:
        self._runtime = runtime
        self._config = config
        self._is_current = is_current

    # -------------------------------------------------------------- storage

    def _store_group(self, group: Group) -> None:
        """Write the group's metadata (generation, members, assignments)."""
        protocol = group.protocol_name
        record = GroupRecord(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id if group.members else None,
            group.state_timestamp_ms,
            tuple(
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        self._runtime.append(group.group_id, [(group_key(group.group_id), group_value(record))])

    def store(self, group: Group) -> str:
        """Write the group's metadata; the error to answer (NONE, or COORDINATOR_NOT_AVAILABLE)."""
        try:
            self._store_group(group)
        except SeglogError as exc:
            logger.error("cannot store group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        return NONE

    # ------------------------------------------------------------ sessions

    def touch(self, group: Group, member: Member) -> None:
        """A sign of life from ``member``: push its session expiry back."""
        member.heartbeat_deadline_ms = self._runtime.now_ms() + member.session_timeout_ms
        if member.session_timer is None:
            member.session_timer = self._runtime.schedule(
                member.session_timeout_ms, lambda: self._on_session_timer(group, member)
            )

    def _on_session_timer(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if not self._is_current(group) or group.members.get(member.member_id) is not member:
            return
        if member.join_callback is not None or member.sync_callback is not None:
            # Held in a join or sync round: the rebalance timeout governs it now.
            self.touch(group, member)
            return
        remaining = member.heartbeat_deadline_ms - self._runtime.now_ms()
        if remaining > 0:
            member.session_timer = self._runtime.schedule(
                remaining, lambda: self._on_session_timer(group, member)
            )
            return
        logger.info(
            "member %s of group %s: session timeout (%d ms) expired",
            member.member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self.remove_member(group, member)

    def remove_member(self, group: Group, member: Member) -> None:
        """``member`` is gone (left, expired): answer its held calls, rebalance without it."""
        group.remove(member.member_id)
        self._runtime.cancel(member.session_timer)
        member.session_timer = None
        if member.join_callback is not None:
            callback, member.join_callback = member.join_callback, None
            callback(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=member.member_id))
        if member.sync_callback is not None:
            callback, member.sync_callback = member.sync_callback, None
            callback(SyncResult(error="UNKNOWN_MEMBER_ID"))
        if group.is_in(STABLE, COMPLETING):
            self.prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    # -------------------------------------------------------- rebalancing

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        """Start a join round, or, in one already, see whether it can end."""
        if group.is_in(STABLE, COMPLETING, EMPTY):
            self.prepare_rebalance(group, reason)
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        """Start a join round (the group goes PreparingRebalance) and its timer."""
        if group.is_in(COMPLETING):
            self._runtime.cancel(group.sync_timer)
            group.sync_timer = None
            for member in group.members.values():
                member.assignment = b""
                if member.sync_callback is not None:
                    callback, member.sync_callback = member.sync_callback, None
                    callback(SyncResult(error="REBALANCE_IN_PROGRESS"))
        initial = group.is_in(EMPTY)
        group.transition(Event.REBALANCE, self._runtime.now_ms())
        logger.info(
            "group %s: preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        self._runtime.cancel(group.join_timer)
        timeout = group.max_rebalance_timeout_ms()
        delay = self._config.initial_rebalance_delay_ms
        if initial and delay > 0:
            group.in_initial_delay = True
            group.new_member_added = False
            self._arm_initial_delay(group, min(delay, timeout), max(timeout - delay, 0))
        else:
            group.in_initial_delay = False
            group.join_timer = self._runtime.schedule(timeout, lambda: self._on_join_timeout(group))
            self.maybe_complete_join(group)

    def _arm_initial_delay(self, group: Group, delay: int, remaining: int) -> None:
        def fire() -> None:
            if not self._is_current(group) or not group.is_in(PREPARING):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self._config.initial_rebalance_delay_ms, remaining)
                self._arm_initial_delay(group, step, remaining - step)
                return
            group.in_initial_delay = False
            self._complete_join(group)

        group.join_timer = self._runtime.schedule(delay, fire)

    def _on_join_timeout(self, group: Group) -> None:
        if self._is_current(group) and group.is_in(PREPARING):
            self._complete_join(group)

    def maybe_complete_join(self, group: Group) -> None:
        """End the join round if every member has rejoined and no initial delay runs."""
        if group.is_in(PREPARING) and not group.in_initial_delay and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join round: drop who did not rejoin, next generation, answer JoinGroups."""
        self._runtime.cancel(group.join_timer)
        group.join_timer = None
        group.in_initial_delay = False
        for member in list(group.members.values()):
            if member.join_callback is None and member.group_instance_id is None:
                logger.info(
                    "member %s of group %s did not rejoin in time",
                    member.member_id,
                    group.group_id,
                )
                group.remove(member.member_id)
                self._runtime.cancel(member.session_timer)
                member.session_timer = None
        now = self._runtime.now_ms()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(Event.JOIN_COMPLETE_EMPTY, now)
            logger.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            self.store(group)
            return
        group.protocol_name = group.select_protocol()
        group.elect_joined_leader()
        group.transition(Event.JOIN_COMPLETE, now)
        logger.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in list(group.members.values()):
            if member.join_callback is None:
                continue
            callback, member.join_callback = member.join_callback, None
            self.touch(group, member)
            callback(self.join_result(group, member))
        group.sync_timer = self._runtime.schedule(
            group.max_rebalance_timeout_ms(), lambda: self._on_sync_timeout(group)
        )

    def _on_sync_timeout(self, group: Group) -> None:
        group.sync_timer = None
        if not self._is_current(group) or not group.is_in(COMPLETING):
            return
        for member in list(group.members.values()):
            if member.sync_callback is None:
                logger.info(
                    "member %s of group %s sent no SyncGroup in time",
                    member.member_id,
                    group.group_id,
                )
                group.remove(member.member_id)
                self._runtime.cancel(member.session_timer)
                member.session_timer = None
        self.prepare_rebalance(group, "members did not sync in time")

    def join_result(self, group: Group, member: Member, *, members: bool = True) -> JoinResult:
        """The JoinGroup answer of ``member`` for the current generation (the leader gets
        the member list unless ``members`` is False)."""
        is_leader = member.member_id == group.leader_id
        listed = []
        if is_leader and members:
            listed = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member.member_id,
            members=listed,
        )
