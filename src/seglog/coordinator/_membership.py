"""Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

:class:`GroupMembership` runs the classic rebalance protocol on top of
:class:`~seglog.coordinator._base.CoordinatorBase`: member sessions (the
session timer, pushed back by every sign of life), join rounds (the join
timer, or the initial delay of an empty group's first round), sync rounds
(the sync timer), pending members (KIP-394), static members (KIP-345) and
members leaving. The timers are described in
:mod:`seglog.coordinator.group_coordinator`; the group state machine and its
table are in :mod:`seglog.coordinator.group`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from seglog.coordinator._base import CoordinatorBase, logger
from seglog.coordinator.group import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Event,
    Group,
    Member,
)
from seglog.coordinator.requests import NONE, JoinRequest, JoinResult, SyncResult


class GroupMembership(CoordinatorBase):
    """Who is in each group, and the rounds that agree on their assignments."""

    if TYPE_CHECKING:
        # Provided by ConsumerGroupProtocol, which GroupCoordinator also derives from.
        def _consumer_group_in_use(self, group_id: str) -> bool: ...
        def _release_empty_consumer_group(self, group_id: str) -> None: ...

    # ------------------------------------------------------------ sessions

    def _touch(self, group: Group, member: Member) -> None:
        """A sign of life from ``member``: push its session expiry back."""
        member.heartbeat_deadline_ms = self.now_ms() + member.session_timeout_ms
        if member.session_timer is None:
            member.session_timer = self._later(
                member.session_timeout_ms, lambda: self._on_session_timer(group, member)
            )

    def _on_session_timer(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if not self._current(group) or group.members.get(member.member_id) is not member:
            return
        if member.join_callback is not None or member.sync_callback is not None:
            # Held in a join or sync round: the rebalance timeout governs it now.
            self._touch(group, member)
            return
        remaining = member.heartbeat_deadline_ms - self.now_ms()
        if remaining > 0:
            member.session_timer = self._later(
                remaining, lambda: self._on_session_timer(group, member)
            )
            return
        logger.info(
            "member %s of group %s: session timeout (%d ms) expired",
            member.member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update(group, member)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        self._cancel(member.session_timer)
        member.session_timer = None
        if member.join_callback is not None:
            callback, member.join_callback = member.join_callback, None
            callback(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=member.member_id))
        if member.sync_callback is not None:
            callback, member.sync_callback = member.sync_callback, None
            callback(SyncResult(error="UNKNOWN_MEMBER_ID"))
        if group.is_in(STABLE, COMPLETING):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)

    # -------------------------------------------------------- rebalancing

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(COMPLETING):
            self._cancel(group.sync_timer)
            group.sync_timer = None
            for member in group.members.values():
                member.assignment = b""
                if member.sync_callback is not None:
                    callback, member.sync_callback = member.sync_callback, None
                    callback(SyncResult(error="REBALANCE_IN_PROGRESS"))
        initial = group.is_in(EMPTY)
        group.transition(Event.REBALANCE, self.now_ms())
        logger.info(
            "group %s: preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        self._cancel(group.join_timer)
        timeout = group.max_rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if initial and delay > 0:
            group.in_initial_delay = True
            group.new_member_added = False
            self._arm_initial_delay(group, min(delay, timeout), max(timeout - delay, 0))
        else:
            group.in_initial_delay = False
            group.join_timer = self._later(timeout, lambda: self._on_join_timeout(group))
            self._maybe_complete_join(group)

    def _arm_initial_delay(self, group: Group, delay: int, remaining: int) -> None:
        def fire() -> None:
            if not self._current(group) or not group.is_in(PREPARING):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self.config.initial_rebalance_delay_ms, remaining)
                self._arm_initial_delay(group, step, remaining - step)
                return
            group.in_initial_delay = False
            self._complete_join(group)

        group.join_timer = self._later(delay, fire)

    def _on_join_timeout(self, group: Group) -> None:
        if self._current(group) and group.is_in(PREPARING):
            self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.is_in(PREPARING) and not group.in_initial_delay and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join round: drop who did not rejoin, next generation, answer JoinGroups."""
        self._cancel(group.join_timer)
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
                self._cancel(member.session_timer)
                member.session_timer = None
        now = self.now_ms()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(Event.JOIN_COMPLETE_EMPTY, now)
            logger.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            self._store_safely(group)
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
            self._touch(group, member)
            callback(self._join_result(group, member))
        group.sync_timer = self._later(
            group.max_rebalance_timeout_ms(), lambda: self._on_sync_timeout(group)
        )

    def _on_sync_timeout(self, group: Group) -> None:
        group.sync_timer = None
        if not self._current(group) or not group.is_in(COMPLETING):
            return
        for member in list(group.members.values()):
            if member.sync_callback is None:
                logger.info(
                    "member %s of group %s sent no SyncGroup in time",
                    member.member_id,
                    group.group_id,
                )
                group.remove(member.member_id)
                self._cancel(member.session_timer)
                member.session_timer = None
        self._prepare_rebalance(group, "members did not sync in time")

    def _join_result(self, group: Group, member: Member, *, members: bool = True) -> JoinResult:
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

    # ------------------------------------------------------------ JoinGroup

    def join_group(self, request: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """JoinGroup: ``respond`` is called when the answer is known (maybe much later)."""
        error = self._unavailable(request.group_id)
        if error is None and not request.group_id:
            error = "INVALID_GROUP_ID"
        if error is None and not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            error = "INVALID_SESSION_TIMEOUT"
        if error is None and self._consumer_group_in_use(request.group_id):
            error = "INCONSISTENT_GROUP_PROTOCOL"  # a KIP-848 group with members
        if error is not None:
            respond(JoinResult(error=error, member_id=request.member_id))
            return
        self._release_empty_consumer_group(request.group_id)
        group = self.groups.get(request.group_id)
        created = False
        if group is None:
            if request.member_id:
                respond(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=request.member_id))
                return
            group = Group(request.group_id, state_timestamp_ms=self.now_ms())
            self.groups[request.group_id] = group
            created = True
        if group.is_in(DEAD):
            error = "COORDINATOR_NOT_AVAILABLE"
        elif not group.supports(request.protocol_type, [name for name, _ in request.protocols]):
            error = "INCONSISTENT_GROUP_PROTOCOL"
        if error is not None:
            if created:
                del self.groups[request.group_id]
            respond(JoinResult(error=error, member_id=request.member_id))
            return
        if not request.member_id:
            self._join_new_member(group, request, respond)
        else:
            self._join_known_member(group, request, respond)

    def _new_member(
        self, member_id: str, request: JoinRequest, respond: Callable[[JoinResult], None] | None
    ) -> Member:
        return Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms >= 0
            else request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
            join_callback=respond,
        )

    def _join_new_member(
        self, group: Group, request: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        if len(group.members) + len(group.pending_members) >= self.config.max_group_size:
            respond(JoinResult(error="GROUP_MAX_SIZE_REACHED"))
            return
        member_id = f"{request.client_id}-{uuid.uuid4()}"
        instance = request.group_instance_id
        if instance is not None:
            old_id = group.static_members.get(instance)
            if old_id is not None:
                self._replace_static_member(group, old_id, member_id, request, respond)
                return
        elif request.require_known_member_id:
            # KIP-394: the member must come back with this id; until then it is pending.
            group.pending_members[member_id] = self._later(
                request.session_timeout_ms, lambda: self._expire_pending(group, member_id)
            )
            respond(JoinResult(error="MEMBER_ID_REQUIRED", member_id=member_id))
            return
        self._add_member_and_rebalance(group, member_id, request, respond)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if not self._current(group) or group.pending_members.pop(member_id, None) is None:
            return
        logger.info("pending member %s of group %s never joined", member_id, group.group_id)
        self._maybe_complete_join(group)

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        request: JoinRequest,
        respond: Callable[[JoinResult], None],
    ) -> None:
        member = self._new_member(member_id, request, respond)
        group.add(member)
        if group.is_in(PREPARING):
            group.new_member_added = True
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _replace_static_member(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        respond: Callable[[JoinResult], None],
    ) -> None:
        """A static member came back under a new member id: the old id is fenced."""
        new = self._new_member(new_id, request, None)
        old = group.replace_static(old_id, new)
        self._cancel(old.session_timer)
        old.session_timer = None
        if old.join_callback is not None:
            old.join_callback(JoinResult(error="FENCED_INSTANCE_ID", member_id=old_id))
        if old.sync_callback is not None:
            old.sync_callback(SyncResult(error="FENCED_INSTANCE_ID"))
        logger.info(
            "group %s: static member %s is now %s",
            group.group_id,
            request.group_instance_id,
            new_id,
        )
        unchanged = old.protocols == new.protocols
        is_leader = group.leader_id == new_id
        keep = not is_leader or request.supports_skip_assignment
        if group.is_in(STABLE) and unchanged and keep:
            # Same subscription: keep the generation and the assignment (KIP-345).
            error = self._store_safely(group)
            self._touch(group, new)
            result = self._join_result(group, new, members=is_leader)
            result.skip_assignment = is_leader
            result.error = error
            respond(result)
            return
        new.join_callback = respond
        if group.is_in(PREPARING):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {request.group_instance_id} rejoined")

    def _join_known_member(
        self, group: Group, request: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._cancel(group.pending_members.pop(member_id))
            self._add_member_and_rebalance(group, member_id, request, respond)
            return
        if self._fenced(group, member_id, request.group_instance_id):
            respond(JoinResult(error="FENCED_INSTANCE_ID", member_id=member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.is_in(EMPTY, DEAD):
            respond(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=member_id))
            return
        changed = member.protocols != request.protocols
        if group.is_in(PREPARING):
            self._update_member(member, request, respond)
            self._maybe_complete_join(group)
        elif group.is_in(COMPLETING) and not changed:
            # The member missed our answer: send it again.
            self._touch(group, member)
            respond(self._join_result(group, member))
        elif group.is_in(STABLE) and not changed and member_id != group.leader_id:
            self._touch(group, member)
            respond(self._join_result(group, member))
        else:
            # A changed subscription, or the leader asking for a new assignment.
            self._update_member(member, request, respond)
            self._prepare_rebalance(group, f"member {member_id} rejoined")

    def _update_member(
        self, member: Member, request: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        if member.join_callback is not None:
            superseded = JoinResult(error="REBALANCE_IN_PROGRESS", member_id=member.member_id)
            member.join_callback(superseded)
        member.protocols = list(request.protocols)
        member.client_id = request.client_id
        member.session_timeout_ms = request.session_timeout_ms
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.join_callback = respond

    # ------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes],
        respond: Callable[[SyncResult], None],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> None:
        """SyncGroup: the leader brings ``assignments``; everyone gets their share."""
        error = self._unavailable(group_id)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if error is None:
            if group is None:
                error = "UNKNOWN_MEMBER_ID"
            elif group.is_in(DEAD):
                error = "COORDINATOR_NOT_AVAILABLE"
            elif self._fenced(group, member_id, group_instance_id):
                error = "FENCED_INSTANCE_ID"
            elif member is None:
                error = "UNKNOWN_MEMBER_ID"
            elif generation_id != group.generation_id:
                error = "ILLEGAL_GENERATION"
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                error = "INCONSISTENT_GROUP_PROTOCOL"
            elif group.is_in(PREPARING):
                error = "REBALANCE_IN_PROGRESS"
        if error is not None:
            respond(SyncResult(error=error))
            return
        assert group is not None and member is not None
        self._touch(group, member)
        if group.is_in(STABLE):
            respond(self._sync_result(group, member))
            return
        # CompletingRebalance: hold the answer until the leader's assignment.
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(error="REBALANCE_IN_PROGRESS"))
        member.sync_callback = respond
        if member_id != group.leader_id:
            return
        for each in group.members.values():
            each.assignment = assignments.get(each.member_id, b"")
        self._cancel(group.sync_timer)
        group.sync_timer = None
        group.transition(Event.ASSIGNMENT, self.now_ms())
        store_error = self._store_safely(group)
        logger.info("group %s is stable (generation %d)", group.group_id, group.generation_id)
        for each in group.members.values():
            if each.sync_callback is not None:
                callback, each.sync_callback = each.sync_callback, None
                result = self._sync_result(group, each)
                result.error = store_error
                callback(result)

    @staticmethod
    def _sync_result(group: Group, member: Member) -> SyncResult:
        return SyncResult(
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

    # ------------------------------------------------------------ Heartbeat

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> str:
        """Heartbeat: the error to answer (REBALANCE_IN_PROGRESS tells the member to rejoin)."""
        error = self._unavailable(group_id)
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return "UNKNOWN_MEMBER_ID"
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if self._fenced(group, member_id, group_instance_id):
            return "FENCED_INSTANCE_ID"
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        self._touch(group, member)
        if group.is_in(PREPARING):
            return "REBALANCE_IN_PROGRESS"
        return NONE

    # ----------------------------------------------------------- LeaveGroup

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[str, list[str]]:
        """LeaveGroup for (member id, group instance id) pairs: (group error, member errors)."""
        error = self._unavailable(group_id)
        if error is not None:
            return error, [error] * len(leaving)
        group = self.groups.get(group_id)
        if group is None:
            return NONE, ["UNKNOWN_MEMBER_ID"] * len(leaving)
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE", ["COORDINATOR_NOT_AVAILABLE"] * len(leaving)
        errors = []
        for member_id, instance in leaving:
            target = member_id
            if instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    errors.append("UNKNOWN_MEMBER_ID")
                    continue
                if member_id and member_id != known:
                    errors.append("FENCED_INSTANCE_ID")
                    continue
                target = known
            if target in group.pending_members:
                self._cancel(group.pending_members.pop(target))
                errors.append(NONE)
                self._maybe_complete_join(group)
                continue
            member = group.members.get(target)
            if member is None:
                errors.append("UNKNOWN_MEMBER_ID")
                continue
            logger.info("member %s leaves group %s", target, group_id)
            self._remove_member_and_update(group, member)
            errors.append(NONE)
        return NONE, errors
