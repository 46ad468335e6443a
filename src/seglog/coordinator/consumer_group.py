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
member on each of its heartbeats. A member is in one of the three states of
Kafka's ``MemberState`` (Kafka's fourth, ``UNKNOWN``, stands for a state
written by a newer version; seglog does not store members, so it has none):

==========================  =====================================================
state                       meaning
==========================  =====================================================
``stable``                  owns its target at the assignment epoch.
``unrevoked_partitions``    must give up partitions that the target gives to
                            others. It keeps its old epoch and is told only the
                            partitions it keeps. A member that does not revoke
                            within its rebalance timeout is fenced.
``unreleased_partitions``   at the assignment epoch, but part of its target is
                            still owned (assigned or being revoked) by another
                            member; it gets those partitions on a later
                            heartbeat, once they are free.
==========================  =====================================================

A heartbeat reconciles a member that is not stable, or whose epoch or
assignment is behind the target. Computing the next assignment: kept = owned ∩
target; revoked = owned − target. If something is to be revoked, the event is
REVOKE and assigned = kept. Otherwise the member takes the epoch of the target
and assigned = kept + the target partitions no other member holds: the event
is AWAIT_RELEASE if some are still held, else CONVERGE. A member waiting to
revoke whose heartbeat still reports a revoked partition (or reports nothing)
gets STILL_REVOKING; once it no longer owns them, the next assignment is
computed again. So a partition is handed to its new owner only after the old
owner has reported it revoked (or left, or was fenced).

:data:`MEMBER_TRANSITIONS` is the table of (state, event) → next state that
:meth:`ConsumerMember.transition` follows; a pair it does not list raises
:class:`~seglog.coordinator.group.IllegalTransitionError`:

=========================  ==============  =========================  ====================
state                      event           next state                 member epoch
=========================  ==============  =========================  ====================
any                        REVOKE          unrevoked_partitions       kept
any                        AWAIT_RELEASE   unreleased_partitions      → assignment epoch
any                        CONVERGE        stable                     → assignment epoch
unrevoked_partitions       STILL_REVOKING  unrevoked_partitions       kept
=========================  ==============  =========================  ====================

(REVOKE from ``unrevoked_partitions`` happens when the member has revoked
what it had to but the target moved on meanwhile and takes more.)

Heartbeat validation (as Kafka): epoch 0 joins (a new member, or an existing
one that abandoned its partitions and rejoins: it is replaced); -1 (and -2,
a static member's leave, treated the same) leaves; any other epoch must be
the member's (or its previous epoch when the partitions it reports are a
subset of its assignment: the answer that bumped it may have been lost), else
FENCED_MEMBER_EPOCH; an unknown member id gets UNKNOWN_MEMBER_ID. The
assignment is put in the answer when the request is *full* (epoch 0, or
rebalance timeout, subscription and owned partitions all given) or when the
member's assigned partitions changed.

Timers (through the coordinator runtime's
:meth:`~seglog.coordinator.runtime.CoordinatorRuntime.schedule`):

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

This module holds the data, the member state table and the reconciliation,
with no I/O and no timing; the heartbeat protocol, the target assignment and
the timers are in :mod:`seglog.coordinator.consumer_group_manager`, the assignor in
:mod:`seglog.coordinator.assignor`.

ConsumerGroupDescribe reads these groups; DescribeGroups, the classic view,
reports a consumer group Dead as Kafka does before DescribeGroups v6, and
ListGroups lists it with type ``consumer``.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from seglog.coordinator.assignor import (
    ASSIGNOR_NAME,
    SERVER_ASSIGNORS,
    TopicPartition,
    uniform_assign,
)
from seglog.coordinator.group import IllegalTransitionError
from seglog.coordinator.requests import NONE, Cancellable

# ------------------------------------------------------------- member states


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class MemberEvent(enum.Enum):
    """What a heartbeat's reconciliation found (see the module documentation)."""

    REVOKE = "the target takes partitions the member owns: it must revoke them first"
    AWAIT_RELEASE = "the member reaches the assignment epoch; others still hold some of its target"
    CONVERGE = "the member reaches the assignment epoch and owns its whole target"
    STILL_REVOKING = "the member still owns (or did not report) partitions it must revoke"


_STABLE = MemberState.STABLE
_UNREVOKED = MemberState.UNREVOKED_PARTITIONS
_UNRELEASED = MemberState.UNRELEASED_PARTITIONS

MEMBER_TRANSITIONS: dict[tuple[MemberState, MemberEvent], MemberState] = {
    (_STABLE, MemberEvent.REVOKE): _UNREVOKED,
    (_STABLE, MemberEvent.AWAIT_RELEASE): _UNRELEASED,
    (_STABLE, MemberEvent.CONVERGE): _STABLE,
    (_UNREVOKED, MemberEvent.STILL_REVOKING): _UNREVOKED,
    (_UNREVOKED, MemberEvent.REVOKE): _UNREVOKED,
    (_UNREVOKED, MemberEvent.AWAIT_RELEASE): _UNRELEASED,
    (_UNREVOKED, MemberEvent.CONVERGE): _STABLE,
    (_UNRELEASED, MemberEvent.REVOKE): _UNREVOKED,
    (_UNRELEASED, MemberEvent.AWAIT_RELEASE): _UNRELEASED,
    (_UNRELEASED, MemberEvent.CONVERGE): _STABLE,
}
"""(member state, event) → next state; anything else is an :class:`IllegalTransitionError`."""


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

    def transition(self, event: MemberEvent) -> MemberState:
        """Move along :data:`MEMBER_TRANSITIONS`; raises for a pair the table does not list."""
        target = MEMBER_TRANSITIONS.get((self.state, event))
        if target is None:
            raise IllegalTransitionError(
                f"member {self.member_id!r}: no transition from {self.state.value} on {event.name}"
            )
        self.state = target
        return target


# -------------------------------------------------------------------- groups


class ConsumerGroupState(enum.Enum):
    """Kafka's names of a consumer group's states (derived from its members and epochs)."""

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
        """The group's state, as Kafka derives it."""
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
        """The topics some member's subscription resolves to."""
        return {t for m in self.members.values() for t in m.topics}

    def held_by_others(self, member_id: str) -> set[TopicPartition]:
        """Partitions assigned to, or being revoked by, members other than ``member_id``."""
        held: set[TopicPartition] = set()
        for other in self.members.values():
            if other.member_id != member_id:
                held |= other.holds()
        return held


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
        member.transition(MemberEvent.REVOKE)
        member.assigned = kept
        member.revoking = revoked
        return
    free = {tp for tp in target - owned if tp not in held_by_others}
    unreleased = (target - owned) - free
    member.transition(MemberEvent.AWAIT_RELEASE if unreleased else MemberEvent.CONVERGE)
    if member.member_epoch != assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = assignment_epoch
    member.assigned = kept | frozenset(free)
    member.revoking = frozenset()


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
            member.transition(MemberEvent.STILL_REVOKING)
            return
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


def new_member_id() -> str:
    """A member id as Kafka makes them: a random uuid in url-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


__all__ = [
    "ASSIGNOR_NAME",
    "MEMBER_TRANSITIONS",
    "SERVER_ASSIGNORS",
    "ConsumerGroup",
    "ConsumerGroupState",
    "ConsumerMember",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberEvent",
    "MemberState",
    "new_member_id",
    "next_assignment",
    "reconcile",
    "uniform_assign",
]
