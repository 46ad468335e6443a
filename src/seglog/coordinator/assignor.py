"""The server-side assignor of KIP-848 consumer groups: balanced and sticky.

A consumer group's target assignment (:mod:`seglog.coordinator.consumer_group`)
is computed here from the members' resolved subscriptions, the partition
counts of the subscribed topics, and the previous target, whenever the group
epoch moves past the epoch the target was computed at. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TopicPartition = tuple[str, int]

SERVER_ASSIGNORS = ("uniform", "range")
"""The server assignors a member may name; both are served by :func:`uniform_assign`."""
ASSIGNOR_NAME = "uniform"
"""The assignor a ConsumerGroupDescribe reports."""


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


__all__ = ["ASSIGNOR_NAME", "SERVER_ASSIGNORS", "TopicPartition", "uniform_assign"]
