"""The group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets, timers.

Theory of operation
-------------------
One :class:`GroupCoordinator` serves every group (a single broker is the
coordinator of all of them). It runs on one thread, the broker's event loop,
and does no I/O of its own except synchronous appends to
``__consumer_offsets`` through :class:`~seglog.coordinator.offset_store.OffsetStore`
(a write to the page cache, like a Produce); the fsync that makes an
OffsetCommit durable is left to the caller, which awaits it off the loop
before answering (:attr:`CommitOutcome.flush`).

Time comes from two injected callables, so the logic runs under a fake clock
in tests without sleeping:

* ``clock()`` — wall-clock seconds (commit timestamps, offset expiry);
* ``call_later(seconds, callback)`` — a timer with ``cancel()``
  (``loop.call_later`` in the broker).

Requests that must wait (JoinGroup until the join round ends, SyncGroup
until the leader's assignment) take a ``respond`` callback instead of
returning: it is called exactly once, maybe before the method returns. The
broker passes a future's ``set_result``.

Timers, each cancelled when what it guards happens first:

* session — per member, ``session.timeout.ms`` after its last heartbeat,
  commit, join or sync; a member whose JoinGroup or SyncGroup is being held is
  alive by definition. Expiry removes the member and rebalances the group.
* pending member — a member id handed out with MEMBER_ID_REQUIRED that is not
  used within the session timeout is forgotten.
* join — the rebalance timeout of a join round (or the initial delay of an
  empty group's first round, extended while new members keep coming).
* sync — the rebalance timeout of the sync round: members that never sent
  SyncGroup are removed and the group rebalances without them.
* retention — every ``offsets.retention.check.interval.ms``, offsets older than
  ``offsets.retention.minutes`` are deleted (for an empty group counted from
  when it became empty; for a group without group management from the commit;
  for a consumer group from the commit when no member subscribes to the topic
  any more), and empty groups left without offsets are deleted.

Loading: at start the broker reads ``__consumer_offsets`` off the loop
(:meth:`GroupCoordinator.load`) and hands the result to
:meth:`GroupCoordinator.finish_loading`; until then every group request is
answered COORDINATOR_LOAD_IN_PROGRESS. Groups stored with members come back
Stable with their generation and assignments, so consumers that keep
heartbeating through a broker restart carry on without a rebalance; those
that do not come back expire after their session timeout.

The group state machine and its table are in :mod:`seglog.coordinator.group`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

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
    CommittedOffset,
    GroupRecord,
    LoadedGroup,
    MemberRecord,
    OffsetStore,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from seglog.coordinator.requests import (
    NONE,
    CallLater,
    Cancellable,
    CommitOutcome,
    CoordinatorConfig,
    GroupDescription,
    JoinRequest,
    JoinResult,
    MemberDescription,
    OffsetCommitEntry,
    SyncResult,
)
from seglog.errors import SeglogError
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

# ------------------------------------------------------------ the coordinator


class GroupCoordinator:
    """Every group of this broker; see the module documentation."""

    def __init__(
        self,
        config: CoordinatorConfig,
        store: OffsetStore,
        *,
        clock: Callable[[], float],
        call_later: CallLater,
        partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
    ) -> None:
        self.config = config
        self.store = store
        self._clock = clock
        self._call_later = call_later
        self._partition_exists = partition_exists
        self.groups: dict[str, Group] = {}
        self.loading = True
        self._retention_timer: Cancellable | None = None
        self._active = True

    # ------------------------------------------------------------ plumbing

    def now_ms(self) -> int:
        """The clock in milliseconds."""
        return int(self._clock() * 1000)

    def _later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        def run() -> None:
            if not self._active:
                return
            try:
                callback()
            except Exception:
                logger.exception("a group coordinator timer failed")

        return self._call_later(max(delay_ms, 0) / 1000, run)

    @staticmethod
    def _cancel(timer: Cancellable | None) -> None:
        if timer is not None:
            timer.cancel()

    def _unavailable(self) -> str | None:
        if not self._active:
            return "COORDINATOR_NOT_AVAILABLE"
        if self.loading:
            return "COORDINATOR_LOAD_IN_PROGRESS"
        return None

    def _current(self, group: Group) -> bool:
        """Whether ``group`` is still the registered group of its id (timers check this)."""
        return self.groups.get(group.group_id) is group

    # ------------------------------------------------------------- loading

    def load(self) -> dict[str, LoadedGroup]:
        """Read ``__consumer_offsets`` (blocking; run it off the event loop)."""
        return self.store.load()

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

    def shutdown(self) -> None:
        """Stop every timer; later requests are answered COORDINATOR_NOT_AVAILABLE."""
        self._active = False
        self._cancel(self._retention_timer)
        for group in self.groups.values():
            self._cancel(group.join_timer)
            self._cancel(group.sync_timer)
            for timer in group.pending_members.values():
                self._cancel(timer)
            for member in group.members.values():
                self._cancel(member.session_timer)

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
        self._append(group.group_id, [(group_key(group.group_id), group_value(record))])

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        return self.store.append(group_id, records, self.now_ms())

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

    def _store_safely(self, group: Group) -> str:
        try:
            self._store_group(group)
        except SeglogError as exc:
            logger.error("cannot store group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        return NONE

    # ------------------------------------------------------------ JoinGroup

    def join_group(self, request: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """JoinGroup: ``respond`` is called when the answer is known (maybe much later)."""
        error = self._unavailable()
        if error is None and not request.group_id:
            error = "INVALID_GROUP_ID"
        if error is None and not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            error = "INVALID_SESSION_TIMEOUT"
        if error is not None:
            respond(JoinResult(error=error, member_id=request.member_id))
            return
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

    def _fenced(self, group: Group, member_id: str, instance: str | None) -> bool:
        if instance is None:
            return False
        known = group.static_members.get(instance)
        return known is not None and known != member_id

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
        error = self._unavailable()
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
        error = self._unavailable()
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
        error = self._unavailable()
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
        error = self._unavailable() or ("INVALID_GROUP_ID" if not group_id else None)
        group = self.groups.get(group_id)
        if error is None:
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

    # ---------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[str, list[tuple[str, int, CommittedOffset | None]]]:
        """OffsetFetch: (group error, [(topic, partition, committed or None)]).

        ``partitions`` None asks for every partition the group has an offset for.
        """
        error = self._unavailable()
        if error is not None:
            return error, [(t, p, None) for t, p in partitions or []]
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return NONE, [(t, p, c) for (t, p), c in sorted(offsets.items())]
        return NONE, [(t, p, offsets.get((t, p))) for t, p in partitions]

    # ----------------------------------------------- List / Describe / Delete

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> tuple[str, list[tuple[str, str, str]]]:
        """ListGroups: (error, [(group id, protocol type, state)]), filtered as Kafka does."""
        error = self._unavailable()
        if error is not None:
            return error, []
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        if wanted_types and "classic" not in wanted_types:
            return NONE, []
        listed = []
        for group in self.groups.values():
            if group.is_in(DEAD):
                continue
            if wanted_states and group.state.value.lower() not in wanted_states:
                continue
            listed.append((group.group_id, group.protocol_type or "", group.state.value))
        return NONE, sorted(listed)

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is reported Dead, as Kafka does."""
        error = self._unavailable()
        group = self.groups.get(group_id)
        if error is not None or group is None:
            return GroupDescription(group_id, error or NONE, DEAD.value, "", "", [])
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
            group_id,
            NONE,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def delete_groups(self, group_ids: list[str]) -> dict[str, str]:
        """DeleteGroups: each empty group's offsets and metadata are tombstoned."""
        results: dict[str, str] = {}
        for group_id in group_ids:
            error = self._unavailable()
            group = self.groups.get(group_id)
            if error is None:
                if not group_id:
                    error = "INVALID_GROUP_ID"
                elif group is None or group.is_in(DEAD):
                    error = "GROUP_ID_NOT_FOUND"
                elif not group.is_in(EMPTY):
                    error = "NON_EMPTY_GROUP"
            if error is None:
                assert group is not None
                error = self._delete_group(group)
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
        error = self._unavailable()
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


def create_coordinator(
    log_dir: LogDir,
    properties: Mapping[str, str],
    *,
    clock: Callable[[], float],
    call_later: CallLater,
) -> GroupCoordinator:
    """A coordinator over ``log_dir``'s ``__consumer_offsets``, configured by broker properties."""
    config = CoordinatorConfig.from_properties(properties)
    store = OffsetStore(
        log_dir,
        partitions=config.offsets_topic_num_partitions,
        segment_bytes=config.offsets_topic_segment_bytes,
    )

    def partition_exists(topic: str, partition: int) -> bool:
        try:
            log_dir.log(topic, partition)
        except SeglogError:
            return False
        return True

    return GroupCoordinator(
        config, store, clock=clock, call_later=call_later, partition_exists=partition_exists
    )


__all__ = [
    "CallLater",
    "Cancellable",
    "CommitOutcome",
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupDescription",
    "JoinRequest",
    "JoinResult",
    "MemberDescription",
    "OffsetCommitEntry",
    "SyncResult",
    "create_coordinator",
]
