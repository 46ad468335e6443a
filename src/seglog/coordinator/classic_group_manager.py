"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

:class:`ClassicGroupManager` owns every classic group (:class:`~seglog.coordinator.group.Group`)
and answers the requests of the rebalance protocol: new and known members
joining, pending members (KIP-394), static members (KIP-345), SyncGroup,
Heartbeat and members leaving, and the checks of a classic group's offset
commits. It installs the groups read back from ``__consumer_offsets`` at
start. Sessions, join and sync rounds, their timers and the writes of group
metadata are its part :class:`~seglog.coordinator.classic_rebalance.ClassicRebalance`;
the timers are described in :mod:`seglog.coordinator.group_coordinator`, the
group state machine and its table in :mod:`seglog.coordinator.group`.

A classic group record is also where a group id's committed offsets live,
whichever protocol its members speak (``__consumer_offsets`` keys offsets by
group id alone): :class:`~seglog.coordinator.offset_manager.OffsetManager`
reaches them through the narrow :class:`~seglog.coordinator.offset_manager.GroupTable`
interface this class implements (:meth:`get`, :meth:`get_or_create`,
:meth:`remove`, :meth:`all`).

It knows nothing of KIP-848 consumer groups: the coordinator facade
(:mod:`seglog.coordinator.group_coordinator`) keeps the two protocols apart
before calling in.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from seglog.coordinator.classic_rebalance import ClassicRebalance
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
from seglog.coordinator.offset_store import (
    LoadedGroup,
)
from seglog.coordinator.requests import (
    NONE,
    CoordinatorConfig,
    GroupDescription,
    JoinRequest,
    JoinResult,
    MemberDescription,
    SyncResult,
)
from seglog.coordinator.runtime import CoordinatorRuntime, logger


class ClassicGroupManager:
    """Who is in each classic group, and the rounds that agree on their assignments."""

    def __init__(self, runtime: CoordinatorRuntime, config: CoordinatorConfig) -> None:
        self._runtime = runtime
        self._config = config
        self._rounds = ClassicRebalance(runtime, config, self._current)
        #: Every classic group (and every group id that only stores offsets), by id.
        self.groups: dict[str, Group] = {}

    # ------------------------------------------------------- the group table

    def get(self, group_id: str) -> Group | None:
        """The group of ``group_id``, if there is one."""
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> Group:
        """The group of ``group_id``, created Empty if there is none (to hold offsets)."""
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, state_timestamp_ms=self._runtime.now_ms())
            self.groups[group_id] = group
        return group

    def remove(self, group: Group) -> None:
        """Forget ``group`` (its tombstones are written): it goes Dead."""
        for timer in group.pending_members.values():
            self._runtime.cancel(timer)
        group.transition(Event.DELETE, self._runtime.now_ms())
        del self.groups[group.group_id]

    def all(self) -> list[Group]:
        """Every group, in a list the caller may change the table under."""
        return list(self.groups.values())

    def in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic group with members (or rebalancing)."""
        group = self.groups.get(group_id)
        return group is not None and not group.is_in(EMPTY, DEAD)

    def _current(self, group: Group) -> bool:
        """Whether ``group`` is still the registered group of its id (timers check this)."""
        return self.groups.get(group.group_id) is group

    def restore(self, loaded: Mapping[str, LoadedGroup]) -> None:
        """Install the groups read from ``__consumer_offsets`` (offsets and members).

        A group stored with members comes back Stable with its generation and
        assignments (a starting state, as Kafka's loaded groups have, not a
        transition), and each member's session starts now.
        """
        now = self._runtime.now_ms()
        for group_id, found in loaded.items():
            record = found.metadata
            stable = record is not None and bool(record.members)
            group = Group(group_id, state=STABLE if stable else EMPTY, state_timestamp_ms=now)
            group.offsets = dict(found.offsets)
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
                    self._rounds.touch(group, member)
                group.protocol_type = record.protocol_type or None
                if record.leader in group.members:
                    group.leader_id = record.leader
            self.groups[group_id] = group

    def shutdown(self) -> None:
        """Cancel every timer of every group."""
        cancel = self._runtime.cancel
        for group in self.groups.values():
            cancel(group.join_timer)
            cancel(group.sync_timer)
            for timer in group.pending_members.values():
                cancel(timer)
            for member in group.members.values():
                cancel(member.session_timer)

    # ------------------------------------------------------------ JoinGroup

    def join_error(self, request: JoinRequest) -> str | None:
        """The error a JoinGroup gets before the group is looked at, or None."""
        error = self._runtime.unavailable(request.group_id)
        if error is None and not request.group_id:
            error = "INVALID_GROUP_ID"
        if error is None and not (
            self._config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self._config.max_session_timeout_ms
        ):
            error = "INVALID_SESSION_TIMEOUT"
        return error

    def join(self, request: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """JoinGroup, once :meth:`join_error` found nothing: ``respond`` is called when
        the answer is known (maybe much later)."""
        error: str | None = None
        group = self.groups.get(request.group_id)
        created = False
        if group is None:
            if request.member_id:
                respond(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=request.member_id))
                return
            group = Group(request.group_id, state_timestamp_ms=self._runtime.now_ms())
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
        if len(group.members) + len(group.pending_members) >= self._config.max_group_size:
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
            group.pending_members[member_id] = self._runtime.schedule(
                request.session_timeout_ms, lambda: self._expire_pending(group, member_id)
            )
            respond(JoinResult(error="MEMBER_ID_REQUIRED", member_id=member_id))
            return
        self._add_member_and_rebalance(group, member_id, request, respond)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if not self._current(group) or group.pending_members.pop(member_id, None) is None:
            return
        logger.info("pending member %s of group %s never joined", member_id, group.group_id)
        self._rounds.maybe_complete_join(group)

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
        self._rounds.maybe_prepare_rebalance(group, f"member {member_id} joined")

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
        self._runtime.cancel(old.session_timer)
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
            error = self._rounds.store(group)
            self._rounds.touch(group, new)
            result = self._rounds.join_result(group, new, members=is_leader)
            result.skip_assignment = is_leader
            result.error = error
            respond(result)
            return
        new.join_callback = respond
        if group.is_in(PREPARING):
            self._rounds.maybe_complete_join(group)
        else:
            self._rounds.prepare_rebalance(
                group, f"static member {request.group_instance_id} rejoined"
            )

    def _join_known_member(
        self, group: Group, request: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._runtime.cancel(group.pending_members.pop(member_id))
            self._add_member_and_rebalance(group, member_id, request, respond)
            return
        if group.fenced(member_id, request.group_instance_id):
            respond(JoinResult(error="FENCED_INSTANCE_ID", member_id=member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.is_in(EMPTY, DEAD):
            respond(JoinResult(error="UNKNOWN_MEMBER_ID", member_id=member_id))
            return
        changed = member.protocols != request.protocols
        if group.is_in(PREPARING):
            self._update_member(member, request, respond)
            self._rounds.maybe_complete_join(group)
        elif group.is_in(COMPLETING) and not changed:
            # The member missed our answer: send it again.
            self._rounds.touch(group, member)
            respond(self._rounds.join_result(group, member))
        elif group.is_in(STABLE) and not changed and member_id != group.leader_id:
            self._rounds.touch(group, member)
            respond(self._rounds.join_result(group, member))
        else:
            # A changed subscription, or the leader asking for a new assignment.
            self._update_member(member, request, respond)
            self._rounds.prepare_rebalance(group, f"member {member_id} rejoined")

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
        error = self._runtime.unavailable(group_id)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if error is None:
            if group is None:
                error = "UNKNOWN_MEMBER_ID"
            elif group.is_in(DEAD):
                error = "COORDINATOR_NOT_AVAILABLE"
            elif group.fenced(member_id, group_instance_id):
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
        self._rounds.touch(group, member)
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
        self._runtime.cancel(group.sync_timer)
        group.sync_timer = None
        group.transition(Event.ASSIGNMENT, self._runtime.now_ms())
        store_error = self._rounds.store(group)
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
        error = self._runtime.unavailable(group_id)
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return "UNKNOWN_MEMBER_ID"
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if group.fenced(member_id, group_instance_id):
            return "FENCED_INSTANCE_ID"
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        self._rounds.touch(group, member)
        if group.is_in(PREPARING):
            return "REBALANCE_IN_PROGRESS"
        return NONE

    # ----------------------------------------------------------- LeaveGroup

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[str, list[str]]:
        """LeaveGroup for (member id, group instance id) pairs: (group error, member errors)."""
        error = self._runtime.unavailable(group_id)
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
                self._runtime.cancel(group.pending_members.pop(target))
                errors.append(NONE)
                self._rounds.maybe_complete_join(group)
                continue
            member = group.members.get(target)
            if member is None:
                errors.append("UNKNOWN_MEMBER_ID")
                continue
            logger.info("member %s leaves group %s", target, group_id)
            self._rounds.remove_member(group, member)
            errors.append(NONE)
        return NONE, errors

    # ---------------------------------------------------- offset commit checks

    def validate_commit(
        self, group: Group, generation_id: int, member_id: str, instance: str | None
    ) -> str | None:
        """OffsetCommit's checks of the committer: None if accepted (a member's commit is a
        sign of life), else the error."""
        if group.is_in(DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if generation_id < 0 and not member_id and instance is None and group.is_in(EMPTY):
            return None  # a commit without group management
        if group.fenced(member_id, instance):
            return "FENCED_INSTANCE_ID"
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        if group.is_in(COMPLETING):
            return "REBALANCE_IN_PROGRESS"
        self._rounds.touch(group, member)
        return None

    def validate_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, instance: str | None
    ) -> str | None:
        """TxnOffsetCommit's checks against a classic group (v3+): None if accepted."""
        anonymous = generation_id < 0 and not member_id and instance is None
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

    # ------------------------------------------------ List / Describe

    def listed(self, wanted_states: set[str]) -> list[tuple[str, str, str]]:
        """ListGroups' (group id, protocol type, state) of the live groups in ``wanted_states``
        (lower case; empty: all)."""
        listed = []
        for group in self.groups.values():
            if group.is_in(DEAD):
                continue
            if wanted_states and group.state.value.lower() not in wanted_states:
                continue
            listed.append((group.group_id, group.protocol_type or "", group.state.value))
        return listed

    def describe(self, group: Group) -> GroupDescription:
        """DescribeGroups of one group."""
        stable = group.is_in(STABLE)
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            group.group_id,
            NONE,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )
