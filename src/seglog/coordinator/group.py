"""A consumer group's membership and its state machine (the classic group protocol).

Theory of operation
-------------------
A group is a set of members that share a protocol type (``consumer`` for
Kafka's consumers) and agree, each *generation*, on one protocol (an assignor
such as ``range``) and on an assignment computed by one of them, the
*leader*. The broker never interprets assignments: it collects every
member's subscription, hands them to the leader, and hands the leader's
answer back to each member.

A generation is made in two rounds:

1. **Join.** Something changes the membership (a member joins, leaves, dies,
   or changes its subscription) and the group starts *preparing a
   rebalance*. Every member learns of it (its heartbeats are answered
   REBALANCE_IN_PROGRESS) and sends JoinGroup again; the broker holds each
   JoinGroup until every known member has rejoined or the rebalance timeout
   (the largest ``rebalance.timeout.ms`` of the members) has passed. Members
   that did not rejoin in time are dropped (static members, which have a
   ``group.instance.id``, are kept: they are expected back). Then the
   generation id is incremented, a protocol every member supports is chosen
   by vote, and all JoinGroups are answered: the leader's answer lists every
   member's subscription. The group is then *completing the rebalance*.
2. **Sync.** Every member sends SyncGroup; the broker holds them until the
   leader's SyncGroup arrives with the assignment, stores the group (with the
   assignment) in ``__consumer_offsets``, answers every SyncGroup with that
   member's share, and the group is *stable*.

A group with no member left is *empty*: it may still own committed offsets.
A group that was deleted, or whose offsets all expired, is *dead*.

The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``
(prolonged while new members keep arriving, up to the rebalance timeout) so
that consumers started together land in one generation instead of one each.

The states and what moves the group between them, as a table of (state,
event) → next state. :meth:`Group.transition` refuses every pair not listed,
so a coordinator bug shows up as an exception instead of a silently confused
group. What the coordinator does on each transition is listed beside it.

===================  ===================  ===================  ===============================
state                event                next state           what the coordinator does
===================  ===================  ===================  ===============================
Empty                REBALANCE            PreparingRebalance   start the initial-delay timer
Stable               REBALANCE            PreparingRebalance   start the join timer
CompletingRebalance  REBALANCE            PreparingRebalance   answer held SyncGroups
                                                               REBALANCE_IN_PROGRESS
PreparingRebalance   JOIN_COMPLETE        CompletingRebalance  next generation, answer the
                                                               JoinGroups, start sync timer
PreparingRebalance   JOIN_COMPLETE_EMPTY  Empty                next generation, store group
CompletingRebalance  ASSIGNMENT           Stable               store group, answer SyncGroups
any but Dead         DELETE               Dead                 write tombstones, forget it
===================  ===================  ===================  ===============================

How requests are answered in each state (the coordinator implements this):

* JoinGroup — Empty/Stable/CompletingRebalance: a new member, or a known one
  whose subscription changed (or the leader), starts a rebalance; a known
  follower with an unchanged subscription gets the current generation back.
  PreparingRebalance: held until the join completes. Dead: COORDINATOR_NOT_AVAILABLE.
* SyncGroup — PreparingRebalance: REBALANCE_IN_PROGRESS. CompletingRebalance:
  held until the leader's assignment. Stable: the member's assignment.
* Heartbeat — Stable/CompletingRebalance: NONE. PreparingRebalance:
  REBALANCE_IN_PROGRESS (the signal to rejoin). Empty: UNKNOWN_MEMBER_ID.
* OffsetCommit — Stable/PreparingRebalance: accepted from a member of the
  current generation. CompletingRebalance: REBALANCE_IN_PROGRESS. Empty (or
  no group): accepted only without a generation (``assign()`` users, tools).

This module holds the data and the table and does no I/O and no timing; the
timers (session, rebalance, initial delay) and the storage live in
:mod:`seglog.coordinator.classic_rebalance`, the requests in
:mod:`seglog.coordinator.classic_group_manager`.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seglog.coordinator.offset_store import CommittedOffset


class GroupState(enum.Enum):
    """The five states of a classic group, with the names Kafka reports."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Event(enum.Enum):
    """What moves a group from one state to another."""

    REBALANCE = "membership or subscriptions changed"
    JOIN_COMPLETE = "every member rejoined (or the rebalance timeout passed), some remain"
    JOIN_COMPLETE_EMPTY = "the join round ended with no member left"
    ASSIGNMENT = "the leader's SyncGroup brought the assignment"
    DELETE = "the group was deleted or its offsets expired"


EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

TRANSITIONS: dict[tuple[GroupState, Event], GroupState] = {
    (EMPTY, Event.REBALANCE): PREPARING,
    (STABLE, Event.REBALANCE): PREPARING,
    (COMPLETING, Event.REBALANCE): PREPARING,
    (PREPARING, Event.JOIN_COMPLETE): COMPLETING,
    (PREPARING, Event.JOIN_COMPLETE_EMPTY): EMPTY,
    (COMPLETING, Event.ASSIGNMENT): STABLE,
    (EMPTY, Event.DELETE): DEAD,
    (PREPARING, Event.DELETE): DEAD,
    (COMPLETING, Event.DELETE): DEAD,
    (STABLE, Event.DELETE): DEAD,
}
"""(state, event) → next state; anything else is an :class:`IllegalTransitionError`."""


class IllegalTransitionError(RuntimeError):
    """A transition the table does not allow: a bug in the coordinator."""


@dataclass
class Member:
    """One member of a group, as the coordinator knows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(protocol name, subscription metadata), in the member's order of preference."""
    assignment: bytes = b""
    join_callback: Callable[[Any], None] | None = None
    """Set while the member's JoinGroup is held (it is "awaiting join")."""
    sync_callback: Callable[[Any], None] | None = None
    """Set while the member's SyncGroup is held (it is "awaiting sync")."""
    heartbeat_deadline_ms: int = 0
    """When the session expires unless a heartbeat (or any request) arrives first."""
    session_timer: Any = None

    def metadata(self, protocol: str | None) -> bytes:
        """The member's subscription for ``protocol`` (b"" if it has none)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        """The names of the member's protocols."""
        return [name for name, _ in self.protocols]


@dataclass
class Group:
    """A group's membership, generation and committed offsets, and its state machine."""

    group_id: str
    state: GroupState = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id → member id."""
    pending_members: dict[str, Any] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED, not yet joined → their expiry timer."""
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    """When the group entered its current state (for offset expiry of empty groups)."""
    new_member_added: bool = False
    join_timer: Any = None
    sync_timer: Any = None
    in_initial_delay: bool = False

    # ------------------------------------------------------------- states

    def transition(self, event: Event, now_ms: int) -> GroupState:
        """Move along :data:`TRANSITIONS`; raises for a pair the table does not list."""
        target = TRANSITIONS.get((self.state, event))
        if target is None:
            raise IllegalTransitionError(
                f"group {self.group_id!r}: no transition from {self.state.value} on {event.name}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms
        return target

    def is_in(self, *states: GroupState) -> bool:
        """Whether the group is in one of ``states``."""
        return self.state in states

    # ------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        """Add ``member``; the first member of a group leads it."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        """Remove a member; a new leader is chosen if it led the group."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new: Member) -> Member:
        """Give a static member a new member id, keeping its place and assignment."""
        old = self.members.pop(old_id)
        new.assignment = old.assignment
        self.members[new.member_id] = new
        assert new.group_instance_id is not None
        self.static_members[new.group_instance_id] = new.member_id
        if self.leader_id == old_id:
            self.leader_id = new.member_id
        return old

    def fenced(self, member_id: str, instance: str | None) -> bool:
        """Whether ``instance`` (a static member) now belongs to another member id (KIP-345)."""
        if instance is None:
            return False
        known = self.static_members.get(instance)
        return known is not None and known != member_id

    def all_members_joined(self) -> bool:
        """Every member is awaiting join and no MEMBER_ID_REQUIRED member is still out."""
        return not self.pending_members and all(
            m.join_callback is not None for m in self.members.values()
        )

    def elect_joined_leader(self) -> None:
        """Make sure the leader is a member that rejoined (it gets the member list)."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.join_callback is not None:
            return
        for member_id, member in self.members.items():
            if member.join_callback is not None:
                self.leader_id = member_id
                return

    def max_rebalance_timeout_ms(self) -> int:
        """The rebalance timeout of the group: the largest of its members'."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---------------------------------------------------------- protocols

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's ``supportsProtocols``)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return bool(self._candidates() & set(protocols))

    def _candidates(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str | None:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        candidates = self._candidates()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(n for n in member.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # Ties go to the first protocol listed by the most members; Kafka breaks them arbitrarily.
        return max(votes, key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = consumer_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ``consumer`` protocol subscription (its first fields), None if unreadable.

    ``ConsumerProtocolSubscription`` = version:int16 topics:[string] ...; the
    fields after the topics (user data, owned partitions, rack) are not needed.
    """
    try:
        pos = 2
        (count,) = _INT32.unpack_from(metadata, pos)
        pos += 4
        topics = []
        for _ in range(count):
            (size,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.append(metadata[pos : pos + size].decode())
            pos += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
