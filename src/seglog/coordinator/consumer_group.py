"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat and server-side assignment.

Theory of operation
-------------------
Under the newer protocol (``group.protocol=consumer`` in librdkafka and the
Java client) the broker, not a leader member, computes the assignment, and a
single request, ConsumerGroupHeartbeat, replaces JoinGroup, SyncGroup,
Heartbeat and LeaveGroup. There are no rounds: each heartbeat is answered at
once, and the group converges one heartbeat at a time.

Three epochs order everything:

* the **group epoch** is bumped whenever what the assignment depends on
  changes: a member joins, leaves or is fenced, a subscription changes, or a
  subscribed topic's partition count changes;
* the **target assignment** (partitions per member) is recomputed by the
  uniform assignor (sticky and balanced, :func:`uniform_assign`) when the
  group epoch has moved past the epoch it was computed at (the *assignment
  epoch*);
* each member's **member epoch** reaches the assignment epoch only once the
  member can own its whole target safely (*reconciliation*, below). Offset
  commits and fetches carry the member epoch and are refused with
  STALE_MEMBER_EPOCH when it is not the current one.

Reconciliation (Kafka's ``CurrentAssignmentBuilder``, simplified), done for a
member on each of its heartbeats. A member is in one of three states:

==========================  =====================================================
state                       meaning, and what moves it on
==========================  =====================================================
``stable``                  owns its target at the assignment epoch. When the
                            assignment epoch moves on, the next assignment is
                            computed (below).
``unrevoked_partitions``    must give up partitions that the target gives to
                            others. It keeps its old epoch and is told only the
                            partitions it keeps; once a heartbeat reports that
                            it no longer owns the revoked ones, the next
                            assignment is computed again. A member that does
                            not revoke within its rebalance timeout is fenced.
``unreleased_partitions``   at the assignment epoch, but part of its target is
                            still owned (assigned or being revoked) by another
                            member; it gets those partitions on a later
                            heartbeat, once they are free.
==========================  =====================================================

Computing the next assignment: kept = owned ∩ target; revoked = owned −
target. If something is to be revoked → ``unrevoked_partitions`` with
assigned = kept. Otherwise the member takes the epoch of the target and
assigned = kept + the target partitions no other member holds; if some are
still held → ``unreleased_partitions``, else ``stable``. So a partition is
handed to its new owner only after the old owner has reported it revoked (or
left, or was fenced).

Heartbeat validation (as Kafka): epoch 0 joins (a new member, or an existing
one that abandoned its partitions and rejoins: it is replaced); -1 (and -2,
a static member's leave, treated the same) leaves; any other epoch must be
the member's (or its previous epoch when the partitions it reports are a
subset of its assignment: the answer that bumped it may have been lost), else
FENCED_MEMBER_EPOCH; an unknown member id gets UNKNOWN_MEMBER_ID. The
assignment is put in the answer when the request is *full* (epoch 0, or
rebalance timeout, subscription and owned partitions all given) or when the
member's assigned partitions changed.

Timers (through the coordinator's injected ``call_later``):

* session — per member, ``group.consumer.session.timeout.ms`` (45 s) after its
  last heartbeat; expiry removes the member and bumps the group epoch;
* revocation — a member asked to revoke partitions has its rebalance timeout
  to do so, or it is fenced.

Members are told to heartbeat every ``group.consumer.heartbeat.interval.ms``
(5 s).

Groups of the two protocols share the group-id namespace and committed
offsets (kept on the classic :class:`~seglog.coordinator.group.Group` of the
same id, which stays Empty while the consumer group is in use). As Kafka does
with group migration disabled: a ConsumerGroupHeartbeat for a non-empty
classic group is refused with GROUP_ID_NOT_FOUND, and a JoinGroup for a
consumer group that has members with INCONSISTENT_GROUP_PROTOCOL; an empty
group of either kind is taken over by the other protocol.

Persistence: the membership, epochs and target assignment of consumer groups
are kept **in memory only** (Kafka's ConsumerGroupMetadata/TargetAssignment
records are not written). After a broker restart the members' heartbeats are
answered UNKNOWN_MEMBER_ID (and their commits too), and they rejoin with
epoch 0 and get a fresh assignment, with epochs counted afresh; committed
offsets are in ``__consumer_offsets`` and survive.

ConsumerGroupDescribe reads the groups here (:meth:`describe_consumer_group`);
DescribeGroups, the classic view, reports a consumer group Dead as Kafka does
before DescribeGroups v6, and ListGroups lists it with type ``consumer``.
"""

from __future__ import annotations

import base64
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seglog.coordinator._base import CoordinatorBase, logger
from seglog.coordinator.group import DEAD, EMPTY
from seglog.coordinator.requests import NONE, Cancellable

TopicPartition = tuple[str, int]

SERVER_ASSIGNORS = ("uniform", "range")
ASSIGNOR_NAME = "uniform"
"""The assignor a ConsumerGroupDescribe reports."""
"""The server assignors a member may name; both are served by :func:`uniform_assign`."""


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (see the module documentation)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class ConsumerMember:
    """One member of a consumer-protocol group."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    """Topic names subscribed to by name."""
    subscribed_regex: str | None = None
    """A regular expression of topic names subscribed to (v1), or None."""
    topics: tuple[str, ...] = ()
    """What the subscription resolves to now: the names, and the topics matching the regex."""
    topic_visible: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)
    """From the member's last heartbeat: the topics its regex may match (None: all)."""
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = frozenset()
    revoking: frozenset[TopicPartition] = frozenset()
    heartbeat_deadline_ms: int = 0
    session_timer: Cancellable | None = field(default=None, repr=False)
    revocation_timer: Cancellable | None = field(default=None, repr=False)

    def holds(self) -> frozenset[TopicPartition]:
        """Partitions this member may still be consuming: assigned or being revoked."""
        return self.assigned | self.revoking


class ConsumerGroupState(enum.Enum):
    """Kafka's names of a consumer group's states."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass
class ConsumerGroup:
    """A consumer-protocol group: members, epochs and the target assignment."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    """Partition count of each subscribed topic when the group epoch was last bumped."""

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    def held_by_others(self, member_id: str) -> set[TopicPartition]:
        """Partitions assigned to, or being revoked by, members other than ``member_id``."""
        held: set[TopicPartition] = set()
        for other in self.members.values():
            if other.member_id != member_id:
                held |= other.holds()
        return held


# ------------------------------------------------------------------ assignor


def uniform_assign(
    subscriptions: Mapping[str, Iterable[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Iterable[TopicPartition]] | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """A balanced, sticky assignment of the subscribed topics' partitions to members.

    Every partition of a topic with partitions goes to exactly one member that
    subscribes to it. With the same subscriptions everywhere, member counts
    differ by at most one. Partitions stay with their ``previous`` owner while
    that keeps the balance; the rest go to the least loaded eligible members
    (ties by member id, so the result is deterministic).
    """
    members = sorted(subscriptions)
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return {}
    subscribed = {m: set(subscriptions[m]) for m in members}
    partitions = sorted(
        (topic, p)
        for topic in sorted({t for topics in subscribed.values() for t in topics})
        for p in range(max(partition_counts.get(topic, 0), 0))
    )
    eligible = {tp: [m for m in members if tp[0] in subscribed[m]] for tp in partitions}
    # Each member gets at least its floor and, while the remainder lasts, one
    # more. With identical subscriptions: floor or ceil of partitions / members;
    # otherwise the floor of the even share of the partitions it can take.
    total = len(partitions)
    if all(subscribed[m] == subscribed[members[0]] for m in members):
        base, extra = divmod(total, len(members))
        floor = dict.fromkeys(members, base)
    else:
        floor = {
            m: int(sum(1 / len(eligible[tp]) for tp in partitions if m in eligible[tp]))
            for m in members
        }
        extra = total - sum(floor.values())
    unassigned = set(partitions)
    previous_owner: dict[TopicPartition, str] = {}
    for m, tps in (previous or {}).items():
        if m in result:
            for tp in tps:
                previous_owner.setdefault(tp, m)
    for tp in partitions:
        owner = previous_owner.get(tp)
        if owner is not None and owner in eligible[tp] and len(result[owner]) < floor[owner]:
            result[owner].add(tp)
            unassigned.discard(tp)
    # Then up to one more for as many members as the remainder allows.
    extras_left = extra
    for tp in partitions:
        if tp not in unassigned or extras_left <= 0:
            continue
        owner = previous_owner.get(tp)
        if owner is not None and owner in eligible[tp] and len(result[owner]) == floor[owner]:
            result[owner].add(tp)
            unassigned.discard(tp)
            extras_left -= 1
    # The rest: to the least loaded eligible member below its limit, else least loaded.
    for tp in partitions:
        if tp not in unassigned:
            continue
        candidates = eligible[tp]
        below = [m for m in candidates if len(result[m]) < floor[m]]
        if not below and extras_left > 0:
            below = [m for m in candidates if len(result[m]) == floor[m]]
            if below:
                extras_left -= 1
        pool = below or candidates
        chosen = min(pool, key=lambda m: (len(result[m]), m))
        result[chosen].add(tp)
        unassigned.discard(tp)
    return {m: frozenset(tps) for m, tps in result.items()}


# ------------------------------------------------------------ reconciliation


def next_assignment(
    member: ConsumerMember,
    assignment_epoch: int,
    target: frozenset[TopicPartition],
    held_by_others: set[TopicPartition],
) -> None:
    """Move ``member`` towards ``target`` (see the module documentation); updates it in place."""
    owned = member.assigned
    kept = owned & target
    revoked = owned - target
    if revoked:
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.assigned = kept
        member.revoking = revoked
        return
    free = {tp for tp in target - owned if tp not in held_by_others}
    unreleased = (target - owned) - free
    if member.member_epoch != assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = assignment_epoch
    member.assigned = kept | frozenset(free)
    member.revoking = frozenset()
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE


def reconcile(
    member: ConsumerMember,
    assignment_epoch: int,
    target: frozenset[TopicPartition],
    held_by_others: set[TopicPartition],
    owned: set[TopicPartition] | None,
) -> None:
    """One heartbeat's reconciliation of ``member``; ``owned`` as reported (None: unchanged)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owned & member.revoking:
            return  # still owns partitions it must give up
        member.revoking = frozenset()
        next_assignment(member, assignment_epoch, target, held_by_others)
    elif member.state is MemberState.UNRELEASED_PARTITIONS or (
        member.member_epoch != assignment_epoch or member.assigned != target
    ):
        next_assignment(member, assignment_epoch, target, held_by_others)


# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class HeartbeatRequest:
    """What the coordinator needs of a ConsumerGroupHeartbeat (topics by name)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""
    topic_visible: Callable[[str], bool] | None = None
    """Which topics the member's principal may DESCRIBE (None: all); a regular
    expression matches only those, as Kafka's coordinator matches them."""


@dataclass
class HeartbeatResult:
    """A ConsumerGroupHeartbeat answer (topics by name)."""

    error: str = NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: list[TopicPartition] | None = None


def _new_member_id() -> str:
    """A member id as Kafka makes them: a random uuid in url-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# ------------------------------------------------------------- coordinator


class ConsumerGroupProtocol(CoordinatorBase):
    """The KIP-848 part of the group coordinator: every consumer-protocol group."""

    def __init__(
        self,
        *args: Any,
        topic_partitions: Callable[[str], int] | None = None,
        topic_names: Callable[[], Iterable[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self._topic_partitions = topic_partitions or (lambda topic: 0)
        self._topic_names = topic_names or (lambda: ())

    # ----------------------------------------------- hooks for the classic side

    def _consumer_group_in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer-protocol group with members."""
        group = self.consumer_groups.get(group_id)
        return group is not None and bool(group.members)

    def _release_empty_consumer_group(self, group_id: str) -> None:
        """An empty consumer group is taken over by the classic protocol."""
        group = self.consumer_groups.get(group_id)
        if group is not None and not group.members:
            del self.consumer_groups[group_id]

    def _stop_consumer_timers(self) -> None:
        for group in self.consumer_groups.values():
            for member in group.members.values():
                self._cancel(member.session_timer)
                self._cancel(member.revocation_timer)

    # --------------------------------------------------------------- heartbeat

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: join, heartbeat, reconcile or leave."""
        error = self._unavailable(request.group_id)
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
        classic = self.groups.get(request.group_id)
        if classic is not None and not classic.is_in(EMPTY, DEAD):
            return HeartbeatResult(
                error="GROUP_ID_NOT_FOUND",
                error_message=f"Group {request.group_id} is not a consumer group.",
            )
        if request.member_epoch < 0:
            return self._leave(request)
        group = self.consumer_groups.get(request.group_id)
        if request.member_epoch == 0:
            if group is None:
                group = ConsumerGroup(request.group_id)
                self.consumer_groups[request.group_id] = group
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
        member = ConsumerMember(request.member_id or _new_member_id())
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
        group = self.consumer_groups.get(request.group_id)
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
        self._cancel(member.session_timer)
        self._cancel(member.revocation_timer)
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
        own = self.group_overrides.get(group_id, {})
        return own.get("consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's heartbeat interval: its group config, else the broker's."""
        own = self.group_overrides.get(group_id, {})
        return own.get("consumer.heartbeat.interval.ms", self.config.consumer_heartbeat_interval_ms)

    def _touch_consumer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout = self._session_timeout_ms(group.group_id)
        member.heartbeat_deadline_ms = self.now_ms() + timeout
        if member.session_timer is None:
            member.session_timer = self._later(
                timeout, lambda: self._on_consumer_session_timer(group, member)
            )

    def _on_consumer_session_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        remaining = member.heartbeat_deadline_ms - self.now_ms()
        if remaining > 0:
            member.session_timer = self._later(
                remaining, lambda: self._on_consumer_session_timer(group, member)
            )
            return
        self._remove_consumer_member(
            group,
            member,
            f"expired (session timeout {self._session_timeout_ms(group.group_id)} ms)",
        )

    def _arm_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel(member.revocation_timer)
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

        member.revocation_timer = self._later(member.rebalance_timeout_ms, fire)

    # ---------------------------------------------------------------- offsets

    def _validate_consumer_commit(
        self, group_id: str, member_id: str, member_epoch: int
    ) -> str | None:
        """OffsetCommit against a consumer group: None if accepted, else the error.

        Only called for an existing consumer group. Without a member (epoch < 0)
        a commit is accepted only while the group is empty (admin tools).
        """
        group = self.consumer_groups[group_id]
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if member_epoch != member.member_epoch:
            return "STALE_MEMBER_EPOCH"
        return None

    def validate_consumer_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> str | None:
        """OffsetFetch v9+ with a member: None if accepted, else the error (as Kafka)."""
        if member_id is None and member_epoch < 0:
            return None
        group = self.consumer_groups.get(group_id)
        if group is None:
            return None  # no group, or a classic one: the member fields are not checked
        member = group.members.get(member_id or "")
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        if member_epoch != member.member_epoch:
            return "STALE_MEMBER_EPOCH"
        return None

    # --------------------------------------------------------------- describe

    def consumer_group_summary(self) -> list[tuple[str, str]]:
        """(group id, state) of every consumer-protocol group."""
        return sorted((g.group_id, g.state.value) for g in self.consumer_groups.values())

    def describe_consumer_group(
        self, group_id: str
    ) -> tuple[str, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group: (error, error message, group)."""
        error = self._unavailable(group_id)
        if error is not None:
            return error, None, None
        group = self.consumer_groups.get(group_id)
        if group is None:
            classic = self.groups.get(group_id)
            if classic is not None and not classic.is_in(DEAD):
                return "GROUP_ID_NOT_FOUND", f"Group {group_id} is not a consumer group.", None
            return "GROUP_ID_NOT_FOUND", f"Group {group_id} not found.", None
        return NONE, None, group


__all__ = [
    "ASSIGNOR_NAME",
    "SERVER_ASSIGNORS",
    "ConsumerGroup",
    "ConsumerGroupProtocol",
    "ConsumerGroupState",
    "ConsumerMember",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberState",
    "next_assignment",
    "reconcile",
    "uniform_assign",
]
