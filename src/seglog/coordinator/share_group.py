"""Share groups of KIP-932: membership, epochs and the "simple" assignor.

Theory of operation
-------------------
A share group is a group of consumers that read the same partitions
together: records, not partitions, are handed out (by ShareFetch, in
:mod:`seglog.share`), so several members may be assigned the same partition
at once. Membership works like KIP-848's consumer groups
(:mod:`seglog.coordinator.consumer_group`), with one request,
ShareGroupHeartbeat, and the assignment computed by the broker, but simpler:

* the **group epoch** is bumped when a member joins or leaves (or is
  removed by its session timeout), when a subscription changes, or when a
  subscribed topic's partition count changes;
* the **target assignment** is recomputed by the simple assignor
  (:func:`simple_assign`) whenever the group epoch has moved past the epoch
  it was computed at (the *assignment epoch*);
* there is **no revocation**: since no member owns a partition exclusively,
  a member takes its whole target, and the assignment epoch as its member
  epoch, on its next heartbeat. Members are always in Kafka's ``STABLE``
  member state (stored as 0 in ShareGroupCurrentMemberAssignment).

Heartbeat validation (Kafka's ``GroupCoordinatorService`` and
``GroupMetadataManager``): in v1 the client makes up its own member id (a
UUID), so an empty member id is INVALID_REQUEST, as is an empty group id, an
empty rack id, a join (epoch 0) without subscribed topic names, and an epoch
below -1. Epoch 0 joins; -1 leaves; any epoch must be the member's, or its
previous one (the answer that bumped it may have been lost), else
FENCED_MEMBER_EPOCH; an id the group does not know gets UNKNOWN_MEMBER_ID.
As in Kafka, epoch 0 is checked like any other for a member the group
already has: a member that rejoins with its id after its epoch moved on is
fenced until its session expires.
A new member beyond ``group.share.max.size`` gets GROUP_MAX_SIZE_REACHED. The
assignment is sent on a join, on a *full* request (subscribed topic names
given) and when the member's assignment changed.

The group's state is ``Empty`` without members and ``Stable`` with them
(``Dead`` only as an answer about a group that is gone), as Kafka names them.

Group ids are shared with classic and consumer groups: a ShareGroupHeartbeat
for a group of another kind is GROUP_ID_NOT_FOUND ("Group g is not a share
group."), and the other kinds' requests for a share group are refused the
same way ("... is not a consumer group.") or with INCONSISTENT_GROUP_PROTOCOL
(JoinGroup), as Kafka does.

This module holds the data and the assignor, with no I/O and no timing; the
heartbeat protocol, the records and the timers are in
:mod:`seglog.coordinator.share_group_manager`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from seglog.coordinator.assignor import TopicPartition
from seglog.coordinator.requests import NONE, Cancellable

SHARE_ASSIGNOR_NAME = "simple"
"""The assignor a ShareGroupDescribe reports (``group.share.assignors``)."""
PROTOCOL_TYPE = "share"
"""ListGroups' protocol type of a share group (Kafka's ``ShareGroup.PROTOCOL_TYPE``)."""
LEAVE_EPOCH = -1
"""The member epoch of a ShareGroupHeartbeat that leaves the group."""
MEMBER_STATE_STABLE = 0
"""Kafka's ``MemberState.STABLE`` id, the only state of a share group member."""


class ShareGroupState(enum.Enum):
    """Kafka's names of a share group's states."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareMember:
    """One member of a share group."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    """Topic names subscribed to, sorted."""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: frozenset[TopicPartition] = frozenset()
    heartbeat_deadline_ms: int = 0
    session_timer: Cancellable | None = field(default=None, repr=False, compare=False)


@dataclass
class ShareGroup:
    """A share group: members, epochs, the target assignment and its initialized partitions."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    members: dict[str, ShareMember] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    """Partition count of each subscribed topic when the group epoch was last bumped."""
    initialized: dict[str, frozenset[int]] = field(default_factory=dict)
    """Partitions, by topic, that have been in the target assignment (their share state is
    initialized): Kafka's ShareGroupStatePartitionMetadata."""
    written: dict[bytes, bytes] = field(default_factory=dict, repr=False, compare=False)
    """The records of this group in ``__consumer_offsets`` as last written: key → value."""

    @property
    def state(self) -> ShareGroupState:
        """Empty without members, else Stable (Kafka's ``ShareGroup.maybeUpdateGroupState``)."""
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        """The topics some member subscribes to."""
        return {t for m in self.members.values() for t in m.subscribed}


# ------------------------------------------------------------------ assignor


def simple_assign(
    subscriptions: Mapping[str, Iterable[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Iterable[TopicPartition]] | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """The share "simple" assignment: every subscribed partition to at least one member.

    Topic by topic, with ``m`` subscribed members and ``p`` partitions, each
    partition is shared by ``ceil(m / p)`` members (Kafka's desired sharing), so
    every partition is served, each by exactly one member when members do not
    outnumber partitions, and every subscribed member gets some of the topic (ten
    members on one partition all get it). A member's share of a topic's slots
    differs from another's by one at most. Slots go first to the members that
    held them in ``previous`` (sticky, within that balance), then to the member
    with the fewest of the topic, then the fewest overall (then by member id, so
    the result is deterministic).
    """
    members = sorted(subscriptions)
    subscribed = {m: set(subscriptions[m]) for m in members}
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    held: dict[TopicPartition, list[str]] = {}
    for m, tps in (previous or {}).items():
        if m in result:
            for tp in tps:
                held.setdefault(tp, []).append(m)
    for topic in sorted({t for ts in subscribed.values() for t in ts}):
        count = max(partition_counts.get(topic, 0), 0)
        takers = [m for m in members if topic in subscribed[m]]
        if count == 0:
            continue
        sharing = -(-len(takers) // count)
        # Each taker's share of the topic's slots: the floor, and one more for
        # as many takers as the remainder allows.
        base, extra = divmod(sharing * count, len(takers))
        load = dict.fromkeys(takers, 0)
        left = dict.fromkeys(range(count), sharing)
        for allowance in (False, True):
            for p in range(count):
                for m in sorted(held.get((topic, p), [])):
                    if left[p] == 0 or m not in load or (topic, p) in result[m]:
                        continue
                    if load[m] >= base:
                        if not allowance or extra == 0 or load[m] > base:
                            continue
                        extra -= 1
                    result[m].add((topic, p))
                    load[m] += 1
                    left[p] -= 1
        for p in range(count):
            while left[p] > 0:
                candidates = [m for m in takers if (topic, p) not in result[m]]
                chosen = min(candidates, key=lambda m: (load[m], len(result[m]), m))
                result[chosen].add((topic, p))
                load[chosen] += 1
                left[p] -= 1
    return {m: frozenset(tps) for m, tps in result.items()}


# ------------------------------------------------------------------ requests


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    """What the coordinator needs of a ShareGroupHeartbeat (topics by name)."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    """A ShareGroupHeartbeat answer (topics by name)."""

    error: str = NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: list[TopicPartition] | None = None


__all__ = [
    "LEAVE_EPOCH",
    "MEMBER_STATE_STABLE",
    "PROTOCOL_TYPE",
    "SHARE_ASSIGNOR_NAME",
    "ShareGroup",
    "ShareGroupState",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResult",
    "ShareMember",
    "simple_assign",
]
