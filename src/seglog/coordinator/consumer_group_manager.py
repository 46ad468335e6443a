"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, target assignment, timers.

:class:`ConsumerGroupManager` owns every consumer-protocol group and answers
ConsumerGroupHeartbeat: it validates the member's epoch, resolves
subscriptions (names and regular expressions) against the topics, bumps the
group epoch, recomputes the target assignment with the uniform assignor
(:mod:`seglog.coordinator.assignor`), reconciles the member through the member
state table (:mod:`seglog.coordinator.consumer_group`, where the protocol is
described), and runs the session and revocation timers. It also checks the
member epoch of the group's offset commits and fetches.

It is given the coordinator runtime (clock, timers, serving status), the
configuration, and two views of the topics: their partition counts and their
names. It knows nothing of classic groups: the coordinator facade
(:mod:`seglog.coordinator.group_coordinator`) keeps the two protocols apart
before calling in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from seglog.coordinator.assignor import SERVER_ASSIGNORS, uniform_assign
from seglog.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    new_member_id,
    reconcile,
)
from seglog.coordinator.requests import CoordinatorConfig
from seglog.coordinator.runtime import CoordinatorRuntime, logger
from seglog.coordinator.sessions import touch_session


class ConsumerGroupManager:
    """Every consumer-protocol group of this coordinator."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        config: CoordinatorConfig,
        *,
        topic_partitions: Callable[[str], int],
        topic_names: Callable[[], Iterable[str]],
    ) -> None:
        self._runtime = runtime
        self._config = config
        self._topic_partitions = topic_partitions
        self._topic_names = topic_names
        #: Every consumer-protocol group, by id.
        self.groups: dict[str, ConsumerGroup] = {}
        #: Groups' own settings (group configs), by group id, over ``config``'s.
        self.overrides: dict[str, dict[str, int]] = {}

    # ------------------------------------------------ what the facade asks

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group of ``group_id``, if there is one (empty or not)."""
        return self.groups.get(group_id)

    def in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer-protocol group with members."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def release_if_empty(self, group_id: str) -> None:
        """An empty consumer group is taken over by the classic protocol: forget it."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    def discard(self, group_id: str) -> None:
        """Forget ``group_id``'s consumer group, if any (the group was deleted)."""
        self.groups.pop(group_id, None)

    def shutdown(self) -> None:
        """Cancel every member's timers."""
        for group in self.groups.values():
            for member in group.members.values():
                self._runtime.cancel(member.session_timer)
                self._runtime.cancel(member.revocation_timer)

    def summary(self) -> list[tuple[str, str]]:
        """(group id, state) of every consumer-protocol group."""
        return sorted((g.group_id, g.state.value) for g in self.groups.values())

    # --------------------------------------------------------------- heartbeat

    def refuse(self, request: HeartbeatRequest) -> HeartbeatResult | None:
        """The answer to a ConsumerGroupHeartbeat that cannot be served at all, or None."""
        error = self._runtime.unavailable(request.group_id)
        if error is not None:
            return HeartbeatResult(error=error)
        if not request.group_id:
            return HeartbeatResult(error="INVALID_GROUP_ID")
        invalid = self._invalid_heartbeat(request)
        if invalid is not None:
            return HeartbeatResult(error="INVALID_REQUEST", error_message=invalid)
        if request.server_assignor is not None and request.server_assignor not in SERVER_ASSIGNORS:
            return HeartbeatResult(
                error="UNSUPPORTED_ASSIGNOR",
                error_message=f"Assignor {request.server_assignor} is not supported; "
                f"supported assignors: {', '.join(SERVER_ASSIGNORS)}.",
            )
        return None

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat, once :meth:`refuse` and the facade let it through:
        join, heartbeat, reconcile or leave."""
        if request.member_epoch < 0:
            return self._leave(request)
        group = self.groups.get(request.group_id)
        if request.member_epoch == 0:
            if group is None:
                group = ConsumerGroup(request.group_id)
                self.groups[request.group_id] = group
            member = self._join(group, request)
        else:
            known = group.members.get(request.member_id) if group is not None else None
            if group is None or known is None:
                return HeartbeatResult(
                    error="UNKNOWN_MEMBER_ID",
                    error_message=f"Member {request.member_id} is not a member of the group.",
                )
            member = known
            fenced = self._epoch_error(member, request)
            if fenced is not None:
                return HeartbeatResult(error="FENCED_MEMBER_EPOCH", error_message=fenced)
            self._update_consumer_member(group, member, request)
        self._touch_consumer(group, member)
        self._refresh_subscriptions(group, changed=request.member_epoch == 0)
        self._maybe_compute_target(group)
        before = member.assigned
        reconcile(
            member,
            group.assignment_epoch,
            group.target.get(member.member_id, frozenset()),
            group.held_by_others(member.member_id),
            set(request.owned) if request.owned is not None else None,
        )
        self._arm_revocation(group, member)
        full = request.member_epoch == 0 or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(group.group_id),
            assignment=sorted(member.assigned) if full or member.assigned != before else None,
        )

    def _invalid_heartbeat(self, request: HeartbeatRequest) -> str | None:
        if request.member_epoch == 0:
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return (
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in the first request."
                )
            if request.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be set in the first request."
        elif request.member_epoch > 0 and not request.member_id:
            return "MemberId can't be empty."
        elif request.member_epoch < -2:
            return f"MemberEpoch {request.member_epoch} is invalid."
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                return f"SubscribedTopicRegex is invalid: {exc}"
        return None

    @staticmethod
    def _epoch_error(member: ConsumerMember, request: HeartbeatRequest) -> str | None:
        received = request.member_epoch
        if received > member.member_epoch:
            return (
                f"The member has a greater epoch ({received}) than the coordinator's "
                f"({member.member_epoch}); it must abandon its partitions and rejoin."
            )
        if received < member.member_epoch:
            owned = set(request.owned) if request.owned is not None else set()
            if received != member.previous_member_epoch or not owned <= member.assigned:
                return (
                    f"The member has a smaller epoch ({received}) than the coordinator's "
                    f"({member.member_epoch}); it must abandon its partitions and rejoin."
                )
        return None

    def _join(self, group: ConsumerGroup, request: HeartbeatRequest) -> ConsumerMember:
        old = group.members.get(request.member_id) if request.member_id else None
        if old is not None:
            # It abandoned its partitions (it was fenced, or lost our answer): start afresh.
            self._remove_consumer_member(group, old, "rejoined with epoch 0", bump=False)
        member = ConsumerMember(request.member_id or new_member_id())
        self._update_consumer_member(group, member, request)
        group.members[member.member_id] = member
        logger.info("member %s joins consumer group %s", member.member_id, group.group_id)
        return member

    def _update_consumer_member(
        self, group: ConsumerGroup, member: ConsumerMember, request: HeartbeatRequest
    ) -> None:
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        member.client_id = request.client_id or member.client_id
        member.client_host = request.client_host or member.client_host
        # A changed subscription bumps the group epoch once it is resolved
        # (:meth:`_refresh_subscriptions`).
        if request.subscribed_topic_names is not None:
            member.subscribed = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_regex = request.subscribed_topic_regex or None
        if request.topic_visible is not None:
            member.topic_visible = request.topic_visible

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            return HeartbeatResult(
                error="UNKNOWN_MEMBER_ID",
                error_message=f"Member {request.member_id} is not a member of the group.",
            )
        self._remove_consumer_member(group, member, "left the group")
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )

    def _remove_consumer_member(
        self, group: ConsumerGroup, member: ConsumerMember, reason: str, *, bump: bool = True
    ) -> None:
        if group.members.get(member.member_id) is not member:
            return
        del group.members[member.member_id]
        self._runtime.cancel(member.session_timer)
        self._runtime.cancel(member.revocation_timer)
        member.session_timer = member.revocation_timer = None
        group.target.pop(member.member_id, None)
        if bump:
            group.group_epoch += 1
        logger.info(
            "member %s of consumer group %s %s (group epoch %d)",
            member.member_id,
            group.group_id,
            reason,
            group.group_epoch,
        )

    # ---------------------------------------------------------------- target

    def _current_partition_counts(self, group: ConsumerGroup) -> dict[str, int]:
        return {topic: self._topic_partitions(topic) for topic in sorted(group.subscribed_topics())}

    def _refresh_subscriptions(self, group: ConsumerGroup, *, changed: bool = False) -> None:
        """Resolve subscriptions and partition counts; bump the group epoch if they changed.

        ``changed``: the membership changed (a member joined), so bump anyway.
        """
        names: list[str] | None = None
        for member in group.members.values():
            topics = set(member.subscribed)
            if member.subscribed_regex is not None:
                if names is None:
                    names = [t for t in self._topic_names() if not t.startswith("__")]
                pattern = re.compile(member.subscribed_regex)
                visible = member.topic_visible
                topics.update(
                    t for t in names if pattern.fullmatch(t) and (visible is None or visible(t))
                )
            resolved = tuple(sorted(topics))
            if resolved != member.topics:
                member.topics = resolved
                changed = True
        counts = self._current_partition_counts(group)
        if changed or counts != group.partition_counts:
            group.partition_counts = counts
            group.group_epoch += 1
            logger.info(
                "consumer group %s: %d members, subscribed partitions %s (group epoch %d)",
                group.group_id,
                len(group.members),
                counts,
                group.group_epoch,
            )

    def _maybe_compute_target(self, group: ConsumerGroup) -> None:
        if group.assignment_epoch == group.group_epoch:
            return
        group.target = uniform_assign(
            {m.member_id: m.topics for m in group.members.values()},
            group.partition_counts,
            group.target,
        )
        group.assignment_epoch = group.group_epoch
        logger.info(
            "consumer group %s: target assignment of epoch %d: %s",
            group.group_id,
            group.assignment_epoch,
            {m: sorted(tps) for m, tps in group.target.items()},
        )

    # ----------------------------------------------------------------- timers

    def _session_timeout_ms(self, group_id: str) -> int:
        """The group's session timeout: its group config, else the broker's."""
        own = self.overrides.get(group_id, {})
        return own.get("consumer.session.timeout.ms", self._config.consumer_session_timeout_ms)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's heartbeat interval: its group config, else the broker's."""
        own = self.overrides.get(group_id, {})
        return own.get(
            "consumer.heartbeat.interval.ms", self._config.consumer_heartbeat_interval_ms
        )

    def _touch_consumer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout = self._session_timeout_ms(group.group_id)
        touch_session(
            self._runtime,
            member,
            timeout,
            alive=lambda: group.members.get(member.member_id) is member,
            expire=lambda: self._remove_consumer_member(
                group,
                member,
                f"expired (session timeout {self._session_timeout_ms(group.group_id)} ms)",
            ),
        )

    def _arm_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._runtime.cancel(member.revocation_timer)
            member.revocation_timer = None
            return
        if member.revocation_timer is not None:
            return
        epoch = member.member_epoch

        def fire() -> None:
            member.revocation_timer = None
            if (
                group.members.get(member.member_id) is member
                and member.state is MemberState.UNREVOKED_PARTITIONS
                and member.member_epoch == epoch
            ):
                self._remove_consumer_member(
                    group, member, "did not revoke its partitions in time: fenced"
                )

        member.revocation_timer = self._runtime.schedule(member.rebalance_timeout_ms, fire)

    # ---------------------------------------------------------------- offsets

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> str | None:
        """OffsetCommit against a consumer group: None if accepted, else the error.

        Only called for an existing consumer group. Without a member (epoch < 0)
        a commit is accepted only while the group is empty (admin tools).
        """
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if member_epoch != member.member_epoch:
            return "STALE_MEMBER_EPOCH"
        return None

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> str | None:
        """OffsetFetch v9+ with a member: None if accepted, else the error (as Kafka)."""
        if member_id is None and member_epoch < 0:
            return None
        group = self.groups.get(group_id)
        if group is None:
            return None  # no group, or a classic one: the member fields are not checked
        member = group.members.get(member_id or "")
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if member_epoch != member.member_epoch:
            return "STALE_MEMBER_EPOCH"
        return None
